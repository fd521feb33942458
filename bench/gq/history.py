"""What would a stored baseline built from K saves have decided? Histories judged by the
gate's own saving and checking code (plan_save, check_baseline)."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import Any

from lab.tables import finite_median

from .records import ProcessRecord

HISTORY_SAVES = (1, 3, 5)  # 1: a single save with the prior spread (the old way)
HISTORY_PATH = "gate-quality (in memory)"
TEST_ID = "test_gate_quality.py::test_kernel"


def history_check(
    saves: Sequence[Any],
    judged: Any,
    tolerance: float,
    simulated_spread: float | None = None,
) -> dict[str, Any]:
    """Judge `judged` against the entry --gpuperf-save would have built from `saves` (oldest
    first), with the gate's own functions: plan_save (-> entry_from_history) and
    check_baseline."""
    from pytest_gpuperf.gate.policy import prior_run_spread
    from pytest_gpuperf.gate.saving import SaveContext, plan_save
    from pytest_gpuperf.gate.stored import check_baseline

    entry, restarted = None, 0
    for measurement in saves:
        m = measurement
        prior = prior_run_spread(m.backend, m.time_s, m.cache, simulated_spread)
        context = SaveContext(test_id=TEST_ID, path=HISTORY_PATH, device_key=m.device_key,
                              prior_spread=prior, history_length=len(saves))  # fmt: skip
        action, saved = plan_save(measurement, entry, context)
        if saved is None:
            continue
        restarted += bool(action.new_history)
        entry = saved
    if entry is None:
        raise ValueError("no save of the history was saved (floor or unjudged)")
    reference = entry.to_ref(HISTORY_PATH, judged.device_key)
    check = check_baseline(judged, reference, tolerance=tolerance)
    return {
        "outcome": check.outcome, "delta": check.delta, "allowance": check.allowance,
        "noise": check.noise, "saves": reference.saves, "spread_basis": reference.spread_basis,
        "run_spread": reference.run_spread, "restarted": restarted,
    }  # fmt: skip


def tolerances() -> tuple[float, ...]:
    from pytest_gpuperf.gate.policy import DEFAULT_TOLERANCE

    return (DEFAULT_TOLERANCE, 0.0)


def history_row(
    saves: int, tolerance: float, checks: Mapping[str, Sequence[Mapping[str, Any]]]
) -> dict[str, Any]:
    """False alarms (checks["unchanged"]) and detections (other keys) for one setting."""

    def rate(items: Sequence[Mapping[str, Any]], outcome: str = "regressed") -> float:
        return sum(c["outcome"] == outcome for c in items) / len(items) if items else math.nan

    unchanged = checks["unchanged"]
    row = {
        "saves": saves, "basis": unchanged[0]["spread_basis"] if unchanged else "",
        "tolerance": tolerance, "trials": len(unchanged), "false_alarm": rate(unchanged),
        "improved": rate(unchanged, "improved"),
        "median_allowance": finite_median(c["allowance"] for c in unchanged),
        "median_spread": finite_median(c["run_spread"] for c in unchanged),
        "restarted": sum(c["restarted"] for c in unchanged),
    }  # fmt: skip
    for key, items in checks.items():
        if key != "unchanged":
            row[f"detect_{key}"] = rate(items)
    return row


def score_history(
    records: Sequence[ProcessRecord], trials: int, seed: int, simulated_spread: float | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """(rows, every trial, why skipped or ""): histories of long_same's head measurements
    from other processes, judged on one process's long_same (unchanged) and long_slow3."""
    points = ("long_same", "long_slow3")
    usable = [r for r in records if all(p in r.trials and r.trials[p].valid for p in points)]
    most = max(HISTORY_SAVES)
    if len(usable) < most + 1:
        return [], [], f"needs {most + 1} processes with valid long_same and long_slow3"
    rng = random.Random(seed)
    checks: dict[tuple[int, float], dict[str, list]] = {}
    kept = []
    for trial in range(trials):
        judged = usable[trial % len(usable)]
        others = sorted(
            rng.sample([r for r in usable if r is not judged], most), key=lambda r: r.index
        )
        for saves in HISTORY_SAVES:
            history_of = others[-saves:]
            history = [r.trials["long_same"].measurement for r in history_of]
            for tolerance in tolerances():
                slot = checks.setdefault((saves, tolerance), {"unchanged": [], "+3%": []})
                for key, name in (("unchanged", "long_same"), ("+3%", "long_slow3")):
                    check = history_check(
                        history, judged.trials[name].measurement, tolerance, simulated_spread
                    )
                    slot[key].append(check)
                    kept.append({"judged": judged.index, "history": [r.index for r in history_of],
                                 "saves": saves, "tolerance": tolerance, "judged_kernel": name,
                                 **check})  # fmt: skip
    rows = [history_row(s, t, items) for (s, t), items in sorted(checks.items())]
    return rows, kept, ""
