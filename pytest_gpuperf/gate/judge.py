"""Judging one test: gather each measurement's inputs (its floor, stored baseline, A/B result,
previous save) and decide, once, through the checks of this package.

The pytest layer hands over what the fixture took (`Taken`) and the run's context
(`JudgeContext`); it gets back verdicts and the baseline entries to write. Writing them is the
session's job; deciding what to write is this module's.

A check whose first round says REGRESSED is confirmed before it fails its test: judge asks
`remeasure` (the fixture, which knows how to launch the test's kernel again) for a second
round described by a `Recheck`, judges that round with the same rule and lets
gate/confirm.py combine the two. The levels of both rounds come from the run's false-alarm
budget (gate/suite.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypedDict

from pytest_gpuperf.baseline import BaselineEntry, BaselineStore
from pytest_gpuperf.baseline.model import utc_now
from pytest_gpuperf.baseline.ref import BaselineRef
from pytest_gpuperf.engine.results import Measurement, PairedComparison
from pytest_gpuperf.gate.ab import check_comparison, modelled, no_base, unchanged
from pytest_gpuperf.gate.accept import rule_for
from pytest_gpuperf.gate.confirm import (
    baseline_wants_confirmation,
    comparison_wants_confirmation,
    confirm_baseline,
    confirm_comparison,
)
from pytest_gpuperf.gate.decide import decide
from pytest_gpuperf.gate.floor import check_floor
from pytest_gpuperf.gate.peak import check_peak
from pytest_gpuperf.gate.policy import DEFAULT_COMPARE_THRESHOLD, HISTORY_LENGTH
from pytest_gpuperf.gate.roofline import WorkFloors, check_work_floors, failed_floor
from pytest_gpuperf.gate.saving import SaveContext, plan_save
from pytest_gpuperf.gate.stored import check_baseline
from pytest_gpuperf.gate.suite import SuiteBudget, interval_confidence
from pytest_gpuperf.record.checks import (
    AB_NO_BASE,
    BaselineCheck,
    ComparedFile,
    ComparisonCheck,
)
from pytest_gpuperf.record.verdict import Acceptance, Verdict

SIMULATED_SUFFIX = "-sim"


@dataclass(frozen=True)
class AbResult:
    """What the A/B step produced for one measurement, before judging: a timed pair, or
    identical code (`unchanged_fingerprint`), or no base (`no_base_why`, `detail`)."""

    paired: PairedComparison | None = None
    unchanged_fingerprint: str = ""
    no_base_why: str = ""
    detail: str = ""
    # different code, one model (the simulated device): not timed; the model's efficiency
    # and where it came from, and both fingerprints
    modelled_by: str = ""
    modelled_efficiency: float = 0.0
    head_fingerprint: str = ""
    base_fingerprint: str = ""
    # a callable's base: the files of the test's Python that differ at REF, every file
    # compared, and why that set may lack a file the test ran ("": it is complete)
    changed_files: tuple[str, ...] = ()
    compared_files: tuple[ComparedFile, ...] = ()
    incomplete: str = ""


@dataclass(frozen=True)
class Taken:
    """One gpu_bench measurement as the fixture took it, with its floor (None: no floor)."""

    measurement: Measurement
    floor: float | None = None
    floor_origin: str = "min_bw"
    ab: AbResult | None = None
    cache_bytes: int = 0  # the device's caches: a hot floor on a working set they hold warns
    device_peak_bps: float = 0.0  # the device's own peak (a test's peak_gbps may differ)
    work_floors: WorkFloors = field(default_factory=WorkFloors)  # min_flops, min_roofline


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
    host: str = ""  # the machine's name, recorded with each save beside its board
    sim_board_spread: float = 0.0  # the simulated device's spread between GPUs (+-95%)
    unjudged: bool = False
    suite: SuiteBudget = field(default_factory=SuiteBudget)  # the run's false-alarm budget
    accept: tuple[Acceptance, ...] = ()  # intended slowdowns (gate/accept.py)


@dataclass(frozen=True)
class Recheck:
    """A second round the gate asks for: measurement `position` of the test measured again,
    as an A/B pair (`paired`) or alone, its interval at `confidence`."""

    position: int
    paired: bool
    confidence: float = 0.95


# The fixture's side of a confirmation: the second round as a Taken, or None and why not.
Remeasure = Callable[[Recheck], tuple["Taken | None", str]]


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
    remeasure: Remeasure | None = None,
) -> list[Judged]:
    """The verdict of every measurement of one test. `prior_spread_for` maps a position in
    `taken` to the prior spread a first save records for it (default: context's);
    `remeasure` measures a regressed check again (None: nothing is confirmed)."""
    judged = []
    for position, item in enumerate(taken):
        prior = (prior_spread_for or {}).get(position, context.prior_spread)
        confirm = _Confirmer(position, len(taken), context, remeasure)
        judged.append(_judge_one(test_id, item, store, context, prior, confirm))
    return judged


@dataclass(frozen=True)
class _Confirmer:
    """Confirms one measurement's regressed first round (while neither saving nor unjudged)."""

    position: int
    measurements: int
    context: JudgeContext
    remeasure: Remeasure | None

    @property
    def active(self) -> bool:
        return self.remeasure is not None and not (self.context.saving or self.context.unjudged)

    def comparison(self, first: ComparisonCheck | None) -> ComparisonCheck | None:
        if first is None or not (self.active and comparison_wants_confirmation(first)):
            return first
        level = self.context.suite.ab_confirm_rate(self.measurements)
        retaken, why = self._again(paired=True, confidence=interval_confidence(level))
        second = None
        if retaken is not None and retaken.ab is not None and retaken.ab.paired is not None:
            second = _comparison(retaken.ab, self.context)
        return confirm_comparison(first, second, why)

    def baseline(
        self, first: BaselineCheck, again: Callable[[Measurement], BaselineCheck]
    ) -> BaselineCheck:
        if not (self.active and baseline_wants_confirmation(first)):
            return first
        retaken, why = self._again(paired=False, confidence=0.95)
        second = again(retaken.measurement) if retaken is not None else None
        return confirm_baseline(first, second, why)

    def _again(self, *, paired: bool, confidence: float) -> tuple[Taken | None, str]:
        assert self.remeasure is not None
        return self.remeasure(Recheck(self.position, paired, confidence))


def _judge_one(
    test_id: str,
    item: Taken,
    store: BaselineStore,
    context: JudgeContext,
    prior: float,
    confirm: _Confirmer,
) -> Judged:
    m = item.measurement
    own_key, info_key = baseline_keys(m)
    board = m.gpu.uuid or "" if m.gpu is not None else ""
    reference = store.lookup(own_key, test_id, m.name, m.cache, board=board)
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
    comparison = confirm.comparison(_comparison(item.ab, context))

    stored_rate = context.suite.stored_rate(confirm.measurements)

    def stored(measurement: Measurement) -> BaselineCheck:
        check = check_baseline(
            measurement,
            reference,
            tolerance=context.tolerance,
            strict=context.strict,
            # An A/B that ran gates instead of the stored baseline; one with no base (a
            # callable whose base cannot be loaded, a kernel new in head, a base that does not
            # build) leaves the stored baseline to gate, as in a run without compare, and so
            # does a callable's whose files rest on a recording that could not see everything.
            gating=comparison is None
            or comparison.state == AB_NO_BASE
            or bool(comparison.incomplete),
            elsewhere=elsewhere,
            info=info,
            device_key=own_key,
            false_alarm_rate=stored_rate,
            simulated_board_spread=context.sim_board_spread,
        )
        return replace(check, false_alarm_rate=stored_rate)

    baseline = confirm.baseline(stored(m), stored)
    beyond_peak = check_peak(m, item.cache_bytes, item.device_peak_bps)
    floor = None
    if item.floor is not None:
        floor = check_floor(m, item.floor, origin=item.floor_origin, cache_bytes=item.cache_bytes)
    flops_floor, roofline_floor = check_work_floors(m, item.work_floors)
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
            board=board,
            host=context.host,
        )
        save, entry = plan_save(
            m,
            previous,
            save_context,
            floor=failed_floor(floor, flops_floor, roofline_floor),
            unjudged=context.unjudged,
            beyond_peak=beyond_peak is not None,
        )
        if entry is not None:
            rebase = _rebaser(m, save_context)
    verdict = decide(
        baseline=baseline,
        floor=floor,
        comparison=comparison,
        save=save,
        unjudged=context.unjudged,
        update_command=context.update_command,
        acceptance=rule_for(context.accept, test_id),
        beyond_peak=beyond_peak,
        flops_floor=flops_floor,
        roofline_floor=roofline_floor,
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


class _Asked(TypedDict):
    """What every comparison check records of the run's --gpuperf-compare: the ref, the
    commit it resolved to and the user's threshold."""

    ref: str
    ref_commit: str
    threshold: float


def _comparison(ab: AbResult | None, context: JudgeContext) -> ComparisonCheck | None:
    if context.compare_ref is None or ab is None:
        return None
    asked = _Asked(
        ref=context.compare_ref,
        ref_commit=context.compare_commit,
        threshold=context.compare_threshold,
    )
    check = _check_of(ab, context, asked)
    if not ab.compared_files and not ab.incomplete:
        return check
    # a callable's: the files compared with REF, and whether they are all it ran
    return replace(check, compared_files=ab.compared_files, incomplete=ab.incomplete)


def _check_of(ab: AbResult, context: JudgeContext, asked: _Asked) -> ComparisonCheck:
    """The check an A/B result makes: a timed pair, modelled, the same code or no base."""
    if ab.paired is not None:
        check = check_comparison(
            ab.paired,
            **asked,
            strict=context.strict,
            forced=context.compare_forced,
            code_spread=context.compare_code_spread,
        )
        if not ab.changed_files and not ab.head_fingerprint:
            return check
        return replace(  # a callable's pair: its code's fingerprints (gate/pairing.py)
            check,
            changed_files=ab.changed_files,
            head_fingerprint=ab.head_fingerprint,
            base_fingerprint=ab.base_fingerprint,
        )
    if ab.modelled_by:
        return modelled(
            **asked,
            head_fingerprint=ab.head_fingerprint,
            base_fingerprint=ab.base_fingerprint,
            efficiency=ab.modelled_efficiency,
            basis=ab.modelled_by,
            strict=context.strict,
        )
    if ab.unchanged_fingerprint:
        return unchanged(**asked, fingerprint=ab.unchanged_fingerprint)
    return no_base(**asked, why=ab.no_base_why, detail=ab.detail, strict=context.strict)
