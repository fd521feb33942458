"""The hard wall-clock limit of one measurement: no sampling, A/B round, confirmation or
save outlives it.

`--gpuperf-budget` is what sampling aims for, and sampling's own rules stop at it only once
they have something to stop on: a pair stops at the budget once every load has its pairs.
Work whose every sample is dropped (a callable that waits on the host, so that no timed launch
finds the queue busy) never gets there, and a pull-request gate waited 170 s on a 4 s budget
before an outer timeout killed it, with no line saying why. A `Deadline` bounds what the
budget cannot: it is checked between batches (and between the captures of an A/B round),
and at its limit the measurement ends with `MeasurementTimeout`, whose words say what was
seen by then.

It keeps two clocks. The backend's (the host's on a GPU, a virtual one on the simulated
device) bounds the measurement at `limit_s`; the host's real clock bounds it too, at the
same limit on a GPU, and on the simulated device at `real_limit_s(limit_s)`, since a
simulated run of a short budget costs several times its virtual time on a busy machine.
A call of the user's work is checked after it returns (engine/hard_limit.py); one that never
returns is ended by the alarm of engine/overdue.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytest_gpuperf.engine.policy import hard_limit_s, real_limit_s
from pytest_gpuperf.errors import MeasurementTimeout


@dataclass
class Deadline:
    """When a measurement (or an A/B round) must have ended, on two clocks (module
    docstring). `clock` is the backend's host clock; `simulated` says it is virtual."""

    limit_s: float
    clock: Callable[[], float]
    simulated: bool = False
    started: float = field(init=False)
    real_started: float = field(init=False)

    def __post_init__(self) -> None:
        self.started = self.clock()
        self.real_started = time.perf_counter()

    @property
    def real_limit_s(self) -> float:
        return real_limit_s(self.limit_s) if self.simulated else self.limit_s

    def spent_s(self) -> float:
        """The part of the limit spent, in the limit's seconds (the larger of the two
        clocks' shares)."""
        real = (time.perf_counter() - self.real_started) * self.limit_s / self.real_limit_s
        return max(self.clock() - self.started, real)

    def left_s(self) -> float:
        return self.limit_s - self.spent_s()

    def real_left_s(self) -> float:
        """What is left of the limit on the host's real clock alone."""
        return self.real_limit_s - (time.perf_counter() - self.real_started)

    @property
    def passed(self) -> bool:
        return self.left_s() <= 0

    def check(self, label: str, what: Callable[[float], str]) -> None:
        """Raise MeasurementTimeout once the limit is spent; `what(spent_s)` says what the
        measurement saw by then (built only when it is needed; `spent_s` in the limit's
        seconds: the backend clock's, or the real clock's share on the simulated device)."""
        spent_s = self.spent_s()
        if spent_s >= self.limit_s:
            raise MeasurementTimeout(label, self.limit_s, what(spent_s))


def measurement_deadline(limit_s: float | None, budget_s: float, backend: Any) -> Deadline:
    """A measurement's own limit, starting now: `limit_s`, else the budget's hard limit, on
    the backend's clock (virtual on the simulated device)."""
    limit_s = limit_s or hard_limit_s(budget_s)
    return Deadline(limit_s, backend.host_clock, simulated=backend.info.simulated)


def what_it_saw(
    kept: int, dropped: int, *, paired: bool, phase: str, spent_s: float, limit_s: float
) -> str:
    """What a measurement saw by its hard limit, in one line: what it kept (pairs or
    samples) and dropped, where it was, and the likely cause."""
    unit = "pairs" if paired else "samples"
    head = (
        f"{kept:,} {unit} kept and {dropped:,} samples dropped in {spent_s:.1f} s, during "
        f"{phase} (hard limit {limit_s:g} s)"
    )
    if dropped and dropped >= kept:
        why = (
            f"{'every' if not kept else 'most'} sample found the device queue empty, as when "
            "the work waits on the host after its first calls (a synchronisation the probe "
            "did not see) or the host cannot launch it as fast as the device runs it"
        )
    elif paired and kept:
        why = "the pairs did not reach every load before the limit (each call is slow)"
    elif not kept:
        why = "no sample was taken: each call takes longer than the limit allows"
    else:
        why = "sampling had not reached its stopping rule"
    return f"{head}: {why}"
