"""How often did each A/B point end regressed, improved, inconclusive or pass, and does it
meet its target?"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from lab.tables import finite_median

from .points import AA, AA_OTHER, POINTS
from .records import ProcessRecord, Trial


def ab_row(label: str, kind: str, trials: Sequence[Trial], target: str = "") -> dict[str, Any]:
    """Rates of each A/B state among the valid trials of one point."""
    valid = [t for t in trials if t.valid]
    count = Counter(t.state for t in valid)
    n = len(valid)

    def rate(state: str) -> float:
        return count[state] / n if n else math.nan

    return {
        "point": label, "kind": kind, "trials": n, "invalid": len(trials) - n,
        **{state: rate(state) for state in ("regressed", "improved", "inconclusive", "pass")},
        "median_ratio": finite_median(t.ratio for t in valid),
        "median_ci_half": finite_median((t.ratio_ci[1] - t.ratio_ci[0]) / 2 for t in valid),
        "median_pairs": finite_median(t.pairs for t in valid),
        "median_time_us": finite_median(t.time_s * 1e6 for t in valid),
        "median_drift": finite_median(t.drift for t in valid),
        "drift_measured": sum(t.drift_basis == "measured" for t in valid) / n if n else math.nan,
        "median_of_medians": finite_median(t.median_ratio for t in valid),
        "target": target, "met": meets(target, n, rate("regressed"), rate("inconclusive")),
    }  # fmt: skip


def meets(target: str, trials: int, regressed: float, inconclusive: float = 0.0) -> str:
    """Whether a row meets its point's target ("" when it has none): "<= 1% regressed ..."
    (false alarms) or ">= 95% regressed ..." (detection, any percentage), optionally "...
    and <= 10% inconclusive", over at least 40 trials per point (100 where the target says
    "over >= 100")."""
    if not target:
        return ""
    wanted = 100 if "over >= 100" in target else 40
    if trials < wanted:
        return f"too few trials (< {wanted})"
    rate = float(target.split("%")[0].split()[-1]) / 100
    ok = regressed <= rate if target.startswith("<=") else regressed >= rate
    if "inconclusive" in target:
        limit = float(target.split("and <=")[1].split("%")[0]) / 100
        ok = ok and inconclusive <= limit
    return "yes" if ok else "NO"


# The gate's targets per point (false alarms of both controls at every size besides).
AB_TARGETS = {
    "short_same": "<= 1% regressed and <= 10% inconclusive",
    "short_equiv": "<= 1% regressed and <= 10% inconclusive",
    "long_slow1": ">= 95% regressed (kernel >= 20 us)",
    "mid_slow1": ">= 95% regressed (kernel >= 20 us)",
    "short_slow1": ">= 80% regressed (7-8 us cold)",
    "short_slow2": ">= 95% regressed (7-8 us cold)",
}


def score_ab(records: Sequence[ProcessRecord]) -> list[dict[str, Any]]:
    """One row per point, plus the A/A rows together (the target wants >= 100 A/A comparisons)."""

    def of(name: str) -> list[Trial]:
        return [r.trials[name] for r in records if name in r.trials]

    rows = []
    same = [t for point in POINTS if point.kind == AA for t in of(point.name)]
    rows.append(ab_row("A/A, every size", AA, same, "<= 1% regressed over >= 100"))
    for point in POINTS:
        if not of(point.name):
            continue
        default = "<= 1% regressed" if point.kind in (AA, AA_OTHER) else ""
        target = AB_TARGETS.get(point.name, default)
        rows.append(ab_row(point.label, point.kind, of(point.name), target))
    return rows
