"""The alarm that ends a measurement whose one call never returns (engine/overdue.py), and
the measurement that sets it, on the simulated device with a real-time limit."""

from __future__ import annotations

import signal
import threading
import time

import numpy as np
import pytest

from pytest_gpuperf.engine.deadline import Deadline
from pytest_gpuperf.engine.measure import MeasureSettings, measure_callable, measure_kernel
from pytest_gpuperf.engine.overdue import Alarm
from pytest_gpuperf.errors import MeasurementTimeout
from pytest_gpuperf.runtime import open_backend
from pytest_gpuperf.runtime.compile import KERNELS_DIR
from pytest_gpuperf.runtime.devices import get_device

N = 1 << 16


@pytest.fixture(autouse=True)
def no_timer_left():
    yield
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL


def test_the_alarm_ends_a_sleep_with_what_the_measurement_saw():
    alarm = Alarm("op", 5.0, lambda: "it saw this")
    began = time.perf_counter()
    with pytest.raises(MeasurementTimeout, match=r"^op: not measured: it saw this$"):
        assert alarm.arm(0.05)
        time.sleep(30)
    assert time.perf_counter() - began < 5


def test_a_disarmed_alarm_does_nothing_and_gives_the_signal_back():
    alarm = Alarm("op", 5.0, lambda: "")
    assert alarm.arm(0.05)
    alarm.disarm()
    time.sleep(0.1)
    alarm.disarm()  # twice: nothing


def test_no_alarm_where_sigalrm_is_someone_elses():
    # pytest-timeout's `signal` method, or the user's own handler: theirs stays
    def theirs(signum, frame):
        raise AssertionError("not ours to ring")

    previous = signal.signal(signal.SIGALRM, theirs)
    try:
        assert not Alarm("op", 5.0, lambda: "").arm(0.01)
        assert signal.getsignal(signal.SIGALRM) is theirs
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    finally:
        signal.signal(signal.SIGALRM, previous)


def test_no_alarm_outside_the_main_thread():
    armed = []
    thread = threading.Thread(target=lambda: armed.append(Alarm("op", 5.0, str).arm(0.01)))
    thread.start()
    thread.join()
    assert armed == [False]


@pytest.fixture
def sim():
    backend = open_backend("sim", 0, device="mi300x", seed=3, run_spread=0.0, jitter=0.0)
    kernel = backend.compile(KERNELS_DIR / "vector_add.hip").kernel("vector_add")
    a = backend.to_device(np.ones(N, np.float32))
    c = backend.alloc(4 * N)
    yield backend, kernel, (a, a, c, N)
    backend.close()


def _real_time_limit(limit_s: float) -> MeasureSettings:
    # a limit on the host's real clock alone (a GPU's): the simulated one allows 30 s more
    deadline = Deadline(limit_s, time.perf_counter)
    return MeasureSettings(cache="hot", budget_s=limit_s / 10, deadline=deadline)


def test_a_call_that_never_returns_ends_at_the_limit_and_once_more(sim):
    backend, kernel, args = sim
    calls = [0]

    def hangs_on_its_tenth_call():
        calls[0] += 1
        backend.launch(kernel, N // 256, 256, args)
        if calls[0] == 10:
            time.sleep(600)  # a wait for something that never comes

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
    time.sleep(0.05)  # the autouse fixture finds no timer and the default handler


def test_a_kernel_gets_no_alarm_its_waits_are_the_kernel_watchdogs(sim, monkeypatch):
    backend, kernel, args = sim
    armed = []
    monkeypatch.setattr(Alarm, "arm", lambda self, after_s: armed.append(after_s) or True)
    measure_kernel(
        backend, kernel, grid=N // 256, block=256, args=args, bytes_moved=12 * N,
        device=get_device("mi300x"), settings=MeasureSettings(cache="hot", budget_s=0.01),
    )  # fmt: skip
    assert armed == []
