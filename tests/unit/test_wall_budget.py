"""The sampling budget bounds the host's real time as well as the backend's clock: on the
simulated device the clock is virtual, and a simulated A/B of short kernels spent 238 s of
real time (11,087 pairs, no line for four minutes) inside a budget of simulated seconds. The
host's clock here is a stand-in that every launch advances by 1 ms: deterministic, whatever
else the machine is doing."""

from __future__ import annotations

import time
import types

import numpy as np
import pytest

from pytest_gpuperf.engine import sampling
from pytest_gpuperf.engine.measure import MeasureSettings, measure_kernel, measure_pair
from pytest_gpuperf.engine.policy import real_limit_s
from pytest_gpuperf.runtime.compile import KERNELS_DIR
from pytest_gpuperf.simulate import device as sim

HOST_S_PER_LAUNCH = 0.05  # the model's cost to the host, far above the time it models
BUDGET_S = 0.5


class SlowHost:
    """The host's real clock, advanced by every launch on `backend`."""

    def __init__(self, backend, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now_s = 0.0
        launch = backend.launch

        def slow_launch(*args, **kwargs):
            self.now_s += HOST_S_PER_LAUNCH
            return launch(*args, **kwargs)

        monkeypatch.setattr(backend, "launch", slow_launch)
        clock = types.SimpleNamespace(perf_counter=lambda: self.now_s, time=time.time)
        monkeypatch.setattr(sampling, "time", clock)


@pytest.fixture
def vector_add():
    backend = sim.open(0, seed=5)
    kernel = backend.compile(KERNELS_DIR / "vector_add.hip").kernel("vector_add")
    n = 1 << 12  # a short kernel: microseconds of simulated time per launch
    a, b = (backend.to_device(np.ones(n, np.float32)) for _ in range(2))
    c = backend.alloc(4 * n)
    yield backend, kernel, (a, b, c, n), n
    backend.close()


def settings(lines: list[str]) -> MeasureSettings:
    # a target no measurement reaches and no sample cap: only the budget can stop it
    return MeasureSettings(
        cache="cold", budget_s=BUDGET_S, target_rel_ci=1e-9, max_samples=10**7,
        progress=lines.append,
    )  # fmt: skip


def test_a_measurement_stops_at_the_budget_of_real_time_and_says_where_it_is(
    vector_add, monkeypatch
):
    backend, kernel, args, n = vector_add
    host = SlowHost(backend, monkeypatch)
    monkeypatch.setattr(sampling, "PROGRESS_EVERY_S", 5.0)
    lines: list[str] = []
    m = measure_kernel(
        backend, kernel, grid=n // 256, block=256, args=args, bytes_moved=12 * n,
        device=backend.spec, settings=settings(lines),
    )  # fmt: skip
    assert m.stopped_by == "budget"
    # sampling plus warm-up (their own bounds) and the last batch past the line; without the
    # bound, 350 s of the host's time went by
    assert host.now_s < 2 * (real_limit_s(BUDGET_S) + real_limit_s(0.2))
    assert lines and all("samples so far (budget 0.5 s)" in line for line in lines)
    assert lines[0].startswith("vector_add: sampling for ")


def test_an_ab_pair_stops_at_the_budget_of_real_time(vector_add, monkeypatch):
    backend, kernel, args, n = vector_add
    base = backend.compile(KERNELS_DIR / "vector_add.hip").kernel("vector_add")
    host = SlowHost(backend, monkeypatch)
    monkeypatch.setattr(sampling, "PROGRESS_EVERY_S", 5.0)
    lines: list[str] = []
    paired = measure_pair(
        backend, kernel, base, grid=n // 256, block=256, args=args, bytes_moved=12 * n,
        device=backend.spec, settings=settings(lines),
    )  # fmt: skip
    assert paired.head.stopped_by == "budget"
    assert host.now_s < 2 * (real_limit_s(BUDGET_S) + real_limit_s(0.2))
    assert lines and "pairs so far" in lines[-1]
