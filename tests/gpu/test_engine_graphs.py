"""Hot mode's graph replay on a real GPU: shorter per-launch times for small kernels (the gap
between stream launches is gone), the same time for large ones, the right outputs."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_gpuperf.engine.measure import MeasureSettings, measure_kernel
from pytest_gpuperf.runtime.compile import KERNELS_DIR
from pytest_gpuperf.runtime.devices import match_device


def _measure(backend, n, graphs, cache="hot"):
    kernel = backend.compile(KERNELS_DIR / "vector_add.hip").kernel("vector_add")
    rng = np.random.default_rng(n)
    a, b = rng.random(n, dtype=np.float32) + 1, rng.random(n, dtype=np.float32) + 1
    da, db, dc = backend.to_device(a), backend.to_device(b), backend.alloc(4 * n)
    try:
        result = measure_kernel(
            backend,
            kernel,
            grid=(n + 255) // 256,
            block=256,
            args=(da, db, dc, n),
            bytes_moved=12 * n,
            device=match_device(backend.info).spec,
            settings=MeasureSettings(cache=cache, graphs=graphs),
        )
        np.testing.assert_array_equal(dc.download(np.float32), a + b)
        return result
    finally:
        for buffer in (da, db, dc):
            buffer.free()


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1 << 14, 1 << 18, 32 << 20], ids=["192KiB", "3MiB", "384MiB"])
def test_graph_replay_removes_the_launch_gap_and_nothing_else(cuda_backend, n, capsys):
    graph = _measure(cuda_backend, n, graphs=True)
    stream = _measure(cuda_backend, n, graphs=False)
    assert graph.queue_method.startswith("graph-replay") and graph.extra["graph_replay"]
    assert stream.queue_method.startswith("spin-ahead")
    gap_s = stream.time_s - graph.time_s
    with capsys.disabled():
        print(
            f"\n[graphs] vector add {12 * n / 2**20:.2f} MiB hot: stream launches "
            f"{stream.time_s * 1e6:.2f} us, graph replay {graph.time_s * 1e6:.2f} us "
            f"(gap {gap_s * 1e6:.2f} us per launch)"
        )
    # The gap between stream launches is about a microsecond on an H100 whatever the size;
    # a replay must never be slower, and must not change what a long kernel measures.
    assert -0.02 * stream.time_s < gap_s < 2e-6
    if n <= 1 << 18:
        assert gap_s > 0.3e-6, "a replay should remove the gap between small launches"


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1 << 18, 2 << 20, 32 << 20], ids=["3MiB", "24MiB", "384MiB"])
def test_cold_graph_batches_time_the_kernel_as_stream_launches_do(cuda_backend, n, capsys):
    """Cold samples replayed as one graph a batch (flush, events, launch as nodes): the same
    kernel time as stream launches for a long kernel, no more than a launch path's few
    percent less for a short one, and the right outputs."""
    graph = _measure(cuda_backend, n, graphs=True, cache="cold")
    stream = _measure(cuda_backend, n, graphs=False, cache="cold")
    assert graph.queue_method.startswith("graph-batch") and graph.extra["graph_batches"]
    assert stream.queue_method.startswith("flush-ahead") and not stream.extra["graph_batches"]
    assert "graph_batches_refused" not in graph.extra
    ratio = graph.time_s / stream.time_s
    with capsys.disabled():
        print(
            f"\n[graphs] vector add {12 * n / 2**20:.2f} MiB cold: stream launches "
            f"{stream.time_s * 1e6:.2f} us, graph batches {graph.time_s * 1e6:.2f} us "
            f"({ratio - 1:+.2%})"
        )
    assert 0.9 < ratio < 1.01
    if n >= 32 << 20:
        assert ratio > 0.995
