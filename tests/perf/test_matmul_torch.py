"""torch.matmul in bf16 through `gpu_bench.run`, judged on the roofline: 2 m n k FLOPs at
math="bf16", whose roof is the device's dense bf16 tensor peak (the data sheet's, without
sparsity). cuBLAS picks the kernel; the test checks the product against an fp32 one.

Needs torch with a CUDA device, and gpu_bench on that device (the cuda backend); skips
otherwise, naming what is missing. No floor yet: set one from a measured run on the device
(tests/perf/conftest.py says how), as for every kernel of the suite.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="needs torch (pip install torch)")

from tests.perf.matmul_operands import bf16_operands, check_product  # noqa: E402

SIZE = 4096  # 137 GFLOP over 100 MB declared: compute-bound on every device with bf16 peaks


def test_torch_matmul_bf16(gpu_bench):
    a, b, c = bf16_operands(gpu_bench, SIZE, "torch")
    result = gpu_bench.run(
        lambda: torch.matmul(a, b, out=c),
        reads=(a, b),
        writes=(c,),
        flops=gpu_bench.gemm_flops(SIZE, SIZE, SIZE),
        math="bf16",
        name="torch.matmul",
    )
    check_product(result, a, b, c)
