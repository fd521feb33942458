"""The run's false alarms in words and numbers: how many checks were judged, the budget they
shared (gate/suite.py), and what the confirming rounds said."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_gpuperf.gate.suite import SuiteBudget, interval_confidence
from pytest_gpuperf.record.checks import (
    AB_MODELLED,
    AB_NO_BASE,
    AB_REGRESSED,
    AB_UNCHANGED,
    REGRESSED,
)
from pytest_gpuperf.record.verdict import ACCEPTED, Row


def suite_counts(rows: Sequence[Row]) -> dict[str, int]:
    """Checks judged (timed A/B comparisons, gating stored-baseline comparisons) and what
    the confirming rounds of their regressions said ("accepted": confirmed, and excused by
    an accept rule). A modelled comparison was not timed: it is not a check judged."""
    counts = {
        "ab": 0,
        "stored": 0,
        "confirmations": 0,
        "confirmed": 0,
        "unconfirmed": 0,
        "accepted": 0,
    }
    for row in rows:
        comparison, baseline = row.verdict.comparison, row.verdict.baseline
        if row.verdict.status == ACCEPTED:
            counts["accepted"] += 1
        if comparison is not None and comparison.state == AB_MODELLED:
            continue
        if comparison is not None and comparison.state not in (AB_NO_BASE, AB_UNCHANGED):
            counts["ab"] += 1
            first = comparison.first_state
            if first and comparison.confirmation is not None:
                counts["confirmations"] += 1
                counts["confirmed" if comparison.state == AB_REGRESSED else "unconfirmed"] += 1
        elif baseline.gating and baseline.baseline is not None:
            counts["stored"] += 1
            if baseline.first_outcome and baseline.confirmation is not None:
                counts["confirmations"] += 1
                counts["confirmed" if baseline.outcome == REGRESSED else "unconfirmed"] += 1
    return counts


def suite_json(rows: Sequence[Row], budget: SuiteBudget | None) -> dict[str, Any] | None:
    """The report's "suite" object (docs/json-schema.md, schema version 3)."""
    if budget is None:
        return None
    return {
        "target": budget.target,
        "checks": budget.checks,
        "per_test_rate": budget.per_test,
        "ab_round_rate": budget.ab_round_rate,
        "ab_confirm_rate": budget.ab_confirm_rate(),
        "stored_rate": budget.stored_rate(),
        **suite_counts(rows),
    }


def suite_lines(rows: Sequence[Row], budget: SuiteBudget) -> list[str]:
    """The false-alarm budget, a line for each thing it says (shown under -v):
    'false alarms: 42 checks judged (40 A/B, 2 stored) in 40 measuring tests; budget 1.0% a
    run (--gpuperf-suite-alarm)', then how each kind of check spends it."""
    counts = suite_counts(rows)
    judged = counts["ab"] + counts["stored"]
    if not judged:
        return []
    tests = f"{budget.checks} measuring test{'s' if budget.checks != 1 else ''}"
    lines = [
        f"false alarms: {judged} check{'s' if judged != 1 else ''} judged "
        f"({counts['ab']} A/B, {counts['stored']} stored) in {tests}; budget "
        f"{budget.target:.1%} a run (--gpuperf-suite-alarm)"
    ]
    if counts["ab"]:
        round_rate = budget.ab_round_rate
        lines.append(
            f"A/B: each round judged at {round_rate:.2%} ({interval_confidence(round_rate):.1%} "
            "intervals); a regression fails only when a second round agrees"
        )
    if counts["stored"]:
        lines.append(
            f"stored baselines: each measurement judged at {budget.stored_rate():.3%} "
            "(the run's budget over its tests)"
        )
    return lines


def confirmation_lines(rows: Sequence[Row]) -> list[str]:
    """'confirmation: 1 regression measured again: 1 confirmed (failed), 0 not confirmed':
    what the second measurement of each flagged regression said."""
    counts = suite_counts(rows)
    n = counts["confirmations"]
    if not n:
        return []
    return [
        f"confirmation: {n} regression{'s' if n != 1 else ''} measured again: "
        f"{counts['confirmed']} confirmed ({_confirmed_fate(counts)}), "
        f"{counts['unconfirmed']} not confirmed (passed, reported)"
    ]


def _confirmed_fate(counts: dict[str, int]) -> str:
    """'failed', or '1 failed, 2 accepted' when accept rules excused some."""
    accepted = counts["accepted"]
    if not accepted:
        return "failed"
    failed = counts["confirmed"] - accepted
    return f"{failed} failed, {accepted} accepted" if failed > 0 else "accepted"
