"""What sets the spread of a stored measurement between processes, at the lengths users run.

A stored baseline is one process's measurement judged against other processes' measurements,
so whatever one process draws once and keeps (where its code object landed, where its
buffers landed, its clocks, which tick of the timer its median sits on) is noise the stored
gate must allow for. This script takes that apart. Each of `--processes` separate Python
processes opens the device, compiles the user-style kernel of bench/stored_scenario.py once
and, for each length (about 7.8, 28 and 210 us cold on an H100), measures it on every
combination of `--loads` module loads (Backend.load_again: the same code object at another
address) and `--sets` buffer sets (fresh allocations), each a short measurement of the
engine with the reference copy kernel interleaved (calibrate=True). Every measurement keeps
its samples, so the parent compares, between processes:

  - the median of the samples (the stored statistic before) against their 10%-trimmed mean
    (the A/B gate's statistic), on one load and buffer set: what the timer's quantum costs;
  - one (load, set) cell against the mean over all cells of the process: what averaging
    over loads and buffer sets buys;
  - a one-way decomposition of the cells' trimmed means: between processes, between loads
    and between buffer sets within a process;
  - the kernel's time over the reference kernel's (calibrated efficiency): whether what moves
    between processes is common to the device (clocks) and cancels.

Usage (repository root; one GPU device call):
  PYTHONPATH=. python3 bench/stored_noise.py --processes 10 --out noise.json
  PYTHONPATH=. python3 bench/stored_noise.py --render noise.json
  PYTHONPATH=. python3 bench/stored_noise.py --backend sim --processes 3   # SIMULATED
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
from _common import markdown_table, read_run, run_child, text_table, write_json

# elements of x and y (8 bytes moved each): about 7.8, 28 and 210 us cold on an H100
# (2026-11-27, call 1 ran 1.15M, 11.4M and 57M: 7.3, 38.4 and 190 us)
LENGTHS = {"7.8us": 1_320_000, "28us": 8_000_000, "210us": 64_000_000}
TIMER_TICK_S = 32e-9


def child(options: argparse.Namespace) -> None:
    """One process: every length on every (load, buffer set), one JSON line per cell."""
    import numpy as np
    from stored_scenario import KERNEL  # the same kernel as there

    from pytest_gpuperf import open_device
    from pytest_gpuperf.engine.measure import MeasureSettings
    from pytest_gpuperf.engine.stats import trimmed_mean
    from pytest_gpuperf.engine.timing import engine_for

    rng = np.random.default_rng()
    spacers: list[Any] = []
    folder = Path(tempfile.mkdtemp(prefix="stored-noise-"))
    (folder / "scale.hip").write_text(KERNEL)
    with open_device(options.backend) as device:
        backend = device.backend
        first = device.kernel(folder / "scale.hip", "scale")
        module = next(iter(device._modules.values()))
        again = [backend.load_again(module) for _ in range(options.loads - 1)]
        loads = [first, *(loaded.kernel("scale") for loaded in again)]
        uuid = device.info.uuid
        for label, n in LENGTHS.items():
            n = n if options.backend != "sim" else n // 16
            host = np.random.default_rng(0).random(n, dtype=np.float32)
            sets = []
            for _ in range(options.sets):
                extra = device.to_device(np.zeros(1, np.float32))
                sets.append((device.to_device(host), device.empty(n), extra))
            settings = MeasureSettings(
                cache="cold", budget_s=options.budget, target_rel_ci=1e-6, max_samples=100000,
                warmup_s=0.03, calibrate=True,
            )  # fmt: skip
            order = [(load, s) for load in range(options.loads) for s in range(options.sets)]
            for load, s in order:
                x, y, extra = sets[s]
                if options.fresh_scratch:
                    # a new flush buffer for every cell, behind a spacer of random size so it
                    # lands elsewhere: is the buffer a process flushes with what it keeps?
                    engine = engine_for(backend)
                    if engine.scratch is not None:
                        engine.scratch.free()
                        engine.scratch = None
                    spacers.append(backend.alloc(int(rng.integers(1, 64)) << 21))
                m = device.measure(
                    loads[load], grid=(n + 255) // 256, block=256,
                    args=(x, y, extra, 2.0, n, 0), bytes=8 * n, settings=settings,
                )  # fmt: skip
                samples = np.array(m.samples_s)
                reference = np.array(m.extra.get("reference_samples_s", ()))
                row = {
                    "length": label,
                    "load": load,
                    "set": s,
                    "board": uuid,
                    "n": int(samples.size),
                    "median_s": float(np.median(samples)),
                    "trimmed_s": trimmed_mean(samples).mean,
                    "mean_s": float(samples.mean()),
                    "ticks": int(np.unique(np.round(samples / TIMER_TICK_S)).size),
                    "trimmed_se_s": trimmed_mean(samples).se,
                    "ref_median_s": float(np.median(reference)) if reference.size else 0.0,
                    "ref_trimmed_s": trimmed_mean(reference).mean if reference.size > 1 else 0.0,
                    "sm_mhz": _clock(m, "sm_clock_mhz"),
                    "mem_mhz": _clock(m, "memory_clock_mhz"),
                    "temp_c": _clock(m, "temperature_c"),
                }
                print(json.dumps(row), flush=True)


def _clock(m: Any, name: str) -> float:
    clocks = m.clocks
    if clocks is None:
        return 0.0
    value = getattr(clocks, name, None)
    return float(value) if isinstance(value, (int, float)) else 0.0


def collect(options: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    processes = []
    for index in range(options.processes):
        if time.monotonic() - started > options.deadline:
            break
        args = [
            str(Path(__file__).resolve()), "--child", f"--backend={options.backend}",
            f"--loads={options.loads}", f"--sets={options.sets}", f"--budget={options.budget}",
        ]  # fmt: skip
        if options.fresh_scratch:
            args.append("--fresh-scratch")
        began = time.monotonic()
        rows = run_child(args, timeout_s=120)
        processes.append({"index": index, "wall_s": time.monotonic() - began, "cells": rows})
    return {
        "title": "between-process spread of a stored measurement (bench/stored_noise.py)",
        "backend": options.backend,
        "simulated": options.backend == "sim",
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "loads": options.loads,
        "sets": options.sets,
        "budget_s": options.budget,
        "fresh_scratch": options.fresh_scratch,
        "processes": processes,
        "wall_s": time.monotonic() - started,
    }


def _mean(cells: Sequence[Mapping[str, Any]], key: str) -> float:
    return statistics.fmean(cell[key] for cell in cells)


def _sd_log(values: Sequence[float]) -> float:
    logs = [math.log(v) for v in values if v > 0]
    return statistics.stdev(logs) if len(logs) > 1 else 0.0


def analyse(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per length: the spread of log time between processes for each way of measuring."""
    import numpy as np

    out = []
    processes = [p for p in document["processes"] if p["cells"]]
    for length in LENGTHS:
        cells = [[c for c in p["cells"] if c["length"] == length] for p in processes]
        cells = [c for c in cells if c]
        if len(cells) < 2:
            continue
        first = [c[0] for c in cells]  # one load, one buffer set: a stored measurement now
        row: dict[str, Any] = {"length": length, "processes": len(cells)}
        row["time_us"] = statistics.median(c["median_s"] for c in first) * 1e6
        row["one_cell_median"] = _sd_log([c["median_s"] for c in first])
        row["one_cell_trimmed"] = _sd_log([c["trimmed_s"] for c in first])
        row["all_cells_trimmed"] = _sd_log([_mean(c, "trimmed_s") for c in cells])
        row["all_cells_median"] = _sd_log([_mean(c, "median_s") for c in cells])
        row["one_cell_calibrated"] = _sd_log(
            [c["trimmed_s"] / c["ref_trimmed_s"] for c in first if c["ref_trimmed_s"] > 0]
        )
        row["all_cells_calibrated"] = _sd_log(
            [statistics.fmean(x["trimmed_s"] / x["ref_trimmed_s"] for x in c) for c in cells]
        )
        row["reference_one_cell"] = _sd_log([c["ref_trimmed_s"] for c in first])
        row["ticks"] = statistics.median(c["ticks"] for c in first)
        # a cell's own standard error of its trimmed mean (log scale): what the cells would
        # scatter by if nothing moved between them
        row["cell_se"] = statistics.median(
            c.get("trimmed_se_s", 0.0) / c["trimmed_s"] for cs in cells for c in cs
        )
        row["samples"] = statistics.median(c["n"] for c in first)
        # one-way decomposition of log trimmed means: process / load within / set within
        logs = {
            (p, c["load"], c["set"]): math.log(c["trimmed_s"])
            for p, cs in enumerate(cells)
            for c in cs
        }
        loads = sorted({k[1] for k in logs})
        sets = sorted({k[2] for k in logs})
        full = [p for p in range(len(cells)) if all((p, a, b) in logs for a in loads for b in sets)]
        if len(full) >= 2 and (len(loads) > 1 or len(sets) > 1):
            grid = np.array([[[logs[(p, a, b)] for b in sets] for a in loads] for p in full])
            proc_means = grid.mean(axis=(1, 2))
            load_means = grid.mean(axis=2) - proc_means[:, None]
            set_means = grid.mean(axis=1) - proc_means[:, None]
            resid = grid - proc_means[:, None, None] - load_means[:, :, None]
            resid = resid - set_means[:, None, :]
            row["between_process_sd"] = float(np.std(proc_means, ddof=1))
            load_df = max(len(full) * (len(loads) - 1), 1)
            set_df = max(len(full) * (len(sets) - 1), 1)
            row["between_load_sd"] = float(np.sqrt(np.sum(load_means**2) / load_df))
            row["between_set_sd"] = float(np.sqrt(np.sum(set_means**2) / set_df))
            dof = len(full) * (len(loads) - 1) * (len(sets) - 1)
            row["residual_sd"] = float(np.sqrt(np.sum(resid**2) / dof)) if dof else 0.0
        clocks = [c["sm_mhz"] for c in first if c["sm_mhz"]]
        row["sm_mhz"] = (min(clocks), max(clocks)) if clocks else None
        if clocks and len(set(clocks)) > 1:
            row["sm_mhz_vs_time_r"] = float(
                np.corrcoef(clocks, [math.log(c["trimmed_s"]) for c in first if c["sm_mhz"]])[0, 1]
            )
        out.append(row)
    return out


