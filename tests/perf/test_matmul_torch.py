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

SIZE = 4096  # 137 GFLOP over 100 MB declared: compute-bound on every device with bf16 peaks


def test_torch_matmul_bf16(gpu_bench):
    if gpu_bench.backend.name != "cuda" or not torch.cuda.is_available():
        pytest.skip(f"needs torch on a CUDA GPU; gpu_bench measures on {gpu_bench.backend.name}")
    device = torch.device("cuda", gpu_bench.info.index)
    generator = torch.Generator(device=device).manual_seed(56)
    a = torch.randn(SIZE, SIZE, device=device, dtype=torch.bfloat16, generator=generator)
    b = torch.randn(SIZE, SIZE, device=device, dtype=torch.bfloat16, generator=generator)
    c = torch.empty(SIZE, SIZE, device=device, dtype=torch.bfloat16)
    result = gpu_bench.run(
        lambda: torch.matmul(a, b, out=c),
        reads=(a, b),
        writes=(c,),
        flops=gpu_bench.gemm_flops(SIZE, SIZE, SIZE),
        math="bf16",
        name="torch.matmul",
    )
    torch.cuda.synchronize(device)
    expected = a.float() @ b.float()
    torch.testing.assert_close(c.float(), expected, rtol=2e-2, atol=0.25)
    if result.measured:
        assert result.roofline is not None and result.roofline.bound == "compute"
