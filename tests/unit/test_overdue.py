"""The alarm that ends a measurement whose one call never returns (engine/overdue.py); the
measurements that set it are in test_host_waits.py."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from pytest_gpuperf.engine.overdue import Alarm, Overdue
from pytest_gpuperf.errors import MeasurementTimeout


@pytest.fixture(autouse=True)
def no_timer_left():
    yield
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL


def test_the_alarm_ends_a_sleep_with_what_the_measurement_saw():
    alarm = Alarm("op", 5.0, lambda: "it saw this")
    began = time.perf_counter()
    with pytest.raises(Overdue) as rang:
        assert alarm.arm(0.05)
        time.sleep(30)
    assert time.perf_counter() - began < 5
    # not an Exception: a user's `except Exception` around a wait does not swallow it
    assert not isinstance(rang.value, Exception)
    assert isinstance(rang.value.timeout, MeasurementTimeout)
    assert str(rang.value.timeout) == "op: not measured: it saw this"


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
