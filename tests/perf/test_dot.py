"""The dot product (kernels/dot.hip): two launches, `dot` (a partial sum per block) then
`dot_finish` (the sum of the partials), measured as one piece of work through
`gpu_bench.run`, so the time includes the second launch and the gap before it. Both
launches' outputs are checked: the partials exactly as dot.hip adds them, and the total.

Cold only: the engine cannot rotate the buffers of a callable (it does not see them).
"""

from __future__ import annotations

import pytest

M = 2**20
DEFAULT_N = 8 * M  # 64 MiB read: beyond an H100's L2; the cold flush empties MI300X's caches
BYTES_PER_ELEMENT = 8  # a and b read once (the partials and the total are a few KB)
SWEEP_BUFFER_BYTES = [4 * 2**10, 64 * 2**10, 1 * M, 16 * M, 256 * M, 2048 * M]


def case(n: int, label: str, *marks: pytest.MarkDecorator):
    floor = pytest.mark.perf_floor("dot", BYTES_PER_ELEMENT * n)
    return pytest.param(n, id=label, marks=[floor, *marks])


def _human(nbytes: int) -> str:
    return f"{nbytes // M}MiB" if nbytes >= M else f"{nbytes // 2**10}KiB"


@pytest.mark.parametrize(
    "n",
    [
        case(DEFAULT_N, f"{DEFAULT_N // M}M"),
        *(case(size // 4, _human(size), pytest.mark.sweep) for size in SWEEP_BUFFER_BYTES),
    ],
)
def test_dot(catalog_bench, n):
    catalog_bench.measure("dot", n, cache="cold")
