"""Rotary position embedding, NeoX style (kernels/rope.hip): x, y of [tokens, 8 heads, 128]
and cos, sin of [tokens, 64] (the catalog's shape). Declared bytes: x, cos and sin read once,
y written once; the kernel re-reads each token's cos/sin for every head, from cache.
"""

from __future__ import annotations

import pytest

HEADS, HEAD_DIM = 8, 128  # the catalog's shape for sizes >= 1024 elements
# x read + y written (8 bytes per element) + cos and sin (2 x 4 bytes per token and i < 64,
# i.e. 0.5 bytes per element of x with 8 heads)
BYTES_PER_ELEMENT = 8.5
TOKENS = [8192]  # 8192 x 8 x 128: 32 MiB of x, 68 MiB moved
SWEEP_TOKENS = [1, 16, 256, 4096, 65536, 524288]  # 4 KiB .. 2 GiB of x


def case(tokens: int, *marks: pytest.MarkDecorator):
    n = tokens * HEADS * HEAD_DIM
    floor = pytest.mark.perf_floor("rope", int(BYTES_PER_ELEMENT * n))
    return pytest.param(n, id=f"{tokens}x{HEADS}x{HEAD_DIM}", marks=[floor, *marks])


@pytest.mark.parametrize(
    "n",
    [*(case(tokens) for tokens in TOKENS), *(case(t, pytest.mark.sweep) for t in SWEEP_TOKENS)],
)
def test_rope(catalog_bench, n):
    catalog_bench.measure("rope", n)