def render(document: Mapping[str, Any], markdown: bool) -> str:
    rows = analyse(document)
    table = markdown_table if markdown else text_table
    label = "SIMULATED " if document.get("simulated") else ""
    lines = [
        f"{label}between-process spread (sigma of log time), {document['backend']}, "
        f"{document['started']}: {len(document['processes'])} processes x {document['loads']} "
        f"loads x {document['sets']} buffer sets, {document['budget_s']} s a cell"
        f"{', a new flush buffer each' if document.get('fresh_scratch') else ''}; "
        f"{document['wall_s']:.0f} s",
        "",
    ]
    headers = [
        "length", "time", "procs", "ticks", "median 1 cell", "trimmed 1 cell", "trimmed all",
        "calibrated 1", "calibrated all", "ref 1 cell", "process", "load", "set", "residual",
        "cell se",
    ]  # fmt: skip
    body = []
    for r in rows:
        body.append(
            [
                r["length"], f"{r['time_us']:.1f} us", r["processes"], r["ticks"],
                *(f"{r[k]:.3%}" for k in (
                    "one_cell_median", "one_cell_trimmed", "all_cells_trimmed",
                    "one_cell_calibrated", "all_cells_calibrated", "reference_one_cell",
                )),
                *(f"{r[k]:.3%}" if k in r else "-" for k in (
                    "between_process_sd", "between_load_sd", "between_set_sd", "residual_sd",
                    "cell_se",
                )),
            ]
        )  # fmt: skip
    lines += [table(headers, body), ""]
    for r in rows:
        if r.get("sm_mhz"):
            low, high = r["sm_mhz"]
            line = f"- {r['length']}: SM clock {low:.0f}-{high:.0f} MHz"
            if "sm_mhz_vs_time_r" in r:
                line += f", r(clock, log time) {r['sm_mhz_vs_time_r']:+.2f}"
            lines.append(line)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="cuda", choices=("cuda", "sim"))
    parser.add_argument("--processes", type=int, default=10)
    parser.add_argument("--loads", type=int, default=3)
    parser.add_argument("--sets", type=int, default=3)
    parser.add_argument("--budget", type=float, default=0.04, help="seconds a cell")
    parser.add_argument("--deadline", type=float, default=120.0)
    parser.add_argument("--child", action="store_true")
    parser.add_argument(
        "--fresh-scratch", action="store_true", help="a new flush buffer for every cell"
    )
    parser.add_argument("--out")
    parser.add_argument("--render")
    parser.add_argument("--markdown", action="store_true")
    options = parser.parse_args(argv)
    if options.child:
        child(options)
        return 0
    if options.render:
        document = read_run(options.render)
    else:
        document = collect(options)
        write_json(options.out, document)
    print(render(document, options.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
