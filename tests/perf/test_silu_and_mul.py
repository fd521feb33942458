"""SiLU-and-mul (kernels/silu_and_mul.hip), the gated-MLP activation: x of [rows, 2d], out of
[rows, d] = silu(x[:, :d]) * x[:, d:], d = 2048 (the catalog's). Declared bytes: x read once,
out written once, 12 bytes per output element.
"""

from __future__ import annotations

import pytest

D = 2048  # the catalog's d
BYTES_PER_ELEMENT = 12  # per output element: two fp32 inputs read, one written
ROWS = [4096]  # 4096 x 2048 outputs: 64 MiB of x, 32 MiB of out
SWEEP_ROWS = [1, 16, 256, 8192, 65536, 131072]  # 24 KiB .. 3 GiB moved


def case(rows: int, *marks: pytest.MarkDecorator):
    n = rows * D
    floor = pytest.mark.perf_floor("silu_and_mul", BYTES_PER_ELEMENT * n)
    return pytest.param(n, id=f"{rows}x{D}", marks=[floor, *marks])


@pytest.mark.parametrize(
    "n", [*(case(rows) for rows in ROWS), *(case(rows, pytest.mark.sweep) for rows in SWEEP_ROWS)]
)
def test_silu_and_mul(catalog_bench, n):
    catalog_bench.measure("silu_and_mul", n)
