"""One model of a stored entry's history, for every view of it (the history command, the
dashboard): its points in time (saves and runs) and the level the gate holds it to (the
expected efficiency, the band around it, the drift across the baselines it replaced).

The history command and the dashboard each had a `Point` of their own and each rebuilt the
band; a fix to one (the level a run was judged at) missed the other. The band is computed in
one place, gate/entry_level.py, into `EntryLevel` below.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_gpuperf.baseline.ref import TrailPoint
from pytest_gpuperf.record.checks import NO_BASELINE, OTHER_DEVICE, REGRESSED, Drift, NoiseBand
from pytest_gpuperf.record.verdict import ACCEPTED, Row

SAVE, RUN = "save", "run"


@dataclass(frozen=True)
class Point:
    """One efficiency in time: a save of the stored entry, or a measurement of a run."""

    when: str
    efficiency: float
    low: float
    high: float
    kind: str  # SAVE | RUN
    commit: str
    board: str = ""  # GPU UUID ("" unrecorded)
    run: int = -1  # the run's index among the reports read (-1: a save)
    status: str = ""  # the verdict's status for a run
    outcome: str = ""  # the stored-baseline outcome for a run
    delta: float | None = None
    allowance: float | None = None
    checks: tuple[str, ...] = ()  # the checks that failed (or were accepted)
    reason: str = ""  # an accepted slowdown's reason and where it was written
    # the false-alarm rate and tolerance the run's stored check was judged at (0: none)
    false_alarm_rate: float = 0.0
    tolerance: float = 0.0
    # a stored check's first round, when a second round decided otherwise ("regressed": this
    # run fell below the band, its second measurement did not), and that round's change
    first_outcome: str = ""
    second_delta: float | None = None

    @property
    def unconfirmed(self) -> bool:
        """A run below the line in its first round that its second round did not confirm."""
        return self.first_outcome == REGRESSED and self.outcome != REGRESSED

    @property
    def label(self) -> str:
        """The commit as a table shows it (12 characters)."""
        return self.commit[:12]


def save_point(
    when: str, efficiency: float, efficiency_ci: tuple[float, float], commit: str, board: str
) -> Point:
    """A save of the entry (baseline/model.py's SaveRecord, field by field)."""
    low, high = efficiency_ci
    return Point(when, efficiency, low, high, SAVE, commit, board)


def run_point(row: Row, *, when: str, commit: str, run: int = -1) -> Point:
    """A run's measurement of the entry, with what the run's gate made of it."""
    measurement, verdict = row.measurement, row.verdict
    check = verdict.baseline
    low, high = measurement.efficiency_ci
    gpu = measurement.gpu
    reason = ""
    if verdict.acceptance is not None and verdict.status == ACCEPTED:
        reason = f"{verdict.acceptance.reason} ({verdict.acceptance.origin()})"
    checks = verdict.accepted_checks if verdict.status == ACCEPTED else verdict.failed_checks
    judged = check.outcome not in (NO_BASELINE, OTHER_DEVICE)
    # the level the stored check was judged at: the check's, or its band's (the same number;
    # a check made outside a pytest run may leave the former at 0)
    rate = check.false_alarm_rate or (check.band.false_alarm_rate if check.band else 0.0)
    return Point(
        when=when,
        efficiency=measurement.efficiency,
        low=low,
        high=high,
        kind=RUN,
        commit=commit,
        board=(gpu.uuid or "") if gpu else "",
        run=run,
        status=verdict.status,
        outcome=check.outcome,
        delta=check.delta,
        allowance=check.allowance,
        checks=tuple(checks),
        reason=reason,
        false_alarm_rate=rate if judged else 0.0,
        tolerance=check.tolerance,
        first_outcome=check.first_outcome,
        second_delta=check.confirmation.delta if check.confirmation is not None else None,
    )


def judged_level(
    runs: list[Point] | tuple[Point, ...], false_alarm_rate: float, tolerance: float
) -> tuple[float, float]:
    """The false-alarm rate and tolerance the newest of `runs` that was judged against the
    stored entry used (its report's), so the band shown is the one that run printed; else the
    defaults given."""
    judged = [p for p in runs if p.kind == RUN and p.false_alarm_rate > 0]
    if not judged:
        return false_alarm_rate, tolerance
    newest = max(judged, key=lambda p: p.when)
    return newest.false_alarm_rate, newest.tolerance


@dataclass(frozen=True)
class EntryLevel:
    """What the gate holds a stored entry to: its expected efficiency, the drop it allows
    (max(tolerance, band)), the band and how it was reached, at a false-alarm rate and
    tolerance; the drift across the baselines it replaced; and (a measured entry) the band of
    a run on a board the baseline has not seen."""

    expected: float
    allowance: float
    band: NoiseBand
    false_alarm_rate: float
    tolerance: float
    drift: Drift | None = None
    trail: tuple[TrailPoint, ...] = ()
    unseen_band: NoiseBand | None = None
    unseen_allowance: float = 0.0
