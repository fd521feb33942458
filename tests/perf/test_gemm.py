"""A compute-bound kernel in the perf suite: kernels/gemm.hip, a bf16-in, fp32-accumulate tiled
GEMM in plain HIP (one source for gfx942 through hiprtc and sm_90 through NVRTC), judged on
the roofline. It declares 2 m n k FLOPs at math="fp32": its products and sums are fp32 FMAs on
the vector units (no matrix or tensor instruction: NVRTC cannot reach mma from HIP names), so
its roof is the device's fp32 peak, not the bf16 tensor peak. At 2048^3 its intensity (17.2
GFLOP over 33.6 MB declared) is far above every device's fp32 ridge: it is compute-bound,
and its bandwidth efficiency says nothing; its TFLOP/s and the fraction of the fp32 roof do.

No floor yet: a floor is set from what the kernel reaches on a device (tests/perf/conftest.py),
and this kernel has not been measured on one; until then the stored baseline and the A/B
gate it, on time, as every kernel. The output is checked against a float64 NumPy product of
the same bf16 values.
"""

from __future__ import annotations

import numpy as np

M = N = K = 2048
TILE = 64  # gemm.hip's block tile: grid = (ceil(n / 64), ceil(m / 64)), 256 threads a block


def bf16_bits(values: np.ndarray) -> np.ndarray:
    """float32 values rounded toward zero to bf16, as their bit patterns."""
    return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def test_gemm_bf16_fp32(gpu_bench):
    from pytest_gpuperf.simulate.shipped_kernels import gemm_reference

    kernel = gpu_bench.kernel("kernels/gemm.hip", "gemm_bf16_fp32")
    rng = np.random.default_rng(56)
    a = bf16_bits(rng.uniform(-1.0, 1.0, (M, K)).astype(np.float32))
    b = bf16_bits(rng.uniform(-1.0, 1.0, (K, N)).astype(np.float32))
    da, db, dc = gpu_bench.to_device(a), gpu_bench.to_device(b), gpu_bench.empty((M, N))
    result = gpu_bench(
        kernel,
        grid=((N + TILE - 1) // TILE, (M + TILE - 1) // TILE),
        block=256,
        args=(da, db, dc, M, N, K),
        reads=(a, b),
        writes=(4 * M * N,),  # C, fp32
        flops=gpu_bench.gemm_flops(M, N, K),
        math="fp32",
    )
    got = gpu_bench.from_device(dc, np.float32, (M, N))
    # fp32 sums of K = 2048 products of magnitude <= 1: a few ulps of sums near sqrt(K) / 3
    np.testing.assert_allclose(got, gemm_reference(a, b), rtol=1e-4, atol=2e-4)
    if result.measured:
        assert result.roofline is not None and result.roofline.bound == "compute"
