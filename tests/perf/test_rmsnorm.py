"""RMSNorm (kernels/rmsnorm.hip): one block per row of a [rows, 4096] fp32 matrix (a hidden
size), the row read twice (sum of squares, then the scaled write; the second read comes
from L1/L2) and written once. Declared bytes: x and w read once, y written once.
"""

from __future__ import annotations

import pytest

M = 2**20
COLS = 4096  # the catalog's hidden size
BYTES_PER_ELEMENT = 8  # x read once, y written once (w is one row: 16 KiB)
ROWS = [2048]  # 2048 x 4096: 32 MiB per matrix, 64 MiB moved
SWEEP_ROWS = [1, 16, 256, 4096, 32768, 131072]  # 16 KiB .. 2 GiB per matrix


def case(rows: int, *marks: pytest.MarkDecorator):
    n = rows * COLS
    floor = pytest.mark.perf_floor("rmsnorm", BYTES_PER_ELEMENT * n + 4 * COLS)
    return pytest.param(n, id=f"{rows}x{COLS}", marks=[floor, *marks])


@pytest.mark.parametrize(
    "n", [*(case(rows) for rows in ROWS), *(case(rows, pytest.mark.sweep) for rows in SWEEP_ROWS)]
)
def test_rmsnorm(catalog_bench, n):
    catalog_bench.measure("rmsnorm", n)
