"""ISA assertions and per-kernel assembly reading, on assembly shaped like clang-19's."""

from __future__ import annotations

import pytest

from pytest_gpuperf.errors import ConfigError, KernelNotFound
from pytest_gpuperf.gate.static import check_isa, kernel_asm, kernel_names


def function(name: str, index: int, body: str, info: str) -> str:
    return f"""\t.text
\t.protected\t{name}              ; -- Begin function {name}
\t.globl\t{name}
\t.p2align\t8
\t.type\t{name},@function
{name}:                             ; @{name}
; %bb.0:
{body}
\ts_endpgm
\t.section\t.rodata,"a",@progbits
\t.p2align\t6, 0x0
\t.amdhsa_kernel {name}
\t\t.amdhsa_next_free_vgpr 8
\t.end_amdhsa_kernel
\t.text
.Lfunc_end{index}:
\t.size\t{name}, .Lfunc_end{index}-{name}
                                        ; -- End function
\t.section\t.AMDGPU.csdata,"",@progbits
; Kernel info:
; codeLenInByte = 140
{info}
"""


PLAIN = function(
    "plain",
    0,
    "\tglobal_load_dword v1, v[2:3], off\n\tglobal_store_dword v[0:1], v1, off",
    "; NumSgprs: 14\n; NumVgprs: 8\n; Occupancy: 8",
)
BYPASS = function(
    "bypass",
    1,
    "\tglobal_load_dword v6, v[2:3], off sc0 sc1\n"
    "\tglobal_load_dwordx4 v[4:7], v[2:3], off ; sc0 sc1 in a comment does not count\n"
    "\tscratch_store_dword off, v4, off offset:8 ; 4-byte Folded Spill\n"
    "\ts_getpc_b64 s[0:1]\n"
    "\ts_add_u32 s0, s0, __ocml_exp_f32@rel32@lo+4\n"
    "\ts_addc_u32 s1, s1, __ocml_exp_f32@rel32@hi+12\n"
    "\ts_swappc_b64 s[30:31], s[0:1]",
    "; NumSgprs: 20\n; NumVgprs: 12\n; NumAgprs: 4\n; TotalNumVgprs: 16\n; Occupancy: 8",
)
ASM = '\t.amdgcn_target "amdgcn-amd-amdhsa--gfx942"\n' + PLAIN + BYPASS + "\t.amdgpu_metadata\n"


def test_kernels_are_listed_in_order():
    assert kernel_names(ASM) == ["plain", "bypass"]


def test_kernel_info_is_the_kernels_own():
    assert kernel_asm(ASM, "plain").info == {"NumSgprs": 14, "NumVgprs": 8, "Occupancy": 8}
    info = kernel_asm(ASM, "bypass").info
    assert (info["NumVgprs"], info["NumAgprs"], info["TotalNumVgprs"]) == (12, 4, 16)


def test_instructions_leave_out_comments_labels_and_directives():
    instructions = kernel_asm(ASM, "plain").instructions()
    assert instructions == [
        "global_load_dword v1, v[2:3], off",
        "global_store_dword v[0:1], v1, off",
        "s_endpgm",
    ]


def test_spill_stores_and_calls_are_read_from_the_body():
    bypass = kernel_asm(ASM, "bypass")
    assert bypass.vgpr_spill_stores == 1
    assert bypass.called_functions == ("__ocml_exp_f32",)
    assert kernel_asm(ASM, "plain").called_functions == ()


def test_check_isa_looks_only_at_that_kernels_instructions():
    assert check_isa(ASM, "bypass", ["sc0 sc1", "global_load_dword ... sc0 sc1"]) == []
    assert check_isa(ASM, "plain", ["sc0 sc1", "global_load_dword"]) == ["sc0 sc1"]


def test_tokens_are_whole_and_in_order_on_one_line():
    expect = ["global_load_dwordx4", "global_store_dword", "sc1 sc0", "global_load_dwordx4 ... sc0"]
    # dwordx4 is in bypass; dword's store is not; the order matters; a comment is no operand
    assert check_isa(ASM, "bypass", expect) == expect[1:]
    assert check_isa(ASM, "plain", ["global_load_dwordx4"]) == ["global_load_dwordx4"]
    assert check_isa(ASM, "plain", ["v[2:3], off", "v1,v[2:3]"]) == []


def test_an_unknown_kernel_lists_the_ones_there_are():
    with pytest.raises(
        KernelNotFound, match=r"'nope' in the assembly; the module has: plain, bypass"
    ):
        check_isa(ASM, "nope", ["s_endpgm"])


def test_an_empty_expectation_is_refused():
    with pytest.raises(ConfigError, match="at least one token"):
        check_isa(ASM, "plain", ["  "])
