"""What does the gate decide in separate pytest processes? The processes part: calibrate,
write the project, then run the processes in it until the count or the deadline, scoring
after every one."""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lab.pytest_runs import NAMED_PLUGIN, gpuperf_args, plugin_env, run_pytest
from lab.runs import read_run, write_json

from .ab import score_ab
from .calibrate import calibrate
from .history import score_history
from .plan import plan_from, plan_from_json, plan_json, plan_line
from .points import POINTS
from .project import write_project
from .records import ProcessRecord, trials_from_rows, wall_summary


class Stopped(Exception):
    """SIGTERM or SIGINT (a `timeout` around the run): score and print what there is."""


def one_process(
    index: int,
    seed: int,
    project: Path,
    reports: Path,
    cache: Path,
    options: argparse.Namespace,
    points: int = len(POINTS),
) -> ProcessRecord:
    """One separate pytest process: every kernel's A/B against BASE (identical code timed
    too, --gpuperf-compare-force); what it measured, or why not."""
    args = ["-q", *NAMED_PLUGIN, "--gpuperf-compare=HEAD", "--gpuperf-compare-force"]
    args += gpuperf_args(options.backend, budget=f"{options.budget:g}", require=True)
    run = run_pytest(
        args,
        reports / f"process-{index:03d}.json",
        cwd=project,
        env=process_env(cache, seed),
        timeout_s=options.process_timeout,
    )
    problem = run.problem  # a failed test (1) is a regression's verdict, not a problem
    if run.returncode not in (0, 1, None):
        problem = f"pytest exited with status {run.returncode}"
    trials = trials_from_rows(run.rows)
    device = next((d.get("name", "") for d in run.document.get("devices", ())), "")
    if problem or any(not trial.valid for trial in trials.values()) or len(trials) < points:
        tail = "\n".join(run.output.strip().splitlines()[-25:])
        problem = problem or "some measurements were not valid comparisons"
        print(f"  process {index}: {problem}\n{tail}", file=sys.stderr)
    return ProcessRecord(index, seed, run.wall_s, run.returncode, trials, problem, device)


def process_env(cache: Path, seed: int) -> dict[str, str]:
    """Compiled kernels and BASE's tree shared through `cache`; `seed` the simulated device's
    run and the tests' order in this process."""
    return plugin_env(GPUPERF_CACHE_DIR=str(cache), GPUPERF_SIM_SEED=str(seed),
                      BENCH_TEST_ORDER=str(seed))  # fmt: skip


def processes_part(options: argparse.Namespace, began: float) -> dict[str, Any]:
    """Calibrate, write the project, run the processes; returns the document (also written
    to --out after every process)."""
    if shutil.which("git") is None:
        raise SystemExit("gate_quality: git is needed (the A/B base is a git revision)")
    root = Path(tempfile.mkdtemp(prefix="gate-quality-"))
    project, reports, cache = root / "project", root / "reports", root / "cache"
    reports.mkdir()
    sizes = {"long": options.long_elements, "mid": options.mid_elements}
    sizes["short"] = options.short_elements
    sizes = {size: elements for size, elements in sizes.items() if elements}
    document: dict[str, Any] = {
        "title": "", "part": "processes", "backend": options.backend, "command": options.command,
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "workdir": str(root), "complete": False, "processes": [],
    }  # fmt: skip
    records: list[ProcessRecord] = []
    stopped = ""
    try:
        if options.plan_from:
            plan = plan_from_json(read_run(options.plan_from)["plan"])
            plan.calibration["source"] = (
                f"{plan.calibration.get('source', '')} (the plan of {options.plan_from})"
            )
        elif options.calibrate:
            print("calibrating the extra bytes per slowdown ...", file=sys.stderr)
            env = process_env(cache, options.seed)
            calibration = calibrate(options.backend, sizes, root / "calibration", env)
            plan = plan_from(sizes, calibration)
        else:
            calibration = {"source": "--no-calibrate: 1% more bytes per 1% of slowdown"}
            calibration.update(
                {s: {"slope_per_permille": 0.001, "probe_permille": 0} for s in sizes}
            )
            plan = plan_from(sizes, calibration)
        document["plan"] = plan_json(plan)
        print(f"plan: {plan_line(plan)}", file=sys.stderr)
        write_project(project, plan)
        for index in range(options.processes):
            elapsed = time.perf_counter() - began
            recent = [r.wall_s for r in records[-5:]]
            if options.deadline and recent and elapsed + 1.5 * max(recent) > options.deadline:
                stopped = f"stopped before process {index}: the {options.deadline:.0f} s deadline"
                break
            record = one_process(
                index, options.seed + index, project, reports, cache, options, len(plan.points)
            )
            records.append(record)
            document["processes"].append(record.to_json())
            document["ab"] = score_ab(records)
            write_json(options.out, document)
            print(_progress(record, index, options.processes, began), file=sys.stderr)
            if index == 1 and not any(t.valid for r in records for t in r.trials.values()):
                stopped = "stopped: the first two processes measured nothing valid (see above)"
                break
    except Stopped:
        stopped = f"stopped by a signal after {len(records)} processes"
    finally:
        # What is measured is kept: a second signal (a `timeout` firing now) must not cut
        # the scoring and the printing short.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if not options.keep:
            shutil.rmtree(root, ignore_errors=True)
    if stopped:
        print(stopped, file=sys.stderr)
    spread = 0.07 if options.backend == "sim" else None  # the plugin's sim prior (run_spread)
    rows, checks, skipped = score_history(records, options.history_trials, options.seed, spread)
    device = next((r.device for r in records if r.device), options.backend)
    document.update({
        "device": device, "complete": not stopped and len(records) == options.processes,
        "stopped": stopped, "ab": score_ab(records), "history": rows, "history_skipped": skipped,
        "history_trials": checks, "wall_s": time.perf_counter() - began,
        "process_wall_s": wall_summary(records),
    })  # fmt: skip
    return document


def _progress(record: ProcessRecord, index: int, total: int, began: float) -> str:
    states = " ".join(
        f"{name}={t.state or '-'}{'' if t.ratio is None else f'({t.ratio:.4f})'}"
        for name, t in record.trials.items()
    )
    return (
        f"process {index + 1}/{total}: {record.wall_s:.1f} s "
        f"(total {time.perf_counter() - began:.0f} s) {states}"
        + (f" [{record.problem}]" if record.problem else "")
    )
