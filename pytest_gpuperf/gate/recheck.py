"""A shard's verdicts decided again from its numbers, not read (for the shard merge,
merge/shards.py).

A shard's report says what its gate decided, and a file can say anything: an efficiency of 5%
under a 30% floor with status `pass` merged as PASSED. The merge therefore takes from each
result only what the run measured and what it was judged against (the measurement, the floors
(min_bw and the roofline's), the stored baseline's efficiency and allowance, the A/B
comparison's state, the accept rule) and decides the checks the numbers decide once more,
with the gate's own functions: the floors (gate/floor.py, gate/roofline.py), the stored
baseline's first round (delta against the allowance, as gate/stored.py) and its
confirmation (gate/confirm.py), then the status (gate/decide.py).
Where the report's status differs, the recomputed one stands and the merge fails naming the
file and the measurement. The A/B comparison's state comes from pairs the report does not keep
in full; it is read, from the known states only (record/report_checks.py).

Nothing the report says about itself is believed where its numbers say otherwise: an accept
rule counts only where its pattern names the test (gate/accept.py `names`: a forged
acceptance of `no-such-test` accepted a regression), and a stored check that kept the entry
it compared with is decided again whatever its outcome says (a regression edited to
`no-baseline` passed). Nor are the levels it was judged at: a confirmed regression merged as
PASSED with `gating = false`, with `allowance` or `noise` 0.5, or with `tolerance` 0.9 (a value
the options refuse). So whether the check gates follows from the row's own A/B (as
gate/judge.py decides it), the noise and the allowance are the gate's band for the entry at
the run's false-alarm level (`RunLevels`: the suite's target over its measuring tests), the
tolerance must lie in the range the options accept, and, given the baseline folder
(`python -m pytest_gpuperf.merge --baseline-dir`), the entry is the file's, not the shard's copy.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from statistics import NormalDist

from pytest_gpuperf.baseline.store import BaselineStore
from pytest_gpuperf.engine.results import Measurement
from pytest_gpuperf.gate.accept import names
from pytest_gpuperf.gate.confirm import confirm_baseline
from pytest_gpuperf.gate.decide import decide
from pytest_gpuperf.gate.floor import check_floor
from pytest_gpuperf.gate.judge import baseline_keys
from pytest_gpuperf.gate.policy import DEFAULT_TOLERANCE
from pytest_gpuperf.gate.roofline import check_flops_floor, check_roofline_floor
from pytest_gpuperf.gate.stored import stored_judgement
from pytest_gpuperf.gate.suite import SuiteBudget
from pytest_gpuperf.record.checks import (
    AB_NO_BASE,
    IMPROVED,
    NO_BASELINE,
    REGRESSED,
    WITHIN_NOISE,
    BaselineCheck,
    ComparisonCheck,
)
from pytest_gpuperf.record.verdict import UNJUDGED, Row


@dataclass(frozen=True)
class RunLevels:
    """What the merge judges the stored checks at, never read from a check: the run's
    false-alarm budget (its target shared by the suite's measuring tests, as gate/suite.py
    splits it); the tolerances the options accept (config/ranges.py's, which the merge
    command passes down: a layer below the options cannot read them); and, when the merge was
    given the baseline folder, its entries (None: each check's own copy of the entry it
    compared with)."""

    suite: SuiteBudget = field(default_factory=SuiteBudget)
    tolerances: tuple[float, float] = (0.0, 1.0)
    entries: BaselineStore | None = None


# A confirming round's interval is at 95% (gate/judge.py): its band keeps it as a sigma
_Z_95 = NormalDist().inv_cdf(0.975)


def recheck(row: Row, levels: RunLevels | None = None, measurements: int = 1) -> tuple[Row, str]:
    """`row` with its verdict decided again from its numbers, and why it differs from what
    the report said ("" when it does not). `measurements` is how many its test has (they
    share the test's false-alarm rate)."""
    m, said = row.measurement, row.verdict
    acceptance = said.acceptance
    if acceptance is not None and not names(acceptance, row.test_id):
        acceptance = None  # a rule that names another test (or none) accepts nothing here
    floor = said.floor
    if floor is not None:
        floor = replace(check_floor(m, floor.floor, origin=floor.origin), hot_floor=floor.hot_floor)
    flops_floor, roofline_floor = said.flops_floor, said.roofline_floor
    if m.work is None:  # a roofline floor without the work it floors: none decided
        flops_floor = roofline_floor = None
    if flops_floor is not None:
        flops_floor = check_flops_floor(m, flops_floor.floor, flops_floor.origin)
    if roofline_floor is not None:
        roofline_floor = check_roofline_floor(m, roofline_floor.floor, roofline_floor.origin)
    baseline, levels_why = _baseline(
        row.test_id, m, said.baseline, said.comparison, levels or RunLevels(), measurements
    )
    verdict = decide(
        baseline=baseline,
        floor=floor,
        comparison=said.comparison,
        save=said.save,
        # the test's own failure is what leaves a measurement unjudged
        unjudged=said.status == UNJUDGED and row.test_outcome != "passed",
        notes=said.notes,
        update_command=said.update_command,
        acceptance=acceptance,
        beyond_peak=said.beyond_peak,
        flops_floor=flops_floor,
        roofline_floor=roofline_floor,
    )
    if verdict.status == said.status and not levels_why:
        if said.baseline.baseline is not None and said.baseline.noise is None:
            return replace(row, verdict=replace(said, baseline=baseline)), ""  # filled in
        return row, ""  # the report's own checks, as its run worded them
    why = []
    if floor is not None and said.floor is not None and floor.status != said.floor.status:
        why.append(
            f"efficiency {m.efficiency:.2%} against the floor {floor.floor:.2%} is "
            f"{floor.status}, not {said.floor.status}"
        )
    for mine, theirs in ((flops_floor, said.flops_floor), (roofline_floor, said.roofline_floor)):
        if mine is not None and theirs is not None and mine.status != theirs.status:
            why.append(
                f"{mine.origin} {mine.efficiency:.2%} against the floor {mine.floor:.2%} is "
                f"{mine.status}, not {theirs.status}"
            )
    if baseline.outcome != said.baseline.outcome:
        why.append(
            f"against the stored baseline it is {baseline.outcome}, not {said.baseline.outcome}"
        )
    if baseline.gating != said.baseline.gating:
        why.append(
            "its stored check gates (no A/B with a base ran), not 'gating: false'"
            if baseline.gating
            else "an A/B gates it, not its stored check"
        )
    why += levels_why
    if said.acceptance is not None and acceptance is None:
        why.append(
            f"its accept rule {said.acceptance.pattern!r} does not name {row.test_id!r}: "
            "nothing accepts it"
        )
    words = f" ({'; '.join(why)})" if why else ""
    if verdict.status == said.status:  # the levels were forged; the status holds all the same
        return replace(row, verdict=verdict), (
            f"{row.test_id} [{m.name}, {m.cache}]: the report's stored check does not hold "
            f"as written{words}"
        )
    return replace(row, verdict=verdict), (
        f"{row.test_id} [{m.name}, {m.cache}]: the report says {said.status}, its numbers say "
        f"{verdict.status}{words}"
    )


def _baseline(
    test_id: str,
    m: Measurement,
    check: BaselineCheck,
    comparison: ComparisonCheck | None,
    levels: RunLevels,
    measurements: int,
) -> tuple[BaselineCheck, list[str]]:
    """The stored-baseline check decided again (gate/stored.py's rule for the first round,
    gate/confirm.py's for the two rounds) at the run's levels, where it has the numbers to;
    and what the report said that does not hold (its entry, its tolerance)."""
    why: list[str] = []
    # An A/B that ran gates instead of the stored baseline; one with no base leaves the
    # stored baseline to gate (gate/judge.py): never what the check says of itself
    gating = comparison is None or comparison.state == AB_NO_BASE
    reference = check.baseline
    if levels.entries is not None:
        key = baseline_keys(m)[0]
        board = (m.gpu.uuid or "") if m.gpu is not None else ""
        filed = levels.entries.lookup(key, test_id, m.name, m.cache, board=board)
        if filed is None and reference is not None:
            why.append(
                f"it compared with an entry that {levels.entries.path_for(key)} does not hold"
            )
        reference = filed
    if reference is None:
        return replace(check, gating=gating, baseline=None, outcome=_no_entry(check)), why
    tolerance = check.tolerance
    low, high = levels.tolerances
    if not low <= tolerance <= high:
        why.append(
            f"its tolerance {tolerance:g} is outside [{low:g}, {high:g}], which the options "
            f"refuse: judged at {DEFAULT_TOLERANCE:g}"
        )
        tolerance = DEFAULT_TOLERANCE
    rate = levels.suite.stored_rate(measurements)
    spread = _sim_board_spread(m)

    def judged(efficiency: float, measured_rel_ci: float, said: BaselineCheck) -> BaselineCheck:
        judgement = stored_judgement(
            m,
            reference,
            efficiency,
            measured_rel_ci,
            tolerance=tolerance,
            false_alarm_rate=rate,
            simulated_board_spread=spread,
        )
        return replace(said, tolerance=tolerance, gating=gating, false_alarm_rate=rate, **judgement)

    first = replace(judged(m.efficiency, m.relative_ci, check), first_outcome="", confirmation=None)
    second = check.confirmation
    if second is not None and second.delta is not None and check.baseline is not None:
        # the second round's own numbers: its efficiency (against the entry it was compared
        # with) and its interval, which its band keeps where it exceeded the spread
        efficiency = (1.0 + second.delta) * check.baseline.efficiency
        measured = second.band.measured_sigma if second.band is not None else 0.0
        second = judged(efficiency, measured * _Z_95, second)
    elif second is not None:
        second = None  # a second round without numbers confirms nothing
    if not gating:
        return first, why  # shown, never confirmed
    return confirm_baseline(first, second, check.unconfirmed or "not measured"), why


def _no_entry(check: BaselineCheck) -> str:
    """A check left with no entry to compare with: no-baseline (other-device stays)."""
    return (
        check.outcome if check.outcome not in (REGRESSED, IMPROVED, WITHIN_NOISE) else NO_BASELINE
    )


def _sim_board_spread(m: Measurement) -> float:
    """The simulated device's spread between its GPUs, which the judge adds on a board the
    saves were not made on (its setting, known exactly; 0 for a real device)."""
    if not m.simulated:
        return 0.0
    from pytest_gpuperf.simulate.device_model import DEFAULT_GPU_SPREAD

    return DEFAULT_GPU_SPREAD
