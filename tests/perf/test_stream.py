"""The STREAM kernels (kernels/stream.hip) as BabelStream runs them, scalar and float4.

The default size is 8M fp32 elements (32 MiB per buffer, 64-96 MiB moved): larger than an
H100's L2 (50 MB), and HBM-bound on MI300X in the default cold mode, whose read-eviction
also empties the 256 MB Infinity Cache. The sweep (`-m sweep`) runs 4 KB .. 2 GB per buffer.
"""

from __future__ import annotations

import pytest

M = 2**20
DEFAULT_N = 8 * M
# fp32 bytes per element: copy and scale read one array and write one; triad reads two.
BYTES_PER_ELEMENT = {"copy": 8, "scale": 8, "triad": 12, "copy_vec4": 8, "triad_vec4": 12}
SWEEP_BUFFER_BYTES = [4 * 2**10, 64 * 2**10, 1 * M, 16 * M, 256 * M, 2048 * M]


def case(kernel: str, n: int, *marks: pytest.MarkDecorator, label: str = ""):
    floor = pytest.mark.perf_floor(kernel, BYTES_PER_ELEMENT[kernel] * n)
    return pytest.param(kernel, n, id=f"{kernel}-{label or f'{n // M}M'}", marks=[floor, *marks])


def _human(nbytes: int) -> str:
    return f"{nbytes // M}MiB" if nbytes >= M else f"{nbytes // 2**10}KiB"


@pytest.mark.parametrize(
    ("kernel", "n"),
    [
        *(case(kernel, DEFAULT_N) for kernel in BYTES_PER_ELEMENT),
        *(
            case(kernel, size // 4, pytest.mark.sweep, label=_human(size))
            for kernel in ("copy", "triad", "copy_vec4", "triad_vec4")
            for size in SWEEP_BUFFER_BYTES
        ),
    ],
)
def test_stream(catalog_bench, kernel, n):
    catalog_bench.measure(kernel, n)
