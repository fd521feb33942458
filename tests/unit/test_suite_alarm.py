"""The run's false-alarm budget (gate/suite.py) and confirmation before failing
(gate/confirm.py, judge's second round): the levels, the arithmetic that makes them add up,
and every way a second round can answer."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from pytest_gpuperf.baseline import BaselineStore
from pytest_gpuperf.gate.judge import AbResult, JudgeContext, Recheck, Taken, judge
from pytest_gpuperf.gate.suite import (
    MAX_ROUND_RATE,
    SuiteBudget,
    interval_confidence,
    suite_red_rate,
)
from pytest_gpuperf.record.checks import AB_INCONCLUSIVE, AB_PASS, AB_REGRESSED
from pytest_gpuperf.record.verdict import FAIL, PASS
from pytest_gpuperf.report import failure_text
from tests.unit.test_gate import paired


def test_a_test_may_cry_wolf_at_the_runs_target_over_its_size():
    budget = SuiteBudget(0.01, 100)
    assert budget.per_test == pytest.approx(1e-4)
    assert budget.ab_round_rate == pytest.approx(0.01)  # sqrt(1e-4): a 98% interval
    assert interval_confidence(budget.ab_round_rate) == pytest.approx(0.98)
    assert budget.ab_test_rate() == pytest.approx(budget.per_test)
    # a test of 3 measurements: each confirmation at a third, the test still within A / N
    assert budget.ab_confirm_rate(3) == pytest.approx(0.01 / 3)
    assert budget.ab_test_rate(3) == pytest.approx(budget.per_test)
    assert budget.stored_rate() == pytest.approx(1e-4) and budget.stored_rate(4) == 2.5e-5
    # N tests at A / N each: the union bound keeps the run at A, and the exact figure for
    # independent tests is just below it
    assert suite_red_rate([budget.ab_test_rate()] * 100) <= 0.01


def test_small_runs_are_never_judged_looser_than_a_single_round_was():
    one = SuiteBudget(0.01, 1)
    assert one.ab_round_rate == MAX_ROUND_RATE and one.ab_confirm_rate() == MAX_ROUND_RATE
    assert interval_confidence(one.ab_round_rate) == pytest.approx(0.95)
    assert one.stored_rate() == 0.01  # the 1% the stored gate always had
    assert one.ab_test_rate() <= one.per_test


@pytest.mark.parametrize("target", [0.001, 0.01, 0.05])
@pytest.mark.parametrize("checks", [1, 7, 100, 1000])
@pytest.mark.parametrize("measurements", [1, 2, 5])
def test_the_levels_always_add_up_to_the_budget(target, checks, measurements):
    budget = SuiteBudget(target, checks)
    assert budget.ab_test_rate(measurements) <= budget.per_test * (1 + 1e-12)
    assert measurements * budget.stored_rate(measurements) <= budget.per_test * (1 + 1e-12)


def test_two_independent_rounds_cry_wolf_together_at_the_product_of_their_rates():
    """A Monte-Carlo of the rule: an unchanged kernel at the threshold (the worst case),
    each round's interval from fresh noise; the test fails when both rounds' lower ends
    exceed the threshold."""
    budget = SuiteBudget(0.01, 4)  # per round 5% -> capped at 2.5%; per test 0.0625%
    rng = np.random.default_rng(7)
    z = 1.959963984540054  # the 95% intervals of 2.5% rounds
    first = rng.normal(size=400_000) - z > 0
    second = rng.normal(size=400_000) - z > 0
    assert first.mean() == pytest.approx(budget.ab_round_rate, rel=0.05)
    assert (first & second).mean() == pytest.approx(budget.ab_test_rate(), rel=0.2)


def test_bad_budgets_are_refused():
    for target in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError, match="fraction in"):
            SuiteBudget(target, 10)
    with pytest.raises(ValueError, match="at least one check"):
        SuiteBudget(0.01, 0)


# -- the second round -------------------------------------------------------------------------


def context(**overrides) -> JudgeContext:
    fields = dict(tolerance=0.01, compare_ref="main", compare_commit="c" * 40)
    fields.update(overrides)
    return JudgeContext(**fields)


def again(ratio: float | None, why: str = ""):
    """A fake fixture's second round: an A/B pair at `ratio`, or nothing and why."""
    asked: list[Recheck] = []

    def remeasure(recheck: Recheck):
        asked.append(recheck)
        if ratio is None:
            return None, why
        pair = replace(paired(ratio, 0.002), confidence=recheck.confidence)
        return Taken(pair.head, ab=AbResult(paired=pair)), ""

    return remeasure, asked


