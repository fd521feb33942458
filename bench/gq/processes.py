"""What does the gate decide in separate pytest processes? The processes part: calibrate,
write the project, then run the processes in it until the count or the deadline, scoring
after every one."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from _common import REPO_ROOT, read_run, write_json

from .ab import score_ab
from .calibrate import calibrate
from .history import score_history
from .plan import plan_from, plan_from_json, plan_json, plan_line
from .points import POINTS
from .project import write_project
from .records import ProcessRecord, trials_from_report, wall_summary


class Stopped(Exception):
    """SIGTERM or SIGINT (a `timeout` around the run): score and print what there is."""


def pytest_command(backend: str, report: Path, budget_s: float) -> list[str]:
    """One separate pytest process. The plugin is named with -p and autoloading is off
    (process_env), so it loads once whether the package is installed or only on PYTHONPATH."""
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
        "-p", "pytest_gpuperf.plugin",
        "--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-compare-force",
        f"--gpuperf-json={report}", f"--gpuperf-backend={backend}",
        f"--gpuperf-budget={budget_s:g}",
    ]  # fmt: skip
    if backend != "sim":
        command.append(f"--gpuperf-require={backend}")  # no GPU: fail, never skip
    return command


def process_env(cache: Path, seed: int) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["GPUPERF_CACHE_DIR"] = str(cache)  # compiled kernels and BASE's tree, shared
    env["GPUPERF_SIM_SEED"] = str(seed)  # the simulated device: each process its own run
    env["GATE_QUALITY_ORDER"] = str(seed)
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("GITHUB_STEP_SUMMARY", None)
    return env


def run_process(
    command: Sequence[str], cwd: Path, env: Mapping[str, str], timeout_s: float
) -> tuple[int | None, str]:
    """(exit status, None when it ran out of time; its output). The child gets its own
    process group, killed with it whenever this returns or is interrupted."""
    child = subprocess.Popen(
        list(command),
        cwd=cwd,
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = child.communicate(timeout=timeout_s)
        return child.returncode, output
    except subprocess.TimeoutExpired:
        _kill_group(child)
        output, _ = child.communicate()
        return None, output or ""
    finally:
        if child.poll() is None:
            _kill_group(child)
            child.wait()


def _kill_group(child: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)


def one_process(
    index: int,
    seed: int,
    project: Path,
    reports: Path,
    cache: Path,
    options: argparse.Namespace,
    points: int = len(POINTS),
) -> ProcessRecord:
    report = reports / f"process-{index:03d}.json"
    began = time.perf_counter()
    returncode, output = run_process(
        pytest_command(options.backend, report, options.budget),
        project,
        process_env(cache, seed),
        options.process_timeout,
    )
    wall_s = time.perf_counter() - began
    problem, trials, device = "", {}, ""
    if returncode is None:
        problem = f"ran out of its {options.process_timeout:.0f} s"
    elif returncode not in (0, 1):  # 1: some test failed (a regression fails its test)
        problem = f"pytest exited with status {returncode}"
    if report.exists():
        document = json.loads(report.read_text())
        trials = trials_from_report(document)
        device = next((d.get("name", "") for d in document.get("devices", ())), "")
    elif not problem:
        problem = "no report written"
    if problem or any(not trial.valid for trial in trials.values()) or len(trials) < points:
        tail = "\n".join(output.strip().splitlines()[-25:])
        problem = problem or "some measurements were not valid comparisons"
        print(f"  process {index}: {problem}\n{tail}", file=sys.stderr)
    return ProcessRecord(index, seed, wall_s, returncode, trials, problem, device)


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
        "title": "",
        "part": "processes",
        "backend": options.backend,
        "command": options.command,
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "workdir": str(root),
        "complete": False,
        "processes": [],
    }
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
    document.update(
        {
            "device": device,
            "complete": not stopped and len(records) == options.processes,
            "stopped": stopped,
            "ab": score_ab(records),
            "history": rows,
            "history_skipped": skipped,
            "history_trials": checks,
            "wall_s": time.perf_counter() - began,
            "process_wall_s": wall_summary(records),
        }
    )
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
