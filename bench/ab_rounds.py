"""Does an A/B comparison's first round predict its second? Coverage, false alarms and
detections after confirmation, with one buffer set per comparison against one per load.

A REGRESSED A/B round is confirmed by a second round on freshly loaded code objects and
fresh copies of the buffers (docs/measurement.md, "Confirm before failing"). When the first
round's interval leaves out what the second round sees (where the buffers landed, above
all), small real changes are flagged and then not confirmed, and an identical-code A/A can
be flagged. This script measures that, through the library and the gate's own functions
(measure.measure_pair, gate.ab.check_comparison, gate.confirm.confirm_comparison), the way
the fixture takes both rounds:

- a user's kernel (y = a x over 2M floats, ~9 µs cold on an H100) and the same kernel also
  reading a second buffer over a prefix of its elements (P per mille of them): a real change
  of memory traffic; P is calibrated first so that the heads are about 1% and 2% slower;
- N separate processes (run-to-run noise shows only between processes); each times, in a
  random order, identical code (A/A: the same code object loaded separately, as
  --gpuperf-compare-force does), the +1% head and the +2% head against the base, each with
  1 buffer set (every pair on the caller's buffers: the plugin before buffer sets) and with
  one set per load (8: the default now); every comparison takes both rounds, the second on
  fresh loads, fresh buffer copies and another slot order, whatever the first said.

Scored per arm: how often the first round's 95% interval holds the second round's estimate
(`covers`); how often the two rounds agree within their combined error (`agree`: |log r1 -
log r2| <= t sqrt(se1^2 + se2^2), what two honest intervals promise 95% of the time; a 95%
interval holds another round's estimate less often, about 83-90% here, because that estimate
has an error of its own); the first round's REGRESSED calls and the final state after
confirmation (a false alarm for A/A, a detection for the slower heads).

Usage (from the repository root, nothing installed):
  PYTHONPATH=. python3 bench/ab_rounds.py --backend cuda --processes 20 --deadline 200 \
      --out ab_rounds.json                   # the H100: prints a table, writes JSON
  PYTHONPATH=. python3 bench/ab_rounds.py --backend sim --processes 4   # the same path here
On the simulated device, $GPUPERF_SIM_BUFFER_CODE_SPREAD (default here 0.02) sets how much a
code object's time depends on where its buffers landed; its numbers are the model's.
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
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from _common import REPO_ROOT, read_run, run_child, write_json

ELEMENTS = 1 << 21  # 8 bytes each (read x, write y): 16.8 MB, ~9 µs cold on an H100
BLOCK = 256
THRESHOLD = 0.005  # --gpuperf-compare-threshold's default
LOADS = 8  # --gpuperf-compare-loads's default
SET_COUNTS = (1, LOADS)  # one buffer set (before), one per load (now)
CALIBRATION_PERMILLE = 60
KINDS = ("same", "slow1", "slow2")
# The heads' labels name their change; the table's mean ratio says what it cost.
LABELS = {
    "same": "A/A (identical code)",
    "slow1": "head: {}‰ of elements read more",
    "slow2": "head: {}‰ of elements read more",
}

KERNEL = """\
#include "gpuperf.h"
#define EXTRA_PERMILLE {permille}
// y = a x over n floats; the first n x EXTRA_PERMILLE / 1000 elements also read `extra`,
// whose zeros never meet the branch's 1e30, so y is unchanged but every extra load happens.
{directive}GPUPERF_KERNEL void scale_some(const float* x, float* y, const float* extra, float a,
                                int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {{
        float value = a * x[i];
        if (1000LL * i < (long long)n * EXTRA_PERMILLE && extra[i] == 1.0e30f) {{
            value = 0.0f;
        }}
        y[i] = value;
    }}
}}
"""
# The simulated device runs no kernel code: its directive stands in for the extra bytes.
SIM_EFFICIENCY = 0.80


def kernel_file(directory: Path, permille: int, simulated: bool) -> Path:
    directive = ""
    if simulated:
        efficiency = SIM_EFFICIENCY / (1.0 + permille / 2000.0)
        directive = f"// gpuperf-sim: efficiency={efficiency:.6f}\n"
    path = directory / f"scale_some_{permille}.hip"
    path.write_text(KERNEL.format(permille=permille, directive=directive))
    return path


# -- one process ----------------------------------------------------------------------------


def worker(backend_name: str, permilles: dict[str, int], seed: int, budget_s: float) -> None:
    """Every arm in a random order, both rounds each; one JSON line per comparison."""
    from pytest_gpuperf.engine.measure import MeasureSettings
    from pytest_gpuperf.gate.ab import check_comparison
    from pytest_gpuperf.gate.confirm import confirm_comparison
    from pytest_gpuperf.gate.pairing import PairPolicy, measure_ab
    from pytest_gpuperf.record.checks import AB_REGRESSED
    from pytest_gpuperf.session.api import open_device

    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as scratch, open_device(backend_name) as device:
        backend = device.backend
        simulated = device.simulated
        kernels = {
            p: device.kernel(kernel_file(Path(scratch), p, simulated), "scale_some")
            for p in sorted({0, *permilles.values()})
        }
        host = np.random.default_rng(seed).random(ELEMENTS, dtype=np.float32)
        x, y = device.to_device(host), device.empty(ELEMENTS)
        extra = device.to_device(np.zeros(ELEMENTS, dtype=np.float32))
        args = (x, y, extra, np.float32(2.0), np.int32(ELEMENTS))
        settings = MeasureSettings(cache="cold", budget_s=budget_s)  # one kernel's budget
        arms = [(kind, sets) for kind in KINDS for sets in SET_COUNTS]
        rng.shuffle(arms)
        for index, (kind, sets) in enumerate(arms):
            permille = permilles.get(kind, 0)
            rounds = []
            for round_index in range(2):
                head = backend.load_again(kernels[permille].module).kernel("scale_some")
                base = backend.load_again(kernels[0].module).kernel("scale_some")
                round_args, copies = (args, []) if round_index == 0 else _fresh(backend, args)
                began = time.perf_counter()
                # The fixture's pairing policy (gate/pairing.py): its budgets and pair limit
                paired = measure_ab(
                    backend,
                    head,
                    base,
                    policy=PairPolicy(
                        threshold=THRESHOLD, code_spread=0.0, loads=LOADS, buffer_sets=sets
                    ),
                    settings=settings,
                    confidence=0.95,
                    grid=ELEMENTS // BLOCK,
                    block=BLOCK,
                    args=round_args,
                    bytes_moved=8 * ELEMENTS,
                    device=device.spec,
                    seed=seed * 1000 + index * 2 + round_index,
                )
                wall_s = time.perf_counter() - began
                backend.synchronize()
                for buffer in copies:
                    buffer.free()
                for module in (head.module, base.module):
                    backend.unload(module)
                check = check_comparison(
                    paired, ref="base", ref_commit="", threshold=THRESHOLD, forced=kind == "same"
                )
                rounds.append((paired, check, wall_s))
            (first, first_check, first_s), (second, second_check, second_s) = rounds
            final = confirm_comparison(first_check, second_check)
            print(
                json.dumps(
                    {
                        "kind": kind,
                        "permille": permille,
                        "buffer_sets": sets,
                        "buffer_sets_used": first.buffer_sets,
                        "seed": seed,
                        "first": _round(first, first_check, first_s),
                        "second": _round(second, second_check, second_s),
                        "first_regressed": first_check.state == AB_REGRESSED,
                        "final_state": final.state,
                        "simulated": simulated,
                        "device": device.spec.name,
                        "gpu_uuid": backend.info.uuid,
                    }
                ),
                flush=True,
            )


def _fresh(backend: Any, args: Sequence[Any]) -> tuple[tuple, list]:
    """The arguments with device copies of their buffers, as a confirming round takes them,
    and the copies (to free)."""
    from pytest_gpuperf.runtime.base import DeviceBuffer

    fresh, copies = [], []
    for value in args:
        if isinstance(value, DeviceBuffer):
            copy = backend.alloc(value.nbytes)
            backend.copy(copy, value)
            copies.append(copy)
            value = copy
        fresh.append(value)
    return tuple(fresh), copies


def _round(paired: Any, check: Any, wall_s: float) -> dict[str, Any]:
    return {
        "ratio": paired.ratio,
        "ratio_ci": list(paired.ratio_ci),
        "log_ratio": paired.log_ratio,
        "se": paired.log_ratio_se,
        "df": paired.df,
        "pairs": paired.pairs,
        "drift": paired.drift,
        "state": check.state,
        "time_s": paired.base.time_s,
        "wall_s": wall_s,
    }


# -- calibration: which prefix makes +1% and +2% ------------------------------------------


def calibrate(backend_name: str, budget_s: float) -> dict[str, Any]:
    """One process: the head reading CALIBRATION_PERMILLE more against the base, one pair;
    the time a per-mille costs is taken as linear in it (a prefix of extra reads)."""
    rows = run_child(
        [__file__, "--calibrate-child", "--backend", backend_name, "--budget", str(budget_s)],
        timeout_s=120,
        env=_env(0),
    )
    if not rows:
        raise SystemExit("calibration failed: see the child's error above")
    ratio = float(rows[0]["ratio"])
    per_permille = max((ratio - 1.0) / CALIBRATION_PERMILLE, 1e-6)
    slow1 = max(1, round(0.01 / per_permille))
    slow2 = max(2, round(0.02 / per_permille))
    return {"ratio": ratio, "permille": {"slow1": slow1, "slow2": slow2}, "probe": rows[0]}


def calibrate_child(backend_name: str, budget_s: float) -> None:
    from pytest_gpuperf.session.api import open_device

    with tempfile.TemporaryDirectory() as scratch, open_device(backend_name) as device:
        simulated = device.simulated
        head = device.kernel(
            kernel_file(Path(scratch), CALIBRATION_PERMILLE, simulated), "scale_some"
        )
        base = device.kernel(kernel_file(Path(scratch), 0, simulated), "scale_some")
        x = device.to_device(np.ones(ELEMENTS, dtype=np.float32))
        y = device.empty(ELEMENTS)
        extra = device.to_device(np.zeros(ELEMENTS, dtype=np.float32))
        paired = device.compare(
            head,
            base,
            grid=ELEMENTS // BLOCK,
            block=BLOCK,
            args=(x, y, extra, np.float32(2.0), np.int32(ELEMENTS)),
            bytes=8 * ELEMENTS,
            budget_s=budget_s,  # the pair gets the fixture's budgets (gate/pairing.py)
        )
        print(json.dumps({"ratio": paired.ratio, "time_s": paired.base.time_s}), flush=True)


# -- the driver -----------------------------------------------------------------------------


def _env(seed: int) -> dict[str, str]:
    env = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
        "GPUPERF_SIM_SEED": str(1 + seed),
    }
    env.setdefault(
        "GPUPERF_SIM_BUFFER_CODE_SPREAD", os.environ.get("GPUPERF_SIM_BUFFER_CODE_SPREAD", "0.02")
    )
    return env


def score(rows: Sequence[dict]) -> list[dict[str, Any]]:
    """One row per (kind, buffer sets)."""
    from scipy import stats as sps

    table = []
    for kind in KINDS:
        for sets in SET_COUNTS:
            arm = [r for r in rows if r["kind"] == kind and r["buffer_sets"] == sets]
            if not arm:
                continue
            n = len(arm)
            covers = agree = 0
            for r in arm:
                first, second = r["first"], r["second"]
                low, high = first["ratio_ci"]
                covers += low <= second["ratio"] <= high
                spread = math.hypot(first["se"], second["se"])
                df = min(first["df"], second["df"])
                quantile = float(sps.t.ppf(0.975, max(df, 1.0)))
                agree += abs(first["log_ratio"] - second["log_ratio"]) <= quantile * spread
            first_regressed = sum(r["first_regressed"] for r in arm)
            confirmed = sum(r["final_state"] == "regressed" for r in arm)
            table.append(
                {
                    "kind": kind,
                    "label": LABELS[kind].format(arm[0]["permille"]),
                    "buffer_sets": sets,
                    "comparisons": n,
                    "covers": covers / n,
                    "agree": agree / n,
                    "first_regressed": first_regressed / n,
                    "confirmed_regressed": confirmed / n,
                    "first_inconclusive": sum(r["first"]["state"] == "inconclusive" for r in arm)
                    / n,
                    "final_inconclusive": sum(r["final_state"] == "inconclusive" for r in arm) / n,
                    "mean_ratio": float(
                        np.mean(
                            [r["first"]["ratio"] for r in arm] + [r["second"]["ratio"] for r in arm]
                        )
                    ),
                    "round_difference_sd": float(
                        np.std(
                            [r["first"]["log_ratio"] - r["second"]["log_ratio"] for r in arm],
                            ddof=1,
                        )
                    )
                    if n > 1
                    else math.nan,
                    "median_ci_half": float(
                        np.median(
                            [
                                (r["first"]["ratio_ci"][1] - r["first"]["ratio_ci"][0]) / 2
                                for r in arm
                            ]
                        )
                    ),
                    "median_pairs": float(np.median([r["first"]["pairs"] for r in arm])),
                    "median_drift": float(np.median([r["first"]["drift"] for r in arm])),
                    "median_time_us": float(np.median([r["first"]["time_s"] for r in arm])) * 1e6,
                    "median_round_s": float(np.median([r["first"]["wall_s"] for r in arm])),
                }
            )
    return table


def render(table: Sequence[dict], meta: dict[str, Any]) -> str:
    calibrated = "set by --permille"
    if math.isfinite(meta["calibration_ratio"]):
        ratio = meta["calibration_ratio"]
        calibrated = f"calibration: {CALIBRATION_PERMILLE} per mille -> {ratio:.4f}"
    if meta.get("buffer_code_spread"):
        calibrated += f"; buffer_code_spread {meta['buffer_code_spread']}"
    lines = [
        f"A/B rounds: {meta['device']}, {meta['processes']} processes, {meta['date']}"
        + (" (SIMULATED)" if meta["simulated"] else ""),
        f"heads: +{meta['permille']['slow1']} and +{meta['permille']['slow2']} per mille of "
        f"elements read a second buffer ({calibrated}); rounds of --gpuperf-budget "
        f"{meta['budget_s']:g} s, "
        f"{meta['loads']} loads per side, threshold {meta['threshold']:.1%}",
        "",
        "| change | buffer sets | comparisons | 1st CI holds 2nd estimate | rounds agree | "
        "1st regressed | regressed after confirmation | inconclusive (final) | mean ratio | "
        "sd(1st - 2nd) | median CI ± | median pairs | drift | kernel | round |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in table:
        lines.append(
            f"| {row['label']} | {row['buffer_sets']} | {row['comparisons']} | "
            f"{row['covers']:.0%} | {row['agree']:.0%} | {row['first_regressed']:.0%} | "
            f"{row['confirmed_regressed']:.0%} | {row['final_inconclusive']:.0%} | "
            f"{row['mean_ratio']:.4f} | {row['round_difference_sd']:.2%} | "
            f"{row['median_ci_half']:.2%} | {row['median_pairs']:.0f} | "
            f"±{row['median_drift']:.2%} | {row['median_time_us']:.1f} µs | "
            f"{row['median_round_s']:.2f} s |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="cuda", choices=("cuda", "hip", "sim"))
    parser.add_argument("--processes", type=int, default=20)
    parser.add_argument(
        "--deadline", type=float, default=200.0, help="seconds; stop starting processes after"
    )
    parser.add_argument(
        "--budget", type=float, default=0.25, help="--gpuperf-budget of each round (a pair gets 4)"
    )
    parser.add_argument(
        "--permille",
        default=None,
        help="P1,P2: the heads' extra reads per mille of elements (default: calibrated, "
        "assuming their cost linear in P; the first reads cost more on the H100: the "
        "calibrated 38,76 gave +1.9%% and +2.7%% there on 2026-11-25)",
    )
    parser.add_argument("--render", type=Path, default=None, help="print the table of a run's JSON")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--calibrate-child", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.calibrate_child:
        calibrate_child(options.backend, options.budget)
        return 0
    if options.worker is not None:
        worker(options.backend, json.loads(options.worker), options.seed, options.budget)
        return 0
    if options.render is not None:
        document = read_run(options.render)
        print(render(score(document["rows"]), document["meta"]))
        return 0
    began = time.monotonic()
    if options.permille:
        slow1, slow2 = (int(p) for p in options.permille.split(","))
        calibration = {"ratio": math.nan, "permille": {"slow1": slow1, "slow2": slow2}}
    else:
        calibration = calibrate(options.backend, options.budget)
    permilles = calibration["permille"]
    rows: list[dict] = []
    processes = 0
    for seed in range(1, options.processes + 1):
        if time.monotonic() - began > options.deadline:
            print(f"deadline: {processes} processes done", file=sys.stderr)
            break
        got = run_child(
            [__file__, "--worker", json.dumps(permilles), "--seed", str(seed),
             "--backend", options.backend, "--budget", str(options.budget)],
            timeout_s=max(60.0, options.deadline),
            env=_env(seed),
        )  # fmt: skip
        rows.extend(got)
        processes += bool(got)
        if options.out is not None:  # what a run cut off by its limit still leaves
            write_json(options.out, {"partial": True, "permille": permilles, "rows": rows})
        print(
            f"process {seed}: {len(got)} comparisons, {time.monotonic() - began:.0f} s",
            file=sys.stderr,
        )
    if not rows:
        print("no comparison came back", file=sys.stderr)
        return 1
    meta = {
        "device": rows[0]["device"],
        "simulated": rows[0]["simulated"],
        "gpu_uuids": sorted({r["gpu_uuid"] for r in rows}),
        "processes": processes,
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "elements": ELEMENTS,
        "budget_s": options.budget,
        "loads": LOADS,
        "threshold": THRESHOLD,
        "permille": permilles,
        "calibration_ratio": calibration["ratio"],
        "buffer_code_spread": os.environ.get("GPUPERF_SIM_BUFFER_CODE_SPREAD", "0.02")
        if rows[0]["simulated"]
        else None,
        "wall_s": time.monotonic() - began,
    }
    table = score(rows)
    print(render(table, meta))
    if options.out is not None:
        write_json(options.out, {"meta": meta, "table": table, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
