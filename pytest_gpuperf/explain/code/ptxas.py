"""ptxas's resource report (`-Xptxas -v`, NVRTC's program log): registers, stack frame,
spills and static shared memory of each kernel, as the assembler allocated them.

The lines read (NVRTC 13.5, recorded in tests/unit/data):
    ptxas info    : Compiling entry function 'spill' for 'sm_90'
    ptxas         .     256 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 32 registers, used 0 barriers, 256 bytes cumulative stack size
    ptxas info    : Used 12 registers, used 1 barriers, 1024 bytes smem
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PTXAS_VERBOSE = ("-Xptxas", "-v")

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


@dataclass(frozen=True)
class PtxasReport:
    kernel: str
    arch: str
    registers: int
    stack_bytes: int = 0
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    shared_bytes: int = 0


def parse_ptxas_log(log: str) -> dict[str, PtxasReport]:
    """Every kernel's report in an NVRTC log compiled with `-Xptxas -v`, by kernel name
    (mangled as ptxas prints it; kernels declared extern "C" keep their own names)."""
    found: dict[str, PtxasReport] = {}
    sections = _ENTRY.split(log)
    # split() gives [before, name, arch, text, name, arch, text, ...]
    for position in range(1, len(sections) - 2, 3):
        name, arch, text = sections[position : position + 3]
        used = _USED.search(text)
        if used is None:
            continue
        frame = _FRAME.search(text)
        smem = _SMEM.search(text)
        stack, stores, loads = (int(v) for v in frame.groups()) if frame else (0, 0, 0)
        found[name] = PtxasReport(
            name, arch, int(used[1]), stack, stores, loads, int(smem[1]) if smem else 0
        )
    return found
