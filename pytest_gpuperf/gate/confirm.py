"""Confirm before failing: the rule that turns two rounds of one check into its final word.

A check that comes out REGRESSED is measured again before its test fails (judge.py asks the
fixture for the second round: freshly loaded code objects, fresh copies of the call's
buffers), and the test fails only when the second round agrees. The first round's numbers
stay in the check, the second round's check is kept inside it (`confirmation`), and `state`
(A/B) or `outcome` (stored baseline) becomes the final word:

  second round REGRESSED              REGRESSED (confirmed: the test fails)
  A/B: PASS or INCONCLUSIVE           that state (the first round was not confirmed)
  A/B: IMPROVED                       INCONCLUSIVE (the rounds contradict each other)
  stored: WITHIN_NOISE or IMPROVED    WITHIN_NOISE (not confirmed)
  no second round (why in `unconfirmed`)   REGRESSED: a regression that could not be
                                      measured again fails on its first round, as before

gate/suite.py says what the rounds' levels are and why confirmation earns false-alarm credit
for A/B comparisons and not for stored baselines.
"""

from __future__ import annotations

from dataclasses import replace

from pytest_gpuperf.record.checks import (
    AB_INCONCLUSIVE,
    AB_PASS,
    AB_REGRESSED,
    REGRESSED,
    WITHIN_NOISE,
    BaselineCheck,
    ComparisonCheck,
)


def comparison_wants_confirmation(check: ComparisonCheck | None) -> bool:
    """A/B: a first round that would fail its test."""
    return check is not None and check.state == AB_REGRESSED and not check.first_state


def baseline_wants_confirmation(check: BaselineCheck) -> bool:
    """Stored baseline: a gating first round that would fail its test."""
    return check.gating and check.outcome == REGRESSED and not check.first_outcome


def confirm_comparison(
    first: ComparisonCheck, second: ComparisonCheck | None, unconfirmed: str = ""
) -> ComparisonCheck:
    """The A/B check after its confirming round (`second` None: it could not be measured
    again, `unconfirmed` says why)."""
    if first.state != AB_REGRESSED:
        return first
    if second is None:
        return replace(first, first_state=first.state, unconfirmed=unconfirmed or "not measured")
    final = second.state if second.state in (AB_REGRESSED, AB_PASS) else AB_INCONCLUSIVE
    return replace(first, state=final, first_state=first.state, confirmation=second)


def confirm_baseline(
    first: BaselineCheck, second: BaselineCheck | None, unconfirmed: str = ""
) -> BaselineCheck:
    """The stored-baseline check after its confirming round (see confirm_comparison)."""
    if first.outcome != REGRESSED:
        return first
    if second is None:
        return replace(
            first, first_outcome=first.outcome, unconfirmed=unconfirmed or "not measured"
        )
    final = REGRESSED if second.outcome == REGRESSED else WITHIN_NOISE
    return replace(first, outcome=final, first_outcome=first.outcome, confirmation=second)
