"""Reading code facts from real compiler outputs recorded on this project's machines
(tests/unit/data): NVRTC 13.5's ptxas -v report, nvdisasm 13.5's SASS, clang 19.1.7's gfx942
assembly, all of tests/unit/data/kernels.hip; the occupancy rules against the H100's driver
(2026-11-27, numbers below); and the diff lines a failure shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gpuperf.explain.code.code_diff import SAME_CODE, SAME_FACTS, code_changes, facts_line
from pytest_gpuperf.explain.code.code_facts import CodeFacts
from pytest_gpuperf.explain.code.memory_ops import count_amd, count_sass, sass_function
from pytest_gpuperf.explain.code.nvidia_occupancy import max_threads_per_block, nvidia_occupancy
from pytest_gpuperf.explain.code.ptxas import parse_ptxas_log
from pytest_gpuperf.gate.static.asm import kernel_asm
from pytest_gpuperf.runtime.info import KernelResources, occupancy_words

DATA = Path(__file__).parent / "data"


def test_ptxas_report_gives_registers_stack_and_shared_per_kernel():
    reports = parse_ptxas_log((DATA / "nvrtc13.5-sm_90-ptxas-v.log").read_text())
    assert sorted(reports) == ["add3", "bytes", "copy4", "spill", "tile"]
    spill, tile, add3 = reports["spill"], reports["tile"], reports["add3"]
    assert (spill.registers, spill.stack_bytes, spill.spill_store_bytes) == (32, 256, 0)
    assert (tile.registers, tile.shared_bytes, tile.arch) == (12, 1024, "sm_90")
    assert (add3.registers, add3.stack_bytes, add3.shared_bytes) == (14, 0, 0)


def test_ptxas_report_gives_spills():
    # the unroll-64 chain kernel of tests/gpu/test_explain_on_gpu.py with --maxrregcount=32
    report = parse_ptxas_log((DATA / "nvrtc13.5-sm_90-spills-ptxas-v.log").read_text())
    kernel = report["add_more"]
    assert (kernel.registers, kernel.stack_bytes) == (32, 520)
    assert (kernel.spill_store_bytes, kernel.spill_load_bytes) == (732, 776)


def test_a_log_without_ptxas_lines_names_no_kernel():
    assert parse_ptxas_log("") == {}
    assert parse_ptxas_log("kernels.hip(3): warning: variable declared but never used") == {}


SASS = (DATA / "nvdisasm13.5-sm_90-kernels.sass").read_text()


@pytest.mark.parametrize(
    "kernel, loads, stores",
    [
        ("copy4", (("b128", 1),), (("b128", 1),)),
        ("add3", (("b32", 3),), (("b32", 1),)),
        ("tile", (("b64", 1),), (("b64", 1),)),  # shared memory (LDS/STS) is not global
        ("bytes", (("b8", 1),), (("b16", 1),)),
    ],
)
def test_sass_counts_global_loads_and_stores_by_width(kernel, loads, stores):
    text = sass_function(SASS, kernel)
    assert text.lstrip().startswith(".section\t.text." + kernel)
    assert count_sass(text) == (loads, stores)


def test_sass_of_a_missing_function_is_empty():
    assert sass_function(SASS, "spill") == ""  # left out of the recording
    assert count_sass("") == ((), ())


def test_a_predicated_sass_instruction_counts():
    line = "        /*0090*/               @!P0 LDG.E.64.CONSTANT R2, desc[UR4][R2.64] ;\n"
    assert count_sass(line) == ((("b64", 1),), ())
    assert count_sass("        /*00a0*/  LDGSTS.E.BYPASS.128 [R5], desc[UR6][R2.64] ;\n") == (
        (("b128", 1),),
        (),
    )


ASM = (DATA / "clang19-gfx942-kernels.s").read_text()


@pytest.mark.parametrize(
    "kernel, loads, stores",
    [
        ("copy4", (("b128", 1),), (("b128", 1),)),
        ("add3", (("b32", 3),), (("b32", 1),)),
        ("tile", (("b64", 1),), (("b64", 1),)),
        ("bytes", (("b8", 1),), (("b16", 1),)),
    ],
)
def test_gfx942_assembly_counts_global_loads_and_stores_by_width(kernel, loads, stores):
    # scalar loads of the kernel arguments (s_load_dwordx4) are not global memory traffic
    assert count_amd(kernel_asm(ASM, kernel).instructions()) == (loads, stores)


# cuOccupancyMaxActiveBlocksPerMultiprocessor and CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK on
# an NVIDIA H100 80GB HBM3 (driver 580.159.04, 2026-11-27; tests/gpu/test_explain_on_gpu.py
# checks the same kernels there): registers, static shared bytes, block -> occupancy.
@pytest.mark.parametrize(
    "registers, shared_bytes, block, occupancy, limiter",
    [
        (14, 0, 256, 1.0, "warps"),
        (12, 1024, 128, 1.0, "warps"),
        (32, 0, 1024, 1.0, "warps"),
        (40, 0, 256, 0.75, "registers"),
        (18, 0, 256, 1.0, "warps"),
    ],
)
def test_sm_90_occupancy_follows_the_drivers_answers(
    registers, shared_bytes, block, occupancy, limiter
):
    found = nvidia_occupancy("sm_90", registers=registers, shared_bytes=shared_bytes,
                             block_threads=block)  # fmt: skip
    assert found is not None
    assert (found.fraction, found.limiter) == (occupancy, limiter)


def test_occupancy_by_shared_memory_and_the_largest_block():
    found = nvidia_occupancy("sm_90", registers=16, shared_bytes=48 * 1024, block_threads=256)
    assert found is not None and found.limiter == "shared memory" and found.blocks_per_sm == 4
    assert max_threads_per_block("sm_90", registers=32, launch_bound=None) == 1024
    assert max_threads_per_block("sm_90", registers=128, launch_bound=None) == 512
    assert max_threads_per_block("sm_90", registers=12, launch_bound=128) == 128
    assert nvidia_occupancy("sm_75", registers=16, shared_bytes=0, block_threads=256) is None
    assert max_threads_per_block("sm_75", registers=16, launch_bound=None) is None


def _facts(**values) -> CodeFacts:
    base = {
        "kernel": "k", "arch": "sm_90", "toolchain": "nvrtc 13.5", "fingerprint": "sha256:a",
        "registers": 24, "local_bytes": 0, "spill_bytes": 0, "shared_bytes": 0,
        "max_threads_per_block": 1024, "block_threads": 256, "occupancy": 1.0,
        "occupancy_limiter": "warps", "global_loads": (("b32", 3),),
        "global_stores": (("b32", 1),),
    }  # fmt: skip
    return CodeFacts(**{**base, **values})


def test_the_diff_names_registers_occupancy_and_loads():
    base = _facts()
    head = _facts(
        fingerprint="sha256:b", registers=40, occupancy=0.75, occupancy_limiter="registers",
        global_loads=(("b32", 4),),
    )  # fmt: skip
    assert code_changes(base, head) == [
        "registers 24 -> 40, occupancy 100% -> 75% at 256 threads a block (limited by registers)",
        "global loads 3 -> 4 (b32 3 -> 4)",
    ]


def test_the_diff_names_each_width_that_moved_spills_and_shared_memory():
    base = _facts(global_loads=(("b32", 4),))
    head = _facts(
        fingerprint="sha256:b", global_loads=(("b128", 1),), local_bytes=520, spill_bytes=732,
        shared_bytes=1024, global_stores=(("b32", 1),),
    )  # fmt: skip
    assert code_changes(base, head) == [
        "local bytes 0 -> 520, spilled bytes 0 -> 732, static shared bytes 0 -> 1024",
        "global loads 4 -> 1 (b32 4 -> 0, b128 0 -> 1)",
    ]


def test_identical_code_and_unchanged_facts_say_so():
    assert code_changes(_facts(), _facts()) == [SAME_CODE]
    assert code_changes(_facts(), _facts(fingerprint="sha256:b")) == [SAME_FACTS]


def test_an_unknown_fact_is_never_a_change():
    head = _facts(fingerprint="sha256:b", registers=None, global_loads=None, occupancy=None)
    assert code_changes(_facts(), head) == [SAME_FACTS]


def test_facts_travel_as_plain_data_and_back():
    facts = _facts(sources=(("resources", "ptxas -v"),), notes=("a note",))
    data = facts.to_dict()
    assert data["global_loads"] == {"b32": 3} and data["sources"] == {"resources": "ptxas -v"}
    assert CodeFacts.from_dict(data) == facts
    assert CodeFacts.from_dict({**data, "added_later": 1}) == facts
    assert facts_line(facts) == (
        "24 registers, occupancy 100% at 256 threads (warps); global loads 3 b32, stores 1 b32"
    )


def test_explain_and_the_resource_summary_word_occupancy_alike():
    """One wording (runtime/info.py occupancy_words): the block size only where the line
    gives it, the limiter only where one is known."""
    assert occupancy_words(0.625, "registers", block_threads=256) == (
        "occupancy 62% at 256 threads (registers)"
    )
    assert occupancy_words(1.0, None) == "occupancy 100%"
    unlimited = _facts(occupancy=0.5, occupancy_limiter="")
    assert "occupancy 50% at 256 threads;" in facts_line(unlimited)
    resources = KernelResources(registers=40, occupancy=0.5, occupancy_limiter="vgprs")
    assert resources.summary() == "40 regs, 0 B shared, occupancy 50% (vgprs)"