def one_ab(tmp_path, first_ratio: float, remeasure, **overrides):
    pair = paired(first_ratio, 0.002)
    taken = [Taken(pair.head, ab=AbResult(paired=pair))]
    (judged,) = judge("t::x", taken, BaselineStore(tmp_path), context(**overrides),
                      remeasure=remeasure)  # fmt: skip
    return judged


def test_a_regression_fails_only_when_the_second_round_agrees(tmp_path):
    remeasure, asked = again(1.05)
    judged = one_ab(tmp_path, 1.05, remeasure)
    check = judged.verdict.comparison
    assert judged.verdict.status == FAIL and check.state == AB_REGRESSED and check.confirmed
    assert check.first_state == AB_REGRESSED and check.confirmation.ratio == 1.05
    assert asked == [Recheck(0, paired=True, confidence=pytest.approx(0.95))]
    text = failure_text(judged.measurement, judged.verdict)
    assert "confirmed by a second round: +5.00%" in text
    assert "confirmation: measured again with freshly loaded code objects on fresh buffers" in text


@pytest.mark.parametrize(
    ("second", "final"), [(1.0, AB_PASS), (1.005, AB_INCONCLUSIVE), (0.95, AB_INCONCLUSIVE)]
)
def test_a_second_round_that_disagrees_passes_the_test_and_keeps_both_rounds(
    tmp_path, second, final
):
    remeasure, _ = again(second)
    judged = one_ab(tmp_path, 1.05, remeasure, compare_code_spread=0.0)
    check = judged.verdict.comparison
    assert judged.verdict.status == PASS and check.state == final
    assert check.first_state == AB_REGRESSED and check.ratio == 1.05
    assert check.confirmation.ratio == second and not check.confirmed


def test_a_regression_that_cannot_be_measured_again_fails_on_its_first_round(tmp_path):
    remeasure, _ = again(None, "the device can no longer be used: a fault")
    judged = one_ab(tmp_path, 1.05, remeasure)
    check = judged.verdict.comparison
    assert judged.verdict.status == FAIL and check.confirmation is None
    assert check.unconfirmed == "the device can no longer be used: a fault"
    assert "not confirmed: the device can no longer be used" in failure_text(
        judged.measurement, judged.verdict
    )


def test_only_regressions_are_measured_again_and_never_while_saving(tmp_path):
    remeasure, asked = again(1.05)
    assert one_ab(tmp_path, 1.0, remeasure).verdict.comparison.first_state == ""
    one_ab(tmp_path, 1.05, remeasure, saving=True)
    one_ab(tmp_path, 1.05, remeasure, unjudged=True)
    assert asked == []


def test_the_confirmation_level_splits_what_is_left_among_a_tests_measurements(tmp_path):
    remeasure, asked = again(1.05)
    budget = SuiteBudget(0.01, 100)
    pairs = [replace(paired(1.05, 0.002), confidence=0.98) for _ in range(2)]
    taken = [Taken(p.head, ab=AbResult(paired=p)) for p in pairs]
    judged = judge("t::x", taken, BaselineStore(tmp_path), context(suite=budget),
                   remeasure=remeasure)  # fmt: skip
    assert [r.position for r in asked] == [0, 1]
    assert asked[0].confidence == pytest.approx(1 - 2 * 0.005)  # 1% / 2 measurements
    assert all(j.verdict.comparison.confirmation.confidence == asked[0].confidence for j in judged)
    assert "98% CI" in failure_text(judged[0].measurement, judged[0].verdict)
    assert not math.isnan(budget.ab_confirm_rate(2))
