"""Reading one kernel out of clang's AMDGPU assembly, and ISA assertions on it.

LLVM prints each function from its label (`vector_add:  ; @vector_add`) to a
`.Lfunc_endN:` label, and after it, before the next function, a "; Kernel info:" block of
`; Key: value` comments (NumVgprs, NumAgprs, ScratchSize, Occupancy, ...). Everything here
works on that one function's text, never on the whole file, so the `sc0 sc1` of one kernel
cannot make an assertion about another pass.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from pytest_gpuperf.errors import ConfigError, KernelNotFound

_LABEL_RE = re.compile(r"^(?P<name>[A-Za-z_.$][\w.$]*):[ \t]*(?:;[^\n]*)?$", re.M)
_FUNC_END_RE = re.compile(r"^\.Lfunc_end\d+:", re.M)
_INFO_RE = re.compile(r"^; Kernel info:\n(?P<block>(?:;[^\n]*\n)*)", re.M)
_NEXT_FUNCTION_RE = re.compile(r"; -- Begin function|^\s*\.amdgpu_metadata", re.M)
_STAT_RE = re.compile(r"^; (\w+): (\d+)", re.M)
_SPILL_RE = re.compile(r";\s*\d+-byte Folded Spill\s*$", re.M)
_CALL_TARGET_RE = re.compile(r"\b(?:s_add_u32|s_add_i32)\s+s\d+,\s*s\d+,\s*([\w.$]+)@rel32@lo")


@dataclass(frozen=True)
class KernelAsm:
    """One kernel's instructions (label to `.Lfunc_end`) and LLVM's kernel-info numbers."""

    name: str
    body: str
    info: dict[str, int]

    def instructions(self) -> list[str]:
        """The instruction lines, comments and directives removed."""
        lines = []
        for raw in self.body.splitlines():
            line = raw.split(";", 1)[0].strip()
            if line and not line.startswith(".") and not line.endswith(":"):
                lines.append(line)
        return lines

    @property
    def vgpr_spill_stores(self) -> int:
        """VGPR spill stores LLVM marked "; 4-byte Folded Spill" (the fallback when a code
        object's metadata has no .vgpr_spill_count; they agree when both exist)."""
        return len(_SPILL_RE.findall(self.body))

    @property
    def called_functions(self) -> tuple[str, ...]:
        """Functions the kernel calls (`s_swappc_b64` through a pc-relative address): with
        -nogpulib, device-library functions (__ocml_*) stay calls, and their calling
        convention costs registers the linked kernel would not use."""
        return tuple(dict.fromkeys(_CALL_TARGET_RE.findall(self.body)))


def kernel_names(asm: str) -> list[str]:
    """The kernels in an assembly file, in order (each has an `.amdhsa_kernel` block)."""
    return list(dict.fromkeys(re.findall(r"^\s*\.amdhsa_kernel\s+([\w.$]+)", asm, re.M)))


def kernel_asm(asm: str, kernel: str) -> KernelAsm:
    """`kernel`'s own text; `KernelNotFound` (listing the kernels there are) when absent."""
    for label in _LABEL_RE.finditer(asm):
        if label["name"] != kernel:
            continue
        end = _FUNC_END_RE.search(asm, label.end())
        if end is None:
            break
        after = asm[end.end() :]
        stop = _NEXT_FUNCTION_RE.search(after)
        block = _INFO_RE.search(after[: stop.start()] if stop else after)
        info = {k: int(v) for k, v in _STAT_RE.findall(block["block"])} if block else {}
        return KernelAsm(kernel, asm[label.end() : end.start()], info)
    raise KernelNotFound(kernel, kernel_names(asm), "the assembly")


def check_isa(asm_text: str, kernel: str, expect: Iterable[str]) -> list[str]:
    """The expectations NOT found in `kernel`'s own instructions (empty: all found).

    An expectation is a sequence of whole tokens that must appear together on one
    instruction line, commas and spacing ignored: "global_load_dwordx4" (not matched by
    global_load_dwordx4's shorter cousin global_load_dword, nor the reverse), "sc0 sc1".
    "..." stands for anything on the same line: "global_load_dword ... sc0 sc1".
    """
    instructions = kernel_asm(asm_text, kernel).instructions()
    return [e for e in expect if not any(_matcher(e).search(line) for line in instructions)]


def _matcher(expectation: str) -> re.Pattern[str]:
    tokens = [t for t in re.split(r"[\s,]+", expectation.strip()) if t]
    if not tokens:
        raise ConfigError(f"an ISA expectation needs at least one token, got {expectation!r}")
    parts: list[str] = []
    for token in tokens:
        if token == "...":
            parts.append(r".*?")
            continue
        if parts and parts[-1] != r".*?":
            parts.append(r"[\s,]+")
        parts.append(rf"(?<![\w.$]){re.escape(token)}(?![\w.$])")
    return re.compile("".join(parts))
