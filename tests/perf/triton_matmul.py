"""A tiled Triton matmul: bf16 in, fp32 accumulation, bf16 out, in the grouped launch order of
Triton's matmul tutorial, one fixed tile configuration (so a measurement times one kernel,
not an autotuner's search). tests/perf/test_matmul_triton.py measures it; bench/roofline.py
copies this file into its scratch repository (as mm.py) and measures it there, so the two
time the same kernel. Imports only triton: the scratch repository has no `tests` package.
"""

import triton
import triton.language as tl

# 128 x 128 tiles of C, 64-deep slices of K, 8 warps, 3 stages: a configuration Hopper's
# tensor cores run near their peak with (Triton's matmul tutorial lists it among its own)
CONFIG = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}
LAUNCH = {"num_warps": 8, "num_stages": 3}


@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, m, n, k,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    tiles_m, tiles_n = tl.cdiv(m, BLOCK_M), tl.cdiv(n, BLOCK_N)
    # grouped order: GROUP_M rows of tiles share their columns of B while they are in L2
    group = pid // (GROUP_M * tiles_n)
    first_m = group * GROUP_M
    group_m = min(tiles_m - first_m, GROUP_M)
    tile_m = first_m + (pid % (GROUP_M * tiles_n)) % group_m
    tile_n = (pid % (GROUP_M * tiles_n)) // group_m
    rows = (tile_m * BLOCK_M + tl.arange(0, BLOCK_M)) % m
    cols = (tile_n * BLOCK_N + tl.arange(0, BLOCK_N)) % n
    depth = tl.arange(0, BLOCK_K)
    a_tile = a_ptr + rows[:, None] * stride_am + depth[None, :] * stride_ak
    b_tile = b_ptr + depth[:, None] * stride_bk + cols[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for step in range(0, tl.cdiv(k, BLOCK_K)):
        left = k - step * BLOCK_K
        a = tl.load(a_tile, mask=depth[None, :] < left, other=0.0)
        b = tl.load(b_tile, mask=depth[:, None] < left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_tile += BLOCK_K * stride_ak
        b_tile += BLOCK_K * stride_bk
    out_rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    out_cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_tile = c_ptr + out_rows[:, None] * stride_cm + out_cols[None, :] * stride_cn
    mask = (out_rows[:, None] < m) & (out_cols[None, :] < n)
    tl.store(c_tile, acc.to(tl.bfloat16), mask=mask)


def triton_matmul(a, b, c, config=CONFIG, launch=LAUNCH):
    """c = a @ b with matmul_kernel: one program per tile of C."""
    m, k = a.shape
    _, n = b.shape
    grid = (triton.cdiv(m, config["BLOCK_M"]) * triton.cdiv(n, config["BLOCK_N"]),)
    matmul_kernel[grid](
        a, b, c, m, n, k,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        **config, **launch,
    )  # fmt: skip
