"""The alarm that ends a measurement whose one call of the user's work never returns.

The hard limit (engine/deadline.py) is checked after every call of a callable, so a call
that takes seconds ends the measurement one call past its limit; a call that never returns
(a Python loop waiting on a flag, a sleep, a lock) would hold the thread for good, and the
pull-request gate with it. Once a measurement's first calls are made, a real-time alarm is
set for what is left of its limit plus the limit once more; if the measurement has not
ended by then, the alarm raises in the main thread, at its next Python instruction, as
pytest-timeout's `signal` method does, and the measurement ends with MeasurementTimeout. A
call blocked inside C that never returns to Python (a driver wait on a kernel that never
finishes) is not reached this way: the plugin's own waits poll for that (the kernel
watchdog, --gpuperf-kernel-timeout).

The alarm is SIGALRM with ITIMER_REAL: set only in the main thread, and only where nothing
else uses them (pytest-timeout's `signal` method, a user's own timer); otherwise there is
no alarm and the limit between calls is the bound.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType

from pytest_gpuperf.errors import MeasurementTimeout


class Overdue(BaseException):
    """What the alarm raises: a BaseException, as pytest's own outcomes are, so that the
    user's `except Exception` around a wait cannot swallow it; the measurement raises its
    `timeout` (a MeasurementTimeout) where its own code catches it."""

    def __init__(self, timeout: MeasurementTimeout) -> None:
        super().__init__(str(timeout))
        self.timeout = timeout


class Alarm:
    """One measurement's alarm: `arm(after_s)` once its first calls are made, `disarm()`
    when it ends (whatever happened); `words()` says what the measurement saw by then."""

    def __init__(self, label: str, limit_s: float, words: Callable[[], str]) -> None:
        self.label = label
        self.limit_s = limit_s
        self.words = words
        self.armed = False
        self._previous: object = None

    def arm(self, after_s: float) -> bool:
        """Set the alarm `after_s` seconds from now; False where it cannot be set."""
        if self.armed or not _free():
            return False
        self._previous = signal.signal(signal.SIGALRM, self._ring)
        self.armed = True
        signal.setitimer(signal.ITIMER_REAL, max(after_s, 1e-3))
        return True

    def disarm(self) -> None:
        if not self.armed:
            return
        self.armed = False  # first: an alarm already on its way then does nothing
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self._previous)  # type: ignore[arg-type]

    def _ring(self, signum: int, frame: FrameType | None) -> None:
        if not self.armed:
            return
        self.disarm()
        raise Overdue(MeasurementTimeout(self.label, self.limit_s, self.words()))


def _free() -> bool:
    """SIGALRM and the real-time timer are this process's to use: the main thread, no
    handler set for SIGALRM, no timer running."""
    if threading.current_thread() is not threading.main_thread():
        return False
    if not hasattr(signal, "setitimer"):  # not POSIX
        return False
    if signal.getsignal(signal.SIGALRM) not in (signal.SIG_DFL, None):
        return False
    return signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
