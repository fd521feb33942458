"""Work that waits for the device, and the hard limit no measurement outlives, on the simulated
device (engine/host_waits.py, engine/deadline.py).

A callable that synchronises the host (PyTorch's `.item()`, a host copy, a `cudaFree`) drains
the queue the engine keeps ahead of it: behind a spin every such call waits for the spin, every
sample is dropped, and a real library's cross-entropy once sampled for 170 s on a 4 s budget.
Here the simulated device's virtual host clock models the wait (`synchronize` moves the host to
the end of the queue), with its noise off, so what is timed is known exactly."""

from __future__ import annotations

import signal
import time

import numpy as np
import pytest

from pytest_gpuperf.engine.deadline import Deadline
from pytest_gpuperf.engine.host_waits import waits_on_device
from pytest_gpuperf.engine.measure import (
    MeasureSettings,
    measure_callable,
    measure_callable_pair,
    measure_kernel,
)
from pytest_gpuperf.engine.overdue import Alarm
from pytest_gpuperf.engine.policy import HARD_LIMIT_MIN_S, hard_limit_s, real_limit_s
from pytest_gpuperf.engine.timing import engine_for
from pytest_gpuperf.errors import ConfigError, MeasurementTimeout
from pytest_gpuperf.runtime import open_backend
from pytest_gpuperf.runtime.compile import KERNELS_DIR
from pytest_gpuperf.runtime.devices import get_device

N = 1 << 20  # 12 MiB moved: about 3 us of simulated time a launch


@pytest.fixture
def sim():
    backend = open_backend("sim", 0, device="mi300x", seed=3, run_spread=0.0, jitter=0.0)
    kernel = backend.compile(KERNELS_DIR / "vector_add.hip").kernel("vector_add")
    a = backend.to_device(np.ones(N, np.float32))
    c = backend.alloc(4 * N)
    yield backend, kernel, (a, a, c, N)
    backend.close()


