"""Where a measurement learns the decision it serves: the fixture's side of the sequential
stopping rule (engine/sequential.py, gate/stop_target.py).

Before measuring, the fixture asks `measure_plan` for the sampling settings' two knobs: the
`StopTarget` (the stored baseline's edges, as this run will judge them, and the floor's) and
the minimum sampling time. A save keeps the minimum it always had (the saves' scatter is the
band of every later run, and the priors were measured at it); a measurement judged against a
stored baseline or a floor samples until its verdict is decided or the horizon reached; one
that nothing judges (no baseline, an A/B run, where stored baselines are only shown), and
hot mode, stop at the precision rule. No pytest import here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_gpuperf.engine.deadline import Deadline
from pytest_gpuperf.engine.policy import (
    STORED_MIN_SAMPLES,
    MeasureSettings,
    hard_limit_s,
    overdue_grace_s,
    stored_min_sampling_s,
)
from pytest_gpuperf.engine.sequential import STORED_MAX_SAMPLES, StopTarget, stored_horizon_s
from pytest_gpuperf.gate.judge import SIMULATED_SUFFIX
from pytest_gpuperf.gate.policy import process_wander_s
from pytest_gpuperf.gate.stop_target import stop_target_for

if TYPE_CHECKING:
    from pytest_gpuperf.config.settings import TestSettings
    from pytest_gpuperf.runtime.base import Backend
    from pytest_gpuperf.runtime.devices import DeviceSpec
    from pytest_gpuperf.runtime.info import DeviceInfo
    from pytest_gpuperf.session.bench_session import BenchSession


@dataclass(frozen=True)
class MeasurePlan:
    """The sampling knobs of one measurement: its stop target (None: the minimum sampling
    time's rule, as a save measures), its minimum sampling time, and whether a cold kernel
    spreads its samples over several placements of its buffers (on a GPU, saved and judged
    alike: where the buffers landed is a level the process would otherwise keep)."""

    stop: StopTarget | None
    min_sampling_s: float
    spread_placements: bool = False


def round_deadline(
    session: BenchSession,
    test: TestSettings,
    backend: Backend,
    *,
    pairs: bool,
    first_calls: bool = False,
) -> Deadline:
    """A hard limit starting now (engine/deadline.py): --gpuperf-hard-limit x the budget of
    `test` (an A/B pair's, several budgets of one kernel, for a round that `pairs`). With
    `first_calls`, the limit of an A/B round's captures and their first calls, where both
    sides compile and autotune: that limit once more, or the kernel timeout where longer, as
    the alarm allows a call (engine/hard_limit.py); the pairs then get a limit of their own,
    as a measurement's first calls are outside its limit."""
    budget_s = test.budget_s * (session.pair_policy.budgets if pairs else 1)
    limit_s = hard_limit_s(budget_s, session.settings.hard_limit)
    if first_calls:
        limit_s += overdue_grace_s(limit_s, backend.kernel_timeout_s)
    return Deadline(limit_s, backend.host_clock, simulated=backend.info.simulated)


def measure_settings(
    session: BenchSession,
    test: TestSettings,
    plan: MeasurePlan,
    *,
    cache: str,
    heartbeat: Callable[[str], None] | None,
) -> MeasureSettings:
    """The engine's settings for a measurement of `test` in mode `cache`: its budget and hard
    limit (--gpuperf-hard-limit x the budget), its `plan` (measure_plan below), and its
    progress lines, which `heartbeat` prints (None: quiet)."""
    progress = None
    if heartbeat is not None:
        say = heartbeat

        def progress(line: str) -> None:
            say(f"gpuperf: {test.test_id}: {line}")

    return MeasureSettings(
        cache=cache,
        budget_s=test.budget_s,
        hard_limit_s=hard_limit_s(test.budget_s, session.settings.hard_limit),
        min_sampling_s=plan.min_sampling_s,
        stop=plan.stop,
        spread_placements=plan.spread_placements,
        progress=progress,
    )


def measure_plan(
    session: BenchSession,
    test: TestSettings,
    info: DeviceInfo,
    spec: DeviceSpec,
    *,
    label: str,
    cache: str,
    bytes_moved: int,
    floor: float | None,
) -> MeasurePlan:
    """The stop target and minimum sampling time of measurement `label` of `test`."""
    budget_s = test.budget_s
    minimum_s = stored_min_sampling_s(info.backend, cache, budget_s)
    settings = session.settings
    # spread placements: what a stored judgement (or a save, which later runs are judged
    # against) needs; a floor or a run with nothing to judge pays no buffer copies for them
    placements = info.backend != "sim" and cache == "cold"
    if settings.save:
        return MeasurePlan(None, minimum_s, placements)
    if cache == "hot":
        return MeasurePlan(StopTarget(), 0.0)
    ref = None
    sim_board_spread = 0.0
    if settings.compare_ref is None:  # an A/B run shows stored baselines, never gates them
        key = spec.key + (SIMULATED_SUFFIX if info.simulated else "")
        board = info.uuid or ""
        ref = session.baselines().lookup(key, test.test_id, label, cache, board=board)
        if info.simulated:
            sim_board_spread = float(getattr(_sim_settings(session), "gpu_spread", 0.0))
    target = stop_target_for(
        ref,
        bytes_moved=bytes_moved,
        peak_bps=float(spec.peak_bps),
        tolerance=test.tolerance,
        false_alarm_rate=session.suite.stored_rate(1),
        horizon_s=stored_horizon_s(info.backend, cache, budget_s, minimum_s),
        max_samples=STORED_MAX_SAMPLES,
        floor=floor,
        simulated_board_spread=sim_board_spread,
        wander_s=process_wander_s(info.backend, cache),
        # the minimum it replaces: a stored judgement's; a floor decides on its own margin
        horizon_samples=STORED_MIN_SAMPLES if minimum_s and ref is not None else 0,
    )
    return MeasurePlan(target, 0.0, placements and ref is not None)


def _sim_settings(session: BenchSession) -> object:
    """The simulated backend's settings (its spread between GPUs), as the judge reads them."""
    return getattr(session.device().backend, "settings", None)
