"""A kernel's global memory instructions, counted by width in its machine code.

NVIDIA: the SASS that `nvdisasm` prints for a CUBIN (`LDG.E.128` is a 128-bit global load,
`STG.E.U16` a 16-bit store, `LDGSTS` an asynchronous global-to-shared copy). AMD: the
assembly clang prints for gfx9 (`global_load_dwordx4` is 128 bits; `buffer_` and `flat_`
forms reach global memory too). The counts are instructions in the code, not executions: a
loop's body counts once, so the change in a count says the code changed how it moves data,
not by how many bytes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

Widths = tuple[tuple[str, int], ...]  # (("b32", 3), ("b128", 1)), narrowest first

NVDISASM_HINT = "pip install nvidia-cuda-nvdisasm (or put CUDA's nvdisasm on PATH)"
NVDISASM_TIMEOUT_S = 60.0

_SASS_LOADS = {"LDG", "LDGSTS"}
_SASS_STORES = {"STG"}
_SASS_WIDTHS = {"U8": 8, "S8": 8, "U16": 16, "S16": 16, "64": 64, "128": 128, "256": 256}
_SASS_LINE = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_.]+)", re.M)
_SASS_SECTION = re.compile(r"^\s*\.section\s+\.text\.([\w.$]+),", re.M)

_AMD_OP = re.compile(r"^(global|buffer|flat)_(load|store)_(\w+)$")
_AMD_WIDTHS = {
    "ubyte": 8, "sbyte": 8, "byte": 8, "ubyte_d16": 8, "sbyte_d16": 8, "byte_d16_hi": 8,
    "ushort": 16, "sshort": 16, "short": 16, "short_d16": 16, "short_d16_hi": 16,
    "dword": 32, "dwordx2": 64, "dwordx3": 96, "dwordx4": 128,
}  # fmt: skip


def as_widths(counter: Counter[int]) -> Widths:
    """A bit-width counter as sorted (("b32", 3), ...) pairs, zero counts left out."""
    return tuple((f"b{bits}", count) for bits, count in sorted(counter.items()) if count)


def total(widths: Widths) -> int:
    return sum(count for _, count in widths)


def sass_function(sass: str, kernel: str) -> str:
    """`kernel`'s own part of nvdisasm's listing (its `.text.<kernel>` section); "" if absent."""
    starts = list(_SASS_SECTION.finditer(sass))
    for position, match in enumerate(starts):
        if match[1] == kernel:
            end = starts[position + 1].start() if position + 1 < len(starts) else len(sass)
            return sass[match.start() : end]
    return ""


def count_sass(text: str) -> tuple[Widths, Widths]:
    """(global loads, global stores) by width in SASS text; a predicated instruction
    (`@!P0 LDG.E.64`) counts as one."""
    loads: Counter[int] = Counter()
    stores: Counter[int] = Counter()
    for opcode in _SASS_LINE.findall(text):
        name, *modifiers = opcode.split(".")
        if name not in _SASS_LOADS and name not in _SASS_STORES:
            continue
        bits = next((_SASS_WIDTHS[m] for m in modifiers if m in _SASS_WIDTHS), 32)
        (loads if name in _SASS_LOADS else stores)[bits] += 1
    return as_widths(loads), as_widths(stores)


def count_amd(instructions: Iterable[str]) -> tuple[Widths, Widths]:
    """(global loads, global stores) by width in AMD instruction lines (one kernel's, as
    gate/static/asm.py's KernelAsm.instructions gives them); atomics are neither."""
    loads: Counter[int] = Counter()
    stores: Counter[int] = Counter()
    for line in instructions:
        match = _AMD_OP.match(line.split(None, 1)[0]) if line.strip() else None
        if match is None:
            continue
        bits = _AMD_WIDTHS.get(match[3])
        if bits is None:  # e.g. global_load_lds_dword: to LDS, counted neither way
            continue
        (loads if match[2] == "load" else stores)[bits] += 1
    return as_widths(loads), as_widths(stores)


def find_nvdisasm() -> str | None:
    """nvdisasm from $GPUPERF_NVDISASM, PATH, the nvidia-cuda-nvdisasm wheel, or
    /usr/local/cuda/bin (None: not found)."""
    named = os.environ.get("GPUPERF_NVDISASM")
    if named:
        return named
    found = shutil.which("nvdisasm")
    if found:
        return found
    candidates = [Path(p) / "nvidia" / "cu13" / "bin" / "nvdisasm" for p in sys.path if p]
    candidates.append(Path("/usr/local/cuda/bin/nvdisasm"))
    return next((str(c) for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)


class DisassemblyFailed(Exception):
    """nvdisasm is missing or could not read the CUBIN (the message says which)."""


def disassemble(cubin: bytes, *, tool: str | None = None) -> tuple[str, str]:
    """(nvdisasm's SASS listing of `cubin`, "nvdisasm <version>")."""
    tool = tool or find_nvdisasm()
    if tool is None:
        raise DisassemblyFailed(f"nvdisasm not found ({NVDISASM_HINT})")
    with tempfile.TemporaryDirectory(prefix="gpuperf-sass-") as folder:
        path = Path(folder) / "kernel.cubin"
        path.write_bytes(cubin)
        try:
            done = subprocess.run(
                [tool, "-c", str(path)], capture_output=True, text=True,
                timeout=NVDISASM_TIMEOUT_S, check=False,
            )  # fmt: skip
            version = subprocess.run(
                [tool, "--version"], capture_output=True, text=True, timeout=10, check=False
            ).stdout
        except (OSError, subprocess.SubprocessError) as failure:
            raise DisassemblyFailed(f"{tool} could not run: {failure}") from None
    if done.returncode != 0:
        words = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[0]
        raise DisassemblyFailed(f"{tool} could not read the CUBIN: {words}")
    release = re.search(r"release ([\d.]+)", version)
    return done.stdout, f"nvdisasm {release[1]}" if release else "nvdisasm"
