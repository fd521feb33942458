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
`no-baseline` passed).
"""

from __future__ import annotations

from dataclasses import replace

from pytest_gpuperf.engine.results import Measurement
from pytest_gpuperf.gate.accept import names
from pytest_gpuperf.gate.confirm import confirm_baseline
from pytest_gpuperf.gate.decide import decide
from pytest_gpuperf.gate.floor import check_floor
from pytest_gpuperf.gate.noise import stored_band
from pytest_gpuperf.gate.policy import FALSE_ALARM_RATE
from pytest_gpuperf.gate.roofline import check_flops_floor, check_roofline_floor
from pytest_gpuperf.record.checks import IMPROVED, REGRESSED, WITHIN_NOISE, BaselineCheck
from pytest_gpuperf.record.verdict import UNJUDGED, Row


def recheck(row: Row) -> tuple[Row, str]:
    """`row` with its verdict decided again from its numbers, and why it differs from what
    the report said ("" when it does not)."""
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
    baseline = _baseline(m, said.baseline)
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
    if verdict.status == said.status:
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
    if said.acceptance is not None and acceptance is None:
        why.append(
            f"its accept rule {said.acceptance.pattern!r} does not name {row.test_id!r}: "
            "nothing accepts it"
        )
    return replace(row, verdict=verdict), (
        f"{row.test_id} [{m.name}, {m.cache}]: the report says {said.status}, its numbers say "
        f"{verdict.status}" + (f" ({'; '.join(why)})" if why else "")
    )


def _baseline(m: Measurement, check: BaselineCheck) -> BaselineCheck:
    """The stored-baseline check with its outcome decided again (gate/stored.py's rule for the
    first round, gate/confirm.py's for the two rounds), where it has the numbers to."""
    reference = check.baseline
    if reference is None:
        return check  # no numbers to decide from: no-baseline or another device's
    # a check that kept the entry it compared with was compared, whatever its outcome says:
    # the gate writes no entry beside no-baseline or other-device (gate/stored.py)
    band, noise, allowance = check.band, check.noise, check.allowance
    if band is None or noise is None or allowance is None:
        # what the file left out, from the entry's numbers as the gate sets it (a check the
        # gate wrote has all three; the renderers rely on them)
        band = band or stored_band(
            reference,
            m.relative_ci,
            false_alarm_rate=check.false_alarm_rate or FALSE_ALARM_RATE,
        )
        noise = band.noise if noise is None else noise
        allowance = max(check.tolerance, noise) if allowance is None else allowance
    delta = m.efficiency / reference.efficiency - 1.0
    first = replace(
        check,
        outcome=_outcome(delta, allowance),
        allowance=allowance,
        noise=noise,
        band=band,
        delta=delta,
        first_outcome="",
        confirmation=None,
    )
    second = check.confirmation
    if second is not None and second.delta is not None and second.allowance is not None:
        second = replace(second, outcome=_outcome(second.delta, second.allowance))
    return confirm_baseline(first, second, check.unconfirmed)


def _outcome(delta: float, allowance: float) -> str:
    if delta < -allowance:
        return REGRESSED
    return IMPROVED if delta > allowance else WITHIN_NOISE
