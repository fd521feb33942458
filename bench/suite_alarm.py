"""Suite-level false alarms and detection: what the run's budget and confirmation give a pull
request of many tests (docs/measurement.md, "False alarms of a whole run").

A pull request of N measuring tests goes red when any test fails. With the gate's levels
(gate/suite.py: each A/B round at sqrt(A / N), a regression failing only when a second,
independent round agrees) an unchanged test fails at p1 x p2 and a regressed one is caught at
d1 x d2, where p and d are one round's false-alarm and detection rates at that round's level.
The script computes those per-round rates, then the suite's numbers:

  nothing changed:      1 - (1 - p1 p2)^N
  one real regression:  d1 d2 (the regressed test fails), and the run goes red at least as often

Two sources of per-round rates:

- `--sim`: trials on the SIMULATED MI300X through the library (measure_pair and the gate's own
  check_comparison and confirm_comparison): each first round on a fresh simulated device at
  the round's interval level, each regressed one confirmed on another fresh device (a fresh
  load, fresh buffers, fresh code-object drift, as the plugin's second round). Heads: A/A'
  (another code object of the same work) and +3% (a code object the simulator slows by 3%),
  at a kernel of >= 20 us.
- `--from-json gq.json` (bench/gate_quality.py's processes part, e.g. the H100 run): each
  trial's A/B interval, recorded at its own confidence, rescaled to the round's level (the
  normal quantiles' ratio), and judged again at its threshold; the two rounds are taken as
  independent (the plugin's second round loads the code again on fresh buffers).

Per-round rates measured as 0 of n are also given as their one-sided 95% upper bound
(1 - 0.05^(1/n)), and the suite figures from those bounds.

  PYTHONPATH=. python3 bench/suite_alarm.py --sim --trials 300 --out suite.json
  PYTHONPATH=. python3 bench/suite_alarm.py --from-json gq.json --out suite-h100.json
  PYTHONPATH=. python3 bench/suite_alarm.py --render suite.json   (Markdown for the docs)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _common, run from anywhere
from _common import read_run

from pytest_gpuperf.engine.measure import DEFAULT_PAIR_LOADS
from pytest_gpuperf.gate.ab import ab_state, check_comparison
from pytest_gpuperf.gate.confirm import confirm_comparison
from pytest_gpuperf.gate.policy import DEFAULT_COMPARE_THRESHOLD
from pytest_gpuperf.gate.suite import DEFAULT_SUITE_ALARM, SuiteBudget, interval_confidence
from pytest_gpuperf.record.checks import AB_REGRESSED

SUITE_TESTS = 100
KERNEL_ELEMENTS = 8 << 20  # a vector add of 96 MiB: ~25 us on the simulated MI300X
BLOCK = 256
CODE_SHARES = (0.0, 0.05, 0.15, 0.30)  # the model's per-load share of the variance
SLOWDOWN = 0.03


def upper_bound(hits: int, trials: int, confidence: float = 0.95) -> float:
    """One-sided Clopper-Pearson upper bound of a rate seen `hits` times in `trials`."""
    if trials == 0:
        return 1.0
    if hits == 0:
        return 1.0 - (1.0 - confidence) ** (1.0 / trials)
    if hits >= trials:
        return 1.0
    from scipy.stats import beta

    return float(beta.ppf(confidence, hits + 1, trials - hits))


# -- rates from a gate_quality JSON (e.g. the H100's) ------------------------------------


def rescaled_state(trial: Mapping[str, Any], confidence: float) -> str | None:
    """The A/B state of a recorded trial had its interval been taken at `confidence`."""
    from scipy.stats import norm

    ratio, ci = trial.get("ratio"), trial.get("ratio_ci")
    threshold = trial.get("threshold")
    if ratio is None or not ci or threshold is None:
        return None
    recorded = float(trial.get("confidence") or 0.95)
    scale = float(norm.ppf(0.5 + confidence / 2) / norm.ppf(0.5 + recorded / 2))
    low, high = ci
    rescaled = (ratio - (ratio - low) * scale, ratio + (high - ratio) * scale)
    return ab_state(rescaled, threshold)


def rates_from_json(document: Mapping[str, Any], budget: SuiteBudget) -> list[dict[str, Any]]:
    levels = {
        "first": interval_confidence(budget.ab_round_rate),
        "confirm": interval_confidence(budget.ab_confirm_rate()),
    }
    by_point: dict[str, list[Mapping[str, Any]]] = {}
    for process in document.get("processes", ()):
        for name, trial in (process.get("trials") or {}).items():
            by_point.setdefault(name, []).append(trial)
    rows = []
    for name, trials in sorted(by_point.items()):
        row: dict[str, Any] = {"point": name, "trials": len(trials)}
        for round_name, confidence in levels.items():
            states = [rescaled_state(t, confidence) for t in trials]
            judged = [s for s in states if s is not None]
            hits = sum(s == AB_REGRESSED for s in judged)
            row[f"{round_name}_regressed"] = hits / len(judged) if judged else None
            row[f"{round_name}_regressed_upper95"] = upper_bound(hits, len(judged))
            row["judged"] = len(judged)
        row["time_us"] = _median(t.get("time_s") for t in trials) * 1e6
        row["recorded_regressed"] = sum(t.get("state") == AB_REGRESSED for t in trials) / len(
            trials
        )
        row["first_regressed_model"] = _model_rate(trials, levels["first"])
        row["per_test_regressed"] = _product(row, "")
        row["per_test_regressed_upper95"] = _product(row, "_upper95")
        rows.append(row)
    return rows


def _model_rate(trials: Sequence[Mapping[str, Any]], confidence: float) -> float | None:
    """One round's false-alarm rate for unchanged work (true ratio 1) had each trial's
    interval the coverage it claims: mean over trials of P(ratio - z s > 1 + t) with s the
    trial's own standard error. For information: ties and drift break the claim (the
    measured rates are what counts)."""
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + confidence / 2))
    rates = []
    for trial in trials:
        ci, threshold = trial.get("ratio_ci"), trial.get("threshold")
        if not ci or threshold is None:
            continue
        recorded = float(trial.get("confidence") or 0.95)
        sigma = (ci[1] - ci[0]) / 2 / float(norm.ppf(0.5 + recorded / 2))
        if sigma > 0:
            rates.append(float(norm.sf(threshold / sigma + z)))
    return sum(rates) / len(rates) if rates else None


def _product(row: Mapping[str, Any], suffix: str) -> float | None:
    first, second = row.get(f"first_regressed{suffix}"), row.get(f"confirm_regressed{suffix}")
    return None if first is None or second is None else first * second


def _median(values: Iterable[Any]) -> float:
    numbers = sorted(float(v) for v in values if v is not None)
    if not numbers:
        return math.nan
    middle = len(numbers) // 2
    return numbers[middle] if len(numbers) % 2 else (numbers[middle - 1] + numbers[middle]) / 2


# -- rates on the simulated device ---------------------------------------------------------


def _variant(directory: Path, name: str, salt: int) -> Path:
    """The shipped vector add with a define that changes the code object, not the work."""
    source = (Path(__file__).resolve().parents[1] / "kernels" / "vector_add.hip").read_text()
    path = directory / f"{name}.hip"
    path.write_text(f"#define GPUPERF_SALT {salt}\n{source}")
    return path


def sim_round(job: Mapping[str, Any], seed: int, confidence: float) -> Any:
    from pytest_gpuperf import open_device
    from pytest_gpuperf.engine.measure import MeasureSettings
    from pytest_gpuperf.gate.pairing import PairPolicy, measure_ab

    with open_device(
        "sim",
        seed=seed,
        common_fraction=0.5,
        placement_fraction=0.5 - job["code_share"],  # the code object gets the rest
        kernel_slowdown=job["slowdown"],
    ) as device:
        base = device.kernel(job["base"], "vector_add", defines={"GPUPERF_SALT": 1})
        head = device.kernel(job["head"], "vector_add", defines={"GPUPERF_SALT": job["salt"]})
        backend = device.backend
        n = KERNEL_ELEMENTS
        args = (backend.alloc(4 * n), backend.alloc(4 * n), backend.alloc(4 * n), n)
        # The fixture's pairing policy (gate/pairing.py) over 0.5 s kernels: a 2 s pair
        policy = PairPolicy(threshold=DEFAULT_COMPARE_THRESHOLD, loads=DEFAULT_PAIR_LOADS)
        paired = measure_ab(
            backend, head, base, policy=policy,
            settings=MeasureSettings(cache="cold", budget_s=0.5), confidence=confidence,
            grid=n // BLOCK, block=BLOCK, args=args, bytes_moved=12 * n, device=device.spec,
            seed=seed,
        )  # fmt: skip
    return check_comparison(
        paired,
        ref="base",
        threshold=DEFAULT_COMPARE_THRESHOLD,
        ref_commit="",
    )


def sim_trial(job: Mapping[str, Any]) -> dict[str, Any]:
    warnings.simplefilter("ignore")
    first = sim_round(job, job["seed"], job["first_confidence"])
    final = first
    if first.state == AB_REGRESSED:
        second = sim_round(job, job["seed"] ^ 0x5F5F5F, job["confirm_confidence"])
        final = confirm_comparison(first, second)
    return {
        "point": job["point"],
        "code_share": job["code_share"],
        "first": first.state,
        "final": final.state,
        "ratio": first.ratio,
        "pairs": first.pairs,
        "drift": first.drift or 0.0,
    }


def sim_rates(options: argparse.Namespace, budget: SuiteBudget) -> list[dict[str, Any]]:
    from multiprocessing import Pool

    from pytest_gpuperf import open_device

    directory = Path(tempfile.mkdtemp(prefix="suite-alarm-"))
    base = _variant(directory, "base", 1)
    other = _variant(directory, "other", 2)
    slow = _variant(directory, "slow", 3)
    with open_device("sim", seed=0) as device:
        slow_print = device.backend.kernel_fingerprint(
            device.kernel(slow, "vector_add", defines={"GPUPERF_SALT": 3})
        )
    draw = random.Random(options.seed)
    jobs = []
    for share in CODE_SHARES:
        for point, head, salt, slowdown in (
            ("A/A'", other, 2, {}),
            (f"+{SLOWDOWN:.0%}", slow, 3, {slow_print: 1.0 + SLOWDOWN}),
        ):
            jobs += [
                {
                    "point": point,
                    "code_share": share,
                    "base": str(base),
                    "head": str(head),
                    "salt": salt,
                    "slowdown": slowdown,
                    "seed": draw.getrandbits(31),
                    "first_confidence": interval_confidence(budget.ab_round_rate),
                    "confirm_confidence": interval_confidence(budget.ab_confirm_rate()),
                }
                for _ in range(options.trials)
            ]
    with Pool(options.workers) as pool:
        trials = pool.map(sim_trial, jobs, chunksize=8)
    rows = []
    for share in CODE_SHARES:
        for point in ("A/A'", f"+{SLOWDOWN:.0%}"):
            mine = [t for t in trials if t["code_share"] == share and t["point"] == point]
            first = sum(t["first"] == AB_REGRESSED for t in mine)
            final = sum(t["final"] == AB_REGRESSED for t in mine)
            rows.append(
                {
                    "code_share": share,
                    "point": point,
                    "trials": len(mine),
                    "first_regressed": first / len(mine),
                    "final_regressed": final / len(mine),
                    "final_regressed_upper95": upper_bound(final, len(mine)),
                    "median_pairs": _median(t["pairs"] for t in mine),
                    "median_drift": _median(t["drift"] for t in mine),
                }
            )
    return rows


# -- main ----------------------------------------------------------------------------------


def summarise(rows: Sequence[Mapping[str, Any]], key: str, tests: int) -> list[dict[str, Any]]:
    """Suite figures per row: the per-test rate in `key` over `tests` tests."""
    out = []
    for row in rows:
        rate = row.get(key)
        upper = row.get(f"{key}_upper95")
        entry = dict(row)
        if rate is not None:
            entry["suite_red_if_unchanged"] = 1.0 - (1.0 - rate) ** tests
        if upper is not None:
            entry["suite_red_if_unchanged_upper95"] = 1.0 - (1.0 - upper) ** tests
        out.append(entry)
    return out


def render(document: Mapping[str, Any]) -> str:
    lines = [f"### {document['title']}", "", f"- command: `{document['command']}`"]
    for note in document.get("notes", ()):
        lines.append(f"- {note}")
    lines.append("")
    rows = document["rows"]
    columns = [c for c in rows[0] if c not in ("judged",)] if rows else []
    lines.append("| " + " | ".join(columns) + " |")
    lines.append("|" + "---|" * len(columns))
    for row in rows:
        lines.append("| " + " | ".join(_cell(row.get(c)) for c in columns) + " |")
    return "\n".join(lines) + "\n"


def _cell(value: Any) -> str:
    if isinstance(value, float):
        if value == 0:
            return "0"
        return f"{value:.3g}" if abs(value) >= 1 else f"{value:.4%}"
    return str(value)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--sim", action="store_true", help="trials on the simulated MI300X")
    source.add_argument("--from-json", type=Path, help="a bench/gate_quality.py processes JSON")
    source.add_argument("--render", type=Path, help="print a result JSON as Markdown")
    parser.add_argument("--tests", type=int, default=SUITE_TESTS, help="tests in the suite")
    parser.add_argument("--suite-alarm", type=float, default=DEFAULT_SUITE_ALARM)
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    parser.add_argument("--seed", type=int, default=20261125)
    parser.add_argument("--out", type=Path)
    options = parser.parse_args(argv)
    if options.render:
        print(render(read_run(options.render)))
        return 0
    budget = SuiteBudget(options.suite_alarm, options.tests)
    began = time.monotonic()
    command = "PYTHONPATH=. python3 bench/suite_alarm.py " + " ".join(argv or sys.argv[1:])
    today = datetime.now(timezone.utc).date().isoformat()
    levels = (
        f"{options.tests} tests at a run budget of {budget.target:.1%}: each A/B round at "
        f"{budget.ab_round_rate:.2%} one-sided ({interval_confidence(budget.ab_round_rate):.1%} "
        f"intervals), the confirming round at {budget.ab_confirm_rate():.2%}"
    )
    if options.sim:
        rows = summarise(sim_rates(options, budget), "final_regressed", options.tests)
        title = f"Suite level on the SIMULATED MI300X (library), {today}"
        notes = [
            levels,
            f"{options.trials} trials per point, each on a fresh simulated device; a kernel of "
            f"{KERNEL_ELEMENTS} elements (~25 us), each side loaded {DEFAULT_PAIR_LOADS} times; "
            "the code share is the model's part of the run-to-run variance each module load "
            "owns (0.05 is the simulator's default); the gate is never told it and judges "
            "with the drift it measures over the loads",
            "final_regressed: both rounds regressed (the test fails); for A/A' it is the "
            "per-test false-alarm rate, for +3% the per-test detection",
        ]
    else:
        document = read_run(options.from_json)
        rows = summarise(rates_from_json(document, budget), "per_test_regressed", options.tests)
        title = f"Suite level from {document.get('device', 'a device')}'s per-test rates, {today}"
        notes = [
            levels,
            f"per-test rates from {options.from_json.name} ({document.get('title', '')}): each "
            "trial's interval rescaled to the round's level and judged again at its threshold; "
            "the rounds independent (the second loads the code again on fresh buffers)",
            "per_test_regressed: first x confirming round; for A/A and A/A' points it is the "
            "per-test false-alarm rate, for slower heads the per-test detection",
        ]
    result = {
        "title": title,
        "command": command,
        "budget": {"target": budget.target, "tests": budget.checks},
        "notes": notes,
        "rows": rows,
        "wall_s": time.monotonic() - began,
    }
    text = json.dumps(result, indent=2)
    out = options.out or (Path(os.environ["OUT"]) / "suite.json" if os.environ.get("OUT") else None)
    if out is not None:
        out.write_text(text + "\n")
    print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
