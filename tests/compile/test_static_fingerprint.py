"""Per-kernel fingerprints on real compiler output: clang-19's gfx942 code objects and
NVRTC's sm_90 CUBINs. A comment, or an edit to a sibling kernel, leaves a kernel's
fingerprint alone; an edit to its body changes it."""

from __future__ import annotations

import pytest

from pytest_gpuperf.gate.static import compile_static, find_clang
from pytest_gpuperf.runtime.compile import CompileRequest, compile_source, portability_headers
from pytest_gpuperf.runtime.fingerprint import (
    SCOPE_KERNEL,
    _Elf,
    _nv_info_entries,
    kernel_fingerprint,
)

pytestmark = pytest.mark.compile

SOURCE = """#include "gpuperf.h"
// two kernels in one file
GPUPERF_KERNEL void scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = a * x[i];
}
GPUPERF_KERNEL void shift(float* x, float b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] + b;
}
"""
COMMENTED = SOURCE.replace("// two kernels", "// a longer comment\n// about two kernels")
SCALE_EDITED = SOURCE.replace("x[i] = a * x[i];", "x[i] = a * x[i] * x[i];")
SHIFT_EDITED = SOURCE.replace("x[i] = x[i] + b;", "x[i] = x[i] - b * 0.5f;")
VARIANTS = {"source": SOURCE, "commented": COMMENTED, "scale": SCALE_EDITED, "shift": SHIFT_EDITED}


def fingerprints(binaries: dict[str, bytes]) -> dict[str, dict[str, str]]:
    out = {}
    for variant, binary in binaries.items():
        out[variant] = {}
        for kernel in ("scale", "shift"):
            found = kernel_fingerprint(binary, kernel)
            assert found.scope == SCOPE_KERNEL, found.reason
            out[variant][kernel] = found.digest
    return out


def check(prints: dict[str, dict[str, str]]) -> None:
    base = prints["source"]
    assert prints["commented"] == base
    assert prints["scale"]["scale"] != base["scale"] and prints["scale"]["shift"] == base["shift"]
    assert prints["shift"]["shift"] != base["shift"] and prints["shift"]["scale"] == base["scale"]


def test_gfx942_code_objects(clang19, kernel_cache, monkeypatch):
    monkeypatch.setenv("GPUPERF_CACHE_DIR", str(kernel_cache))
    clang = find_clang(clang19, "gfx942")
    builds = {
        variant: compile_static(text, "gfx942", clang=clang, name="two.hip").code_object
        for variant, text in VARIANTS.items()
    }
    check(fingerprints(builds))


def test_sm90_cubins(nvrtc, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPERF_CACHE_DIR", str(tmp_path))
    cubins = {}
    for variant, text in VARIANTS.items():
        request = CompileRequest("nvrtc", text, "two.hip", "sm_90", (), portability_headers())
        cubins[variant] = compile_source(request, use_cache=False).binary
        assert cubins[variant][:4] == b"\x7fELF"
    check(fingerprints(cubins))
    # the register counts are read where NVRTC 13 keeps them: EIATTR_REGCOUNT in .nv.info
    elf = _Elf(cubins["source"])
    _table, scale = elf.find_symbol("scale")
    info = next(s for s in elf.sections if s.name == ".nv.info")
    registers = [v for a, sym, v in _nv_info_entries(elf.section_bytes(info)) if a == 0x2F]
    assert scale.index in [sym for _, sym, _ in _nv_info_entries(elf.section_bytes(info))]
    assert len(registers) == 2 and all(0 < count <= 255 for count in registers)
