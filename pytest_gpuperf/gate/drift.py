"""A drift across saves: each re-save of changed code looked harmless, together they are not.

A team that re-saves the baseline after every merge starts a new history each time (other
code), so the stored-baseline gate compares every run with the level of the LAST change
only: a kernel can lose 0.8% per pull request, each inside the noise, and nothing ever says
-4% after five merges. The file therefore keeps a trail of the baselines an entry replaced
(commit, level, spread, saves; policy.TRAIL_LENGTH of them), and this module compares the
entry's level with every earlier one.

The idea is that of asv's step detection (asv/step_detect.py, which fits a piecewise-constant
curve to a benchmark's history and reports the regressions between its steps): here the
steps are given, one per code version, with the noise of each level known from its saves, so
no fit is needed. The drift is the largest drop from an earlier level to now that is beyond
the noise of the two levels, judged one-sided at the false-alarm rate split over the
comparisons made (a union bound, as the run's budget is split: gate/suite.py), and never
smaller than the tolerance.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from pytest_gpuperf.baseline.ref import BaselineRef, TrailPoint
from pytest_gpuperf.engine.distributions import norm_isf
from pytest_gpuperf.gate.noise import centre_factor
from pytest_gpuperf.gate.policy import FALSE_ALARM_RATE, Z_95, between_board_spread
from pytest_gpuperf.record.checks import Drift


def drift_of(
    ref: BaselineRef,
    *,
    tolerance: float,
    false_alarm_rate: float = FALSE_ALARM_RATE,
    simulated_board_spread: float = 0.0,
) -> Drift | None:
    """The drift of a stored entry down from the baselines it replaced, or None: the one
    computation the gate (gate/stored.py) and the history CLI share. Levels saved on other
    boards differ by the between-board spread too (the simulated device's own figure there)."""
    if not ref.trail:
        return None
    current = TrailPoint(
        ref.efficiency, ref.run_spread, ref.saves, ref.commit, ref.when, ref.latest_board
    )
    if ref.backend == "sim":
        between = simulated_board_spread
    else:
        between = between_board_spread(ref.backend, ref.time_s, ref.cache)
    return detect_drift(
        ref.trail,
        current,
        tolerance=tolerance,
        false_alarm_rate=false_alarm_rate,
        between_sigma=between / Z_95,
    )


def detect_drift(
    trail: Sequence[TrailPoint],
    current: TrailPoint,
    *,
    tolerance: float,
    false_alarm_rate: float = FALSE_ALARM_RATE,
    between_sigma: float = 0.0,
) -> Drift | None:
    """The drift from an earlier level of `trail` (oldest first) down to `current`, or None.

    For each earlier level i: change = current / level_i - 1, allowance = max(tolerance,
    z(1 - rate / k) x sqrt(var_i + var_now)), where var of a level is (run_spread / 1.96)^2 x
    the share of its centre (a median of its saves: centre_factor^2 - 1) and k the number of
    earlier levels; two levels saved on different boards (or on boards not recorded) differ by
    the boards' levels too, 2 x `between_sigma`^2 more variance. The most significant drop
    beyond its allowance is the drift."""
    if not trail or current.efficiency <= 0:
        return None
    quantile = norm_isf(false_alarm_rate / len(trail))  # finite at any rate
    levels = [*trail, current]
    best: tuple[float, int, float] | None = None  # (significance, index, allowance)
    for index, earlier in enumerate(trail):
        if earlier.efficiency <= 0:
            continue
        change = current.efficiency / earlier.efficiency - 1.0
        allowance = max(
            tolerance, quantile * math.sqrt(_pair_variance(earlier, current, between_sigma))
        )
        if change < -allowance:
            significance = -change / allowance
            if best is None or significance > best[0]:
                best = (significance, index, allowance)
    if best is None:
        return None
    _, index, allowance = best
    steps = tuple(levels[index:])
    changes = [b.efficiency / a.efficiency - 1.0 for a, b in itertools.pairwise(steps)]
    step_allowances = [
        max(tolerance, quantile * math.sqrt(_pair_variance(a, b, between_sigma)))
        for a, b in itertools.pairwise(steps)
    ]
    since = steps[0]
    return Drift(
        change=current.efficiency / since.efficiency - 1.0,
        allowance=allowance,
        since_commit=since.commit,
        since_when=since.when,
        steps=steps,
        largest_step=min(changes),
        gradual=all(c >= -a for c, a in zip(changes, step_allowances, strict=True)),
        false_alarm_rate=false_alarm_rate,
    )


def _variance(level: TrailPoint) -> float:
    """The variance of a level's log (its centre, a median of its saves)."""
    sigma = level.run_spread / Z_95
    return sigma**2 * (centre_factor(level.saves) ** 2 - 1.0)


def _pair_variance(a: TrailPoint, b: TrailPoint, between_sigma: float) -> float:
    """The variance of log(b / a): both centres, and both boards' levels unless one board
    saved both."""
    same_board = bool(a.board) and a.board == b.board
    boards = 0.0 if same_board else 2.0 * between_sigma**2
    return _variance(a) + _variance(b) + boards
