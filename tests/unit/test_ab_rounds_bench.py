"""bench/ab_rounds.py: its scoring (coverage of the second round by the first round's
interval, agreement within the combined error, false alarms and detections after
confirmation) and a tiny run of the whole script on the simulated device (the GPU's path)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench_scripts import load_script

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "ab_rounds.py"


def _load():
    return load_script("ab_rounds")


def _round(ratio: float, half: float, se: float, state: str) -> dict:
    return {
        "ratio": ratio,
        "ratio_ci": [ratio - half, ratio + half],
        "log_ratio": math.log(ratio),
        "se": se,
        "df": 7.0,
        "pairs": 100,
        "drift": 0.0,
        "state": state,
        "time_s": 9e-6,
        "wall_s": 0.1,
    }


def _row(kind: str, sets: int, first: dict, second: dict, final: str) -> dict:
    return {
        "kind": kind,
        "permille": 0 if kind == "same" else 20,
        "buffer_sets": sets,
        "first": first,
        "second": second,
        "first_regressed": first["state"] == "regressed",
        "final_state": final,
    }


def test_scoring_counts_coverage_agreement_and_confirmed_regressions():
    bench = _load()
    p, r = "pass", "regressed"
    rows = [
        # the second estimate inside the first interval, and within the combined error
        _row("same", 1, _round(1.000, 0.004, 0.002, p), _round(1.002, 0.004, 0.002, p), p),
        # outside the first interval (1.006 > 1.004) but within t(7) x sqrt(2) x 0.2% = 0.67%
        _row("same", 1, _round(1.000, 0.004, 0.002, p), _round(1.006, 0.004, 0.002, p), p),
        # a false first round, not confirmed; the rounds disagree
        _row("same", 1, _round(1.012, 0.004, 0.002, r), _round(1.000, 0.004, 0.002, p), p),
        _row("slow1", 8, _round(1.02, 0.01, 0.004, r), _round(1.018, 0.01, 0.004, r), r),
    ]
    table = {(r["kind"], r["buffer_sets"]): r for r in bench.score(rows)}
    same = table[("same", 1)]
    assert same["comparisons"] == 3
    assert same["covers"] == pytest.approx(1 / 3)
    assert same["agree"] == pytest.approx(2 / 3)
    assert same["first_regressed"] == pytest.approx(1 / 3) and same["confirmed_regressed"] == 0
    slow = table[("slow1", 8)]
    assert slow["covers"] == 1 and slow["confirmed_regressed"] == 1
    assert "20‰ of elements read more" in slow["label"]
    meta = {"device": "d", "processes": 1, "date": "today", "simulated": True,
            "permille": {"slow1": 20, "slow2": 40}, "calibration_ratio": math.nan,
            "budget_s": 0.2, "loads": 8, "threshold": 0.005}  # fmt: skip
    text = bench.render(bench.score(rows), meta)
    assert "(SIMULATED)" in text and "| A/A (identical code) | 1 | 3 | 33% | 67% |" in text


@pytest.mark.slow
def test_a_tiny_run_on_the_simulated_device(tmp_path):
    out = tmp_path / "rounds.json"
    env = {**os.environ, "PYTHONPATH": str(REPO), "GPUPERF_SIM_BUFFER_CODE_SPREAD": "0.02"}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--backend", "sim", "--processes", "1",
         "--permille", "20,40", "--budget", "0.005", "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=REPO, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "(SIMULATED)" in done.stdout
    document = json.loads(out.read_text())
    assert len(document["rows"]) == 6 and document["meta"]["simulated"] is True
    sets = {(r["kind"], r["buffer_sets"], r["buffer_sets_used"]) for r in document["rows"]}
    assert sets == {(k, s, s) for k in ("same", "slow1", "slow2") for s in (1, 8)}
