"""One measurement's hard limit as its sampler keeps it: the deadline (engine/deadline.py),
when it starts (after the work's first calls, which compile and autotune), the check after
every call of the user's work, and the alarm for a call that never returns
(engine/overdue.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_gpuperf.engine.deadline import Deadline, measurement_deadline
from pytest_gpuperf.engine.overdue import Alarm
from pytest_gpuperf.engine.policy import MeasureSettings, overdue_grace_s


class HardLimit:
    """`words(spent_s)` says what the measurement saw by its limit; `phase()` where it is."""

    def __init__(
        self,
        settings: MeasureSettings,
        backend: Any,
        label: str,
        words: Callable[[float], str],
        phase: Callable[[], str],
    ) -> None:
        self.settings = settings
        self.backend = backend
        self.label = label
        self.words = words
        self.phase = phase
        self.deadline: Deadline = settings.deadline or self._own_deadline()
        # From the first calls to the end of sampling every call of a callable is checked
        # against the limit (`bounded`); the first calls (compiles, autotuning) are not.
        self.first_calls_made = False
        self.calls_bounded = False
        self.alarm: Alarm | None = None

    def _own_deadline(self) -> Deadline:
        return measurement_deadline(
            self.settings.hard_limit_s, self.settings.budget_s, self.backend
        )

    def first_calls_done(self, *, alarm: bool = False) -> None:
        """The work's first calls are made: its own hard limit starts now (once: later calls
        are the measurement's). A first call compiles and autotunes (a Triton autotuner timed
        18 configs in a DyT op's, and its save was stopped at 5 s, H200 2026-11-29); an A/B
        round's limit, which its captures share, keeps counting. `alarm`: the user's work
        (a callable), whose one call that never returns the alarm ends."""
        if self.first_calls_made:
            return
        self.first_calls_made = self.calls_bounded = True
        if self.settings.deadline is None:
            self.deadline = self._own_deadline()
        if alarm:
            self._set_alarm()

    def _set_alarm(self) -> None:
        """What is left of the limit, then the limit again, or the kernel watchdog's time
        where that is longer (a kernel that never finishes is the watchdog's to name)."""
        deadline = self.deadline
        grace_s = overdue_grace_s(deadline.real_limit_s, self.backend.kernel_timeout_s)
        after_s = deadline.real_left_s() + grace_s

        def words() -> str:
            return (
                f"a call of the work did not return: stopped {after_s:.0f} s after its first "
                f"calls, during {self.phase()} (hard limit {deadline.limit_s:g} s, then "
                f"{grace_s:g} s more): it hangs, or waits for something that does not come"
            )

        self.alarm = Alarm(self.label, deadline.limit_s, words)
        self.alarm.arm(after_s)

    def bounded(self, call: Callable[[], Any]) -> Callable[[], None]:
        """`call`, with the limit checked after each call between the first calls and the
        end of sampling. Between batches is not enough for the user's work: a callable whose
        call takes a second of host time made 33 calls against a 5 s limit, 20 of them in one
        batch, and 6, 3 and 3 in the checks and the probe before it."""

        def checked() -> None:
            call()
            if self.calls_bounded:
                self.check()

        return checked

    def bounded_setup(self, setup: Callable[[], None] | None) -> Callable[[], None] | None:
        return self.bounded(setup) if setup is not None else None

    def sampled(self) -> None:
        """Sampling ended: the untimed calls and the statistics after it are the caller's."""
        self.calls_bounded = False
        self.close()

    def check(self) -> None:
        """Raise MeasurementTimeout once the limit is spent."""
        self.deadline.check(self.label, self.words)

    def close(self) -> None:
        if self.alarm is not None:
            self.alarm.disarm()
