"""Judging one test: gather each measurement's inputs (its floor, stored baseline, A/B result,
previous save) and decide, once, through the checks of this package.

The pytest layer hands over what the fixture took (`Taken`) and the run's context
(`JudgeContext`); it gets back verdicts and the baseline entries to write. Writing them is the
session's job; deciding what to write is this module's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pytest_gpuperf.baseline import BaselineEntry, BaselineStore
from pytest_gpuperf.baseline.model import utc_now
from pytest_gpuperf.gate.ab import check_comparison, no_base, unchanged
from pytest_gpuperf.gate.decide import decide
from pytest_gpuperf.gate.floor import check_floor
from pytest_gpuperf.gate.policy import DEFAULT_COMPARE_THRESHOLD, HISTORY_LENGTH
from pytest_gpuperf.gate.saving import SaveContext, plan_save
from pytest_gpuperf.gate.stored import check_baseline
from pytest_gpuperf.results import (
    BaselineRef,
    ComparisonCheck,
    Measurement,
    PairedComparison,
    Verdict,
)

SIMULATED_SUFFIX = "-sim"


@dataclass(frozen=True)
class AbResult:
    """What the A/B step produced for one measurement, before judging: a timed pair, or
    identical code (`unchanged_fingerprint`), or no base (`no_base_why`, `detail`)."""

    paired: PairedComparison | None = None
    unchanged_fingerprint: str = ""
    no_base_why: str = ""
    detail: str = ""


@dataclass(frozen=True)
class Taken:
    """One gpu_bench measurement as the fixture took it, with its floor (None: no floor)."""

    measurement: Measurement
    floor: float | None = None
    floor_origin: str = "min_bw"
    ab: AbResult | None = None
    cache_bytes: int = 0  # the device's caches: a hot floor on a working set they hold warns


@dataclass(frozen=True)
class JudgeContext:
    """The run's side of a judgement (settings, provenance, the command to re-record)."""

    tolerance: float
    strict: bool = False
    saving: bool = False
    compare_ref: str | None = None
    compare_commit: str = ""
    compare_threshold: float = DEFAULT_COMPARE_THRESHOLD
    compare_forced: bool = False
    compare_code_spread: float | None = None  # None: the backend's default
    history_length: int = HISTORY_LENGTH
    update_command: str = ""
    commit: str = ""
    runtime_version: str = ""
    driver_version: str = ""
    prior_spread: float = 0.07
    unjudged: bool = False


@dataclass(frozen=True)
class Judged:
    """One measurement's verdict, and the entry to save under its device key (if any).

    `entry` appends this save to the entry as it was read when the test was judged; `rebase`
    builds the same save on the entry as it is in the file when it is written (under the
    file's lock), so a save by another process in between is kept, not overwritten.
    """

    measurement: Measurement
    verdict: Verdict
    save_key: str = ""
    entry: BaselineEntry | None = None
    rebase: Callable[[BaselineEntry | None], BaselineEntry] | None = None


def baseline_keys(measurement: Measurement) -> tuple[str, str | None]:
    """(the file a measurement is judged against and saved to, the file shown beside it).

    A simulated device reads and writes `<key>-sim.toml` only: simulated numbers are never
    judged against a real device's (or reported) baselines, which are shown for information.
    A real device reads and writes its own file."""
    if measurement.simulated:
        return measurement.device_key + SIMULATED_SUFFIX, measurement.device_key
    return measurement.device_key, None


def judge(
    test_id: str,
    taken: Sequence[Taken],
    store: BaselineStore,
    context: JudgeContext,
    *,
    prior_spread_for: dict[int, float] | None = None,
) -> list[Judged]:
    """The verdict of every measurement of one test. `prior_spread_for` maps a position in
    `taken` to the prior spread a first save records for it (default: context's)."""
    judged = []
    for position, item in enumerate(taken):
        prior = (prior_spread_for or {}).get(position, context.prior_spread)
        judged.append(_judge_one(test_id, item, store, context, prior))
    return judged


def _judge_one(
    test_id: str, item: Taken, store: BaselineStore, context: JudgeContext, prior: float
) -> Judged:
    m = item.measurement
    own_key, info_key = baseline_keys(m)
    reference = store.lookup(own_key, test_id, m.name, m.cache)
    info: BaselineRef | None = None
    if info_key is not None:
        info = store.lookup(info_key, test_id, m.name, m.cache)
    elsewhere: tuple[str, ...] = ()
    if reference is None:
        elsewhere = tuple(
            key
            for key in store.devices_with(test_id, m.name, m.cache)
            if key not in (own_key, info_key)
        )
    comparison = _comparison(item.ab, context)
    baseline = check_baseline(
        m,
        reference,
        tolerance=context.tolerance,
        strict=context.strict,
        gating=comparison is None,
        elsewhere=elsewhere,
        info=info,
        device_key=own_key,
    )
    floor = None
    if item.floor is not None:
        floor = check_floor(m, item.floor, origin=item.floor_origin, cache_bytes=item.cache_bytes)
    save = entry = rebase = None
    if context.saving:
        previous = store.load(own_key).get(test_id, m.name, m.cache)
        save_context = SaveContext(
            test_id=test_id,
            path=str(store.path_for(own_key)),
            device_key=own_key,
            commit=context.commit,
            runtime_version=context.runtime_version,
            driver_version=context.driver_version,
            prior_spread=prior,
            history_length=context.history_length,
            when=utc_now(),
        )
        save, entry = plan_save(m, previous, save_context, floor=floor, unjudged=context.unjudged)
        if entry is not None:
            rebase = _rebaser(m, save_context)
    verdict = decide(
        baseline=baseline,
        floor=floor,
        comparison=comparison,
        save=save,
        unjudged=context.unjudged,
        update_command=context.update_command,
    )
    return Judged(m, verdict, own_key if entry is not None else "", entry, rebase)


def _rebaser(
    m: Measurement, save_context: SaveContext
) -> Callable[[BaselineEntry | None], BaselineEntry]:
    """The same save (same record, same time stamp) planned on another `previous` entry."""

    def rebase(current: BaselineEntry | None) -> BaselineEntry:
        _, entry = plan_save(m, current, save_context)
        assert entry is not None  # the floor and the test passed when it was first planned
        return entry

    return rebase


def _comparison(ab: AbResult | None, context: JudgeContext) -> ComparisonCheck | None:
    if context.compare_ref is None or ab is None:
        return None
    ref, commit = context.compare_ref, context.compare_commit
    if ab.paired is not None:
        return check_comparison(
            ab.paired,
            ref=ref,
            ref_commit=commit,
            threshold=context.compare_threshold,
            strict=context.strict,
            forced=context.compare_forced,
            code_spread=context.compare_code_spread,
        )
    if ab.unchanged_fingerprint:
        return unchanged(
            ref=ref,
            ref_commit=commit,
            fingerprint=ab.unchanged_fingerprint,
            threshold=context.compare_threshold,
        )
    return no_base(
        ref=ref,
        ref_commit=commit,
        why=ab.no_base_why,
        detail=ab.detail,
        threshold=context.compare_threshold,
        strict=context.strict,
    )
