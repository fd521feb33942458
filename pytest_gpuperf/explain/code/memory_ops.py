"""A kernel's global memory instructions, counted by width in its machine code.

NVIDIA: the SASS that `nvdisasm` prints for a CUBIN (`LDG.E.128` is a 128-bit global load,
`STG.E.U16` a 16-bit store, `LDGSTS` an asynchronous global-to-shared copy), or the PTX a
compiler handed ptxas (`ld.global.v4.b32` is 128 bits; Triton keeps it beside the CUBIN, so
its kernels need no nvdisasm). AMD: the
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
from collections.abc import Iterable, Iterator
from pathlib import Path

Widths = tuple[tuple[str, int], ...]  # (("b32", 3), ("b128", 1)), narrowest first

NVDISASM_HINT = "pip install nvidia-cuda-nvdisasm (or put CUDA's nvdisasm on PATH)"
NVDISASM_TIMEOUT_S = 60.0

_SASS_LOADS = {"LDG", "LDGSTS"}
_SASS_STORES = {"STG"}
_SASS_WIDTHS = {"U8": 8, "S8": 8, "U16": 16, "S16": 16, "64": 64, "128": 128, "256": 256}
_SASS_LINE = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_.]+)", re.M)
_SASS_SECTION = re.compile(r"^\s*\.section\s+\.text\.([\w.$]+),", re.M)

_PTX_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
# `@%p1 ld.global.v4.b32 { ... }, [ %rd1 + 0 ]`: a predicate, the opcode and its qualifiers
_PTX_STATEMENT = re.compile(r"^(?:[$\w]+:)?\s*(?:@!?%\w+\s+)?(\w+(?:\.[\w:]+)+)\s*(.*)$")
_PTX_TYPE = re.compile(r"^(?:b|u|s|f|bf)(\d+)(?:x(\d+))?$")
_PTX_CP_SIZE = re.compile(r"\]\s*,\s*\[[^\]]*\]\s*,\s*(0x[0-9a-fA-F]+|\d+)")

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


def widths_text(widths: Widths) -> str:
    """'3 b32 + 1 b128' ('none' for no instruction): how explain's lines word a count."""
    return " + ".join(f"{count} {width}" for width, count in widths) or "none"


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


def count_ptx(text: str) -> tuple[Widths, Widths]:
    """(global loads, global stores) by width in PTX text: `ld.global` (and `ldu.global`,
    `ld.volatile.global`, ...) and `st.global`, a vector's width being its length times its
    element's bits (`ld.global.nc.v4.f32`: b128), a predicated one (`@%p1 st.global.b32`)
    counting as one, as count_sass counts them. `cp.async` global-to-shared copies count as
    loads of their copy size (`cp.async.cg.shared.global [..], [..], 16`: b128), as SASS's
    LDGSTS does; the bulk and tensor-memory-accelerator forms (`cp.async.bulk`), which SASS
    shows as UTMALDG rather than LDG, and atomics are neither. PTX is what ptxas was given:
    where ptxas unrolls a loop or merges accesses, the SASS counts differ."""
    loads: Counter[int] = Counter()
    stores: Counter[int] = Counter()
    for match in _ptx_statements(text):
        opcode, *qualifiers = match[1].split(".")
        if "global" not in qualifiers:
            continue
        if opcode == "cp" and qualifiers[:1] == ["async"] and "bulk" not in qualifiers:
            size = _PTX_CP_SIZE.search(match[2])
            shared = [i for i, q in enumerate(qualifiers) if q.startswith("shared")]
            if size is not None and shared and shared[0] < qualifiers.index("global"):
                loads[8 * int(size[1], 0)] += 1
            continue
        if opcode not in ("ld", "ldu", "st"):
            continue
        bits = _ptx_bits(qualifiers)
        if bits is not None:
            (stores if opcode == "st" else loads)[bits] += 1
    return as_widths(loads), as_widths(stores)


def _ptx_statements(text: str) -> Iterator[re.Match[str]]:
    """Each instruction of PTX text, as (opcode with qualifiers, operands): compilers print
    one a line (several where inline assembly puts them on one, split at `;`); directives
    (`.loc`, `.reg`), labels and braces are not instructions."""
    for line in _PTX_COMMENT.sub("", text).splitlines():
        for piece in line.split(";"):
            match = _PTX_STATEMENT.match(piece.strip(" \t{}"))
            if match is not None:
                yield match


def _ptx_bits(qualifiers: list[str]) -> int | None:
    """The bits one `ld`/`st` moves: `.v4` x `.b32`, `.f16x2` as 32 (None: no type given)."""
    lanes = next((int(q[1:]) for q in qualifiers if q in ("v2", "v4", "v8")), 1)
    for qualifier in reversed(qualifiers):
        typed = _PTX_TYPE.match(qualifier)
        if typed is not None:
            return lanes * int(typed[1]) * int(typed[2] or 1)
    return None


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
