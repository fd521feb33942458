"""A Triton matmul through `gpu_bench.run`, judged on the roofline: the tiled `tl.dot` kernel
of tests/perf/triton_matmul.py (bf16 in, fp32 accumulation, bf16 out), 2 m n k FLOPs at
math="bf16", whose roof is the device's dense bf16 tensor peak. The product is checked
against an fp32 one.

Needs torch and triton with a CUDA device, and gpu_bench on that device (the cuda
backend); skips otherwise, naming what is missing. No floor yet (tests/perf/conftest.py).
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="needs torch (pip install torch)")
pytest.importorskip("triton", reason="needs triton (pip install triton)")

from tests.perf.matmul_operands import bf16_operands, check_product
from tests.perf.triton_matmul import triton_matmul

SIZE = 4096


def test_triton_matmul_bf16(gpu_bench):
    a, b, c = bf16_operands(gpu_bench, SIZE, "triton")
    result = gpu_bench.run(
        lambda: triton_matmul(a, b, c),
        reads=(a, b),
        writes=(c,),
        flops=gpu_bench.gemm_flops(SIZE, SIZE, SIZE),
        math="bf16",
        name="triton.matmul",
    )
    check_product(result, a, b, c)
