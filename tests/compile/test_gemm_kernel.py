"""kernels/gemm.hip as the real compilers build it: fp32 FMAs on the vector units, no matrix
(MFMA) or tensor instruction, for gfx942 (clang-19) and sm_90 (NVRTC's PTX), which is what
its test's `math="fp32"` declares (the fp32 roof, not the bf16 tensor one). If a compiler
ever turned it into matrix code, its declaration would be wrong, and this says so."""

from __future__ import annotations

import re

import pytest

from pytest_gpuperf.runtime import cuda_compiler
from pytest_gpuperf.runtime.compile import KERNELS_DIR, portability_headers
from tests.compile.test_gfx942_asm import compile_asm, functions

pytestmark = pytest.mark.compile

GEMM = KERNELS_DIR / "gemm.hip"


def test_gfx942_code_is_vector_fma_without_mfma(clang19, tmp_path):
    asm = compile_asm(clang19, GEMM, "gfx942", tmp_path).read_text()
    body, _ = functions(asm)["gemm_bf16_fp32"]
    assert re.search(r"\bv_(pk_)?fmac?_f32\b", body), "no fp32 FMA in the kernel's code"
    assert "v_mfma" not in body  # no matrix core: its roof is the fp32 peak
    assert "ds_read" in body and "ds_write" in body  # the tiles are staged in LDS
    assert "scratch_" not in body  # the 4 x 4 accumulators stay in registers


def test_sm_90_ptx_is_fp32_fma_without_mma(nvrtc):
    nv = cuda_compiler._nvrtc()
    ok = nv.nvrtcResult.NVRTC_SUCCESS
    headers = [*portability_headers(), cuda_compiler.HIP_RUNTIME_SHIM]
    err, program = nv.nvrtcCreateProgram(
        GEMM.read_bytes(),
        b"gemm.hip",
        len(headers),
        [text.encode() for _, text in headers],
        [name.encode() for name, _ in headers],
    )
    assert err == ok
    try:
        (err,) = nv.nvrtcCompileProgram(program, 1, [b"--gpu-architecture=compute_90"])
        assert err == ok
        err, size = nv.nvrtcGetPTXSize(program)
        ptx = bytearray(size)
        (err,) = nv.nvrtcGetPTX(program, ptx)
        assert err == ok
    finally:
        nv.nvrtcDestroyProgram(program)
    text = bytes(ptx).decode(errors="replace")
    assert "fma.rn.f32" in text
    assert not re.search(r"\b(w?g?mma|wmma)\.", text)  # no tensor-core instruction
    assert ".shared" in text
