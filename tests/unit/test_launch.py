"""`Launch` (engine/launch.py): one value for a kernel launch's grid, block, arguments, shared
memory and setup, made once from the keywords a user writes and launched as it is by the
engine, the pairs and the confirmation round."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_gpuperf.engine.launch import FIELDS, Launch
from pytest_gpuperf.engine.measure import (
    MeasureSettings,
    measure_kernel,
    measure_launch,
    measure_launch_pair,
    measure_pair,
)
from pytest_gpuperf.errors import ArgumentError
from pytest_gpuperf.runtime import open_backend
from pytest_gpuperf.runtime.compile import KERNELS_DIR
from pytest_gpuperf.runtime.devices import get_device

N = 1 << 16


def _sim():
    return open_backend("sim", 0, device="mi300x", seed=3, run_spread=0.0, jitter=0.0)


def _vector_add(backend):
    kernel = backend.compile(KERNELS_DIR / "vector_add.hip").kernel("vector_add")
    a = np.arange(N, dtype=np.float32)
    args = (backend.to_device(a), backend.to_device(a), backend.alloc(a.nbytes), N)
    return kernel, args


def test_of_normalises_what_a_user_writes():
    setup = object()
    launch = Launch.of(8, (4, 2), iter([1, 2]), shared_bytes=np.int64(64), setup=setup)  # type: ignore[arg-type]
    assert launch == Launch((8, 1, 1), (4, 2, 1), (1, 2), 64, setup)  # type: ignore[arg-type]
    assert type(launch.shared_bytes) is int
    assert launch.shape() == {"grid": (8, 1, 1), "block": (4, 2, 1), "shared_bytes": 64}


@pytest.mark.parametrize(
    ("keywords", "words"),
    [
        ({"grid": 1.5}, "grid must be a positive int or a tuple of 1-3 positive ints, got 1.5"),
        ({"block": (0,)}, "block must be a positive int or a tuple of 1-3 positive ints"),
        ({"shared_bytes": -1}, "shared_bytes must be a whole number of bytes >= 0, got -1"),
        ({"shared_bytes": 2.0}, "shared_bytes must be a whole number of bytes >= 0, got 2.0"),
        ({"shared_bytes": True}, "shared_bytes must be a whole number of bytes >= 0, got True"),
        ({"shared_bytes": "64"}, "shared_bytes must be a whole number of bytes >= 0, got '64'"),
    ],
)
def test_a_launch_no_kernel_could_take_is_one_line(keywords, words):
    given = {"grid": 1, "block": 1, "args": (), **keywords}
    with pytest.raises(ArgumentError) as refused:
        Launch.of(given.pop("grid"), given.pop("block"), given.pop("args"), **given)
    assert str(refused.value).startswith(words) and "\n" not in str(refused.value)


def test_buffers_are_each_buffer_once_and_on_swaps_the_arguments():
    backend = _sim()
    try:
        a, b = backend.alloc(64), backend.alloc(64)
        launch = Launch.of(1, 64, (a, b, a, 16))
        assert launch.buffers == [a, b]
        c = backend.alloc(64)
        moved = launch.on((c, b, c, 16))
        assert moved.buffers == [c, b] and moved.shape() == launch.shape()
        assert launch.args == (a, b, a, 16)  # frozen: the first launch is as it was
    finally:
        backend.close()


def test_split_takes_the_launch_out_of_a_functions_keywords():
    keywords = {"grid": 2, "block": 32, "args": (1,), "bytes_moved": 8, "device": "d", "name": "x"}
    launch, rest = Launch.split(keywords)
    assert launch == Launch((2, 1, 1), (32, 1, 1), (1,))
    assert rest == {"bytes_moved": 8, "device": "d", "name": "x"}
    assert set(FIELDS) == {"grid", "block", "args", "shared_bytes", "setup"}


def test_the_keyword_functions_measure_what_their_launch_does():
    """measure_kernel and measure_pair (the library's keywords) are measure_launch and
    measure_launch_pair of the Launch their keywords make: on a noiseless simulated device,
    the same times."""
    spec = get_device("mi300x")
    settings = MeasureSettings(cache="cold", budget_s=0.05)
    measured = {"bytes_moved": 12 * N, "device": spec, "settings": settings}
    results = []
    for by_keywords in (True, False):
        backend = _sim()
        try:
            kernel, args = _vector_add(backend)
            if by_keywords:
                one = measure_kernel(
                    backend, kernel, grid=N // 256, block=256, args=args, **measured
                )
                two = measure_pair(
                    backend,
                    kernel,
                    kernel,
                    grid=N // 256,
                    block=256,
                    args=args,
                    loads=1,
                    **measured,
                )
            else:
                launch = Launch.of(N // 256, 256, args)
                one = measure_launch(backend, kernel, launch, **measured)
                two = measure_launch_pair(backend, kernel, kernel, launch, loads=1, **measured)
            results.append((one.time_s, one.grid, one.block, two.ratio, two.pairs))
        finally:
            backend.close()
    assert results[0] == results[1]
    assert results[0][1:3] == ((N // 256, 1, 1), (256, 1, 1))