def _op(backend, kernel, args, *, waits: bool):
    def op():
        backend.launch(kernel, N // 256, 256, args)
        if waits:
            backend.synchronize()  # as `.item()` does: the host waits for the queue

    return op


def test_the_probe_tells_work_that_waits_from_work_that_queues(sim):
    backend, kernel, args = sim
    engine = engine_for(backend)
    queued, waiting = (_op(backend, kernel, args, waits=w) for w in (False, True))
    for op in (queued, waiting):
        op()  # the first call is the caller's (compiles, autotuning)
    assert not waits_on_device(engine, queued, backend.host_clock)
    assert waits_on_device(engine, waiting, backend.host_clock)


def test_a_callable_that_waits_is_timed_as_it_runs_and_says_so(sim):
    backend, kernel, args = sim
    device = get_device("mi300x")
    settings = MeasureSettings(cache="cold", budget_s=0.05)
    queued = measure_callable(
        backend, _op(backend, kernel, args, waits=False), bytes_moved=12 * N, device=device,
        settings=settings,
    )  # fmt: skip
    waiting = measure_callable(
        backend, _op(backend, kernel, args, waits=True), bytes_moved=12 * N, device=device,
        settings=settings,
    )  # fmt: skip
    assert queued.queue_method.startswith("flush-ahead") and "as_it_runs" not in queued.extra
    assert waiting.queue_method.startswith("as-it-runs: 1 call per event pair after a read-flush")
    assert "synchronises the host" in waiting.queue_method
    assert waiting.extra["starved_samples_dropped"] == 0 and len(waiting.samples_s) >= 10
    # As it runs, the pair holds the kernel and the host's wait after it: never less than the
    # kernel alone, and more by about one synchronisation.
    assert queued.time_s < waiting.time_s < queued.time_s + 20e-6


def test_an_ab_pair_of_callables_that_wait_is_decided_within_its_bound(sim):
    # Before: no pair was ever kept, and the pair (which stops at the budget only once every
    # load has pairs) sampled until an outer timeout killed it.
    backend, kernel, args = sim
    heads = [_op(backend, kernel, args, waits=True) for _ in range(3)]
    bases = [_op(backend, kernel, args, waits=True) for _ in range(3)]
    paired = measure_callable_pair(
        backend, heads, bases, bytes_moved=12 * N, device=get_device("mi300x"),
        settings=MeasureSettings(cache="cold", budget_s=0.05),
    )  # fmt: skip
    assert paired.pairs >= 10 and paired.head.queue_method.startswith("as-it-runs")
    assert paired.base.queue_method == paired.head.queue_method
    assert 0.98 < paired.ratio < 1.02


def test_one_side_that_waits_times_both_sides_as_they_run(sim):
    # a pull request that adds an .item(): both sides are timed one way, and head pays its wait
    backend, kernel, args = sim
    paired = measure_callable_pair(
        backend,
        [_op(backend, kernel, args, waits=True) for _ in range(3)],
        [_op(backend, kernel, args, waits=False) for _ in range(3)],
        bytes_moved=12 * N,
        device=get_device("mi300x"),
        settings=MeasureSettings(cache="hot", budget_s=0.05),
    )
    assert paired.head.queue_method.startswith("as-it-runs")
    assert paired.base.queue_method.startswith("as-it-runs")
    assert paired.ratio > 1.0


def test_a_setup_that_waits_is_refused_in_one_line_naming_the_setup(sim):
    backend, kernel, args = sim
    with pytest.raises(ConfigError, match=r"^vadd: setup= waits for the device") as refused:
        measure_kernel(
            backend, kernel, grid=N // 256, block=256, args=args, bytes_moved=12 * N,
            device=get_device("mi300x"), settings=MeasureSettings(cache="cold", budget_s=0.05),
            name="vadd", setup=lambda: backend.fill(args[2], 0) or backend.synchronize(),
        )  # fmt: skip
    assert "\n" not in str(refused.value)
    with pytest.raises(ConfigError, match=r"^op: setup= waits for the device"):
        measure_callable(
            backend, _op(backend, kernel, args, waits=False), bytes_moved=12 * N,
            device=get_device("mi300x"), settings=MeasureSettings(cache="cold", budget_s=0.05),
            name="op", setup=backend.synchronize,
        )  # fmt: skip


def test_a_setup_that_queues_without_waiting_is_measured(sim):
    backend, kernel, args = sim
    result = measure_kernel(
        backend, kernel, grid=N // 256, block=256, args=args, bytes_moved=12 * N,
        device=get_device("mi300x"), settings=MeasureSettings(cache="cold", budget_s=0.05),
        setup=lambda: backend.fill(args[2], 0),
    )  # fmt: skip
    assert result.queue_method.endswith("+ setup before every timed launch")


def test_work_that_starts_waiting_after_the_probe_ends_at_the_hard_limit_with_what_it_saw(sim):
    # The probe cannot see a wait that begins later (a cache that fills, an autotuner meeting a
    # new key): every sample is then dropped, and only the hard limit ends the pair.
    backend, kernel, args = sim
    calls = [0]

    def later():
        calls[0] += 1
        backend.launch(kernel, N // 256, 256, args)
        if calls[0] > 60:
            backend.synchronize()

    with pytest.raises(MeasurementTimeout) as stopped:
        measure_callable_pair(
            backend, [later] * 3, [later] * 3, bytes_moved=12 * N, device=get_device("mi300x"),
            settings=MeasureSettings(cache="cold", budget_s=0.05, hard_limit_s=0.5),
            name="late",
        )  # fmt: skip
    words = str(stopped.value)
    assert words.startswith("late: not measured: 0 pairs kept and ")
    assert "s, during sampling (hard limit 0.5 s): every sample found" in words
    assert "every sample found the device queue empty" in words and "\n" not in words
    assert calls[0] < 100_000  # it stopped, and soon


def test_the_hard_limit_is_a_documented_multiple_of_the_budget():
    assert hard_limit_s(4.0) == 40.0 and hard_limit_s(4.0, 3) == 12.0
    assert hard_limit_s(0.1) == HARD_LIMIT_MIN_S
    with pytest.raises(ConfigError, match="hard_limit_s must be positive"):
        MeasureSettings(hard_limit_s=0.0)


class _Clock:
    def __init__(self) -> None:
        self.now_s = 0.0

    def __call__(self) -> float:
        return self.now_s


def test_a_deadline_counts_the_backend_clock():
    # (a wait for the GPU lock is not counted: an A/B's pairs make their limit once they
    # hold the lock, session/fixture.py)
    clock = _Clock()
    deadline = Deadline(10.0, clock)
    clock.now_s = 4.0
    assert deadline.left_s() == pytest.approx(6.0, abs=0.01)
    clock.now_s = 15.0
    with pytest.raises(MeasurementTimeout, match=r"^x: not measured: 15 s$"):
        deadline.check("x", lambda spent_s: f"{spent_s:.0f} s")


def test_a_simulated_deadline_allows_the_real_clock_more_than_its_virtual_limit():
    # the simulated device's clock is virtual: its real-time limit is the sampling budget's rule
    deadline = Deadline(10.0, _Clock(), simulated=True)
    assert deadline.real_limit_s == real_limit_s(10.0) > 10.0
    assert Deadline(10.0, _Clock()).real_limit_s == 10.0


def test_a_pairs_hard_limit_grows_with_its_budget():
    # an A/B pair samples for several budgets of one kernel: its limit is that many times too
    # (a real library's cross-entropy pair was stopped at one kernel's 5 s after 786 pairs)
    from pytest_gpuperf.gate.pairing import PairPolicy

    policy = PairPolicy()
    kernel = MeasureSettings(budget_s=0.5, hard_limit_s=5.0)
    paired = policy.settings(kernel, 0.95)
    assert paired.budget_s == policy.budgets * 0.5
    assert paired.hard_limit_s == policy.budgets * 5.0
    assert policy.settings(MeasureSettings(budget_s=0.5), 0.95).hard_limit_s is None


def test_a_first_call_that_autotunes_is_outside_the_measurements_hard_limit(sim):
    # A first call compiles and autotunes (a Triton DyT op's save was stopped at its 5 s limit
    # on an H200 by its autotuner's 18 configs): the limit starts after it.
    backend, kernel, args = sim
    calls = [0]

    def tuned():
        calls[0] += 1
        for _ in range(1 if calls[0] > 1 else 30_000):  # the first call: "autotuning"
            backend.launch(kernel, N // 256, 256, args)
        backend.synchronize() if calls[0] == 1 else None

    result = measure_callable(
        backend, tuned, bytes_moved=12 * N, device=get_device("mi300x"),
        settings=MeasureSettings(cache="cold", budget_s=0.002, hard_limit_s=0.05),
    )  # fmt: skip
    assert len(result.samples_s) >= 10


def test_every_call_of_slow_work_is_checked_against_the_hard_limit(sim):
    # Between batches is not enough for slow calls: a callable whose call took 1 s of host time
    # made 33 calls against a 5 s limit (6 in the queue check, 3 in the probe for host waits,
    # 1 first launch, 3 in the probe, then a batch of 20). Every call after the first is checked.
    backend, kernel, args = sim
    calls = [0]

    def slow():
        calls[0] += 1
        for _ in range(500):  # a call the host waits through: a few ms of simulated time
            backend.launch(kernel, N // 256, 256, args)
        backend.synchronize()

    began = backend.host_clock()
    slow()
    call_s = backend.host_clock() - began
    limit_s = 4 * call_s
    calls[0] = 0
    with pytest.raises(MeasurementTimeout) as stopped:
        measure_callable(
            backend, slow, bytes_moved=12 * N * 500, device=get_device("mi300x"),
            settings=MeasureSettings(cache="hot", budget_s=limit_s / 10, hard_limit_s=limit_s),
            name="slow",
        )  # fmt: skip
    assert str(stopped.value).startswith("slow: not measured: 0 samples kept and 0 samples")
    # the first call (outside the limit), then the calls that fit in it, then the one that
    # found it spent
    assert calls[0] <= 1 + 4 + 1, calls[0]


def test_every_call_of_a_slow_pair_is_checked_against_the_hard_limit(sim):
    # an A/B pair of captures (three loads a side), each call a few ms the host waits through
    backend, kernel, args = sim
    calls = [0]

    def slow():
        calls[0] += 1
        for _ in range(500):
            backend.launch(kernel, N // 256, 256, args)
        backend.synchronize()

    began = backend.host_clock()
    slow()
    limit_s = 4 * (backend.host_clock() - began)
    calls[0] = 0
    with pytest.raises(MeasurementTimeout):
        measure_callable_pair(
            backend, [slow] * 3, [slow] * 3, bytes_moved=12 * N * 500,
            device=get_device("mi300x"),
            settings=MeasureSettings(cache="hot", budget_s=limit_s / 10, hard_limit_s=limit_s),
        )  # fmt: skip
    # the six captures' first calls (outside the limit, though they outlast it), then as above
    assert 6 < calls[0] <= 6 + 4 + 1, calls[0]


def _real_time_limit(limit_s: float) -> MeasureSettings:
    # a limit on the host's real clock alone (a GPU's): the simulated one allows 30 s more
    deadline = Deadline(limit_s, time.perf_counter)
    return MeasureSettings(cache="hot", budget_s=limit_s / 10, deadline=deadline)


def _sleep_for_good() -> None:
    time.sleep(600)  # a wait for something that never comes


def _retry_for_good() -> None:
    while True:  # a wait that retries whatever an attempt raises
        try:
            time.sleep(600)
        except Exception:  # the user's code
            continue


@pytest.mark.parametrize("wait", [_sleep_for_good, _retry_for_good], ids=["sleep", "retry"])
def test_a_call_that_never_returns_ends_at_the_limit_and_once_more(sim, wait):
    backend, kernel, args = sim
    calls = [0]

    def hangs_on_its_tenth_call():
        calls[0] += 1
        backend.launch(kernel, N // 256, 256, args)
        if calls[0] == 10:
            wait()

    began = time.perf_counter()
    with pytest.raises(MeasurementTimeout) as stopped:
        measure_callable(
            backend, hangs_on_its_tenth_call, bytes_moved=12 * N, device=get_device("mi300x"),
            settings=_real_time_limit(0.5), name="op",
        )  # fmt: skip
    took_s = time.perf_counter() - began
    assert 0.5 <= took_s < 0.5 + 0.5 + 1.0, took_s
    words = str(stopped.value)
    assert words.startswith("op: not measured: a call of the work did not return: stopped ")
    assert "(hard limit 0.5 s, then 0.5 s more): it hangs" in words and "\n" not in words
    assert calls[0] == 10


def test_a_measurement_that_ends_leaves_no_alarm_behind(sim):
    backend, kernel, args = sim
    measurement = measure_callable(
        backend, lambda: backend.launch(kernel, N // 256, 256, args), bytes_moved=12 * N,
        device=get_device("mi300x"), settings=MeasureSettings(cache="hot", budget_s=0.01),
    )  # fmt: skip
    assert measurement.samples_s
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL


def test_a_kernel_gets_no_alarm_its_waits_are_the_kernel_watchdogs(sim, monkeypatch):
    backend, kernel, args = sim
    armed = []
    monkeypatch.setattr(Alarm, "arm", lambda self, after_s: armed.append(after_s) or True)
    measure_kernel(
        backend, kernel, grid=N // 256, block=256, args=args, bytes_moved=12 * N,
        device=get_device("mi300x"), settings=MeasureSettings(cache="hot", budget_s=0.01),
    )  # fmt: skip
    assert armed == []
