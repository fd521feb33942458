"""What a suite of short perf tests costs, serial and under pytest-xdist, first run and warm.

A throwaway user project of K tests (default 48), each measuring one cold scale kernel
`y = a * x` over N floats (default 20M: 160 MB moved, about 40 us on an H200), is run as
separate pytest processes:

  first     an empty kernel cache (a fresh CI runner): GPUPERF_CACHE_DIR points at a new folder
  warm      the same cache again, RUNS times serially and RUNS times under each `-n W`

Each row: wall time of the process, pytest's session time, the GPU lock held (summed over the
devices; what measuring cost), the most any one device held it, and the GPUs the results name
(each measurement's `gpu.uuid`). Two GPUs must make `-n 2` no slower than serial.

Usage (on the GPU machine, from the repository root):
  PYTHONPATH=. python3 bench/suite_scale.py --out $OUT/suite
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO_ROOT, text_table, write_json
from main_job import USER_CONFTEST as CONFTEST
from main_job import USER_KERNEL as KERNEL
from main_job import run_job

TIMELINE = """

import os
import time

_FIRST = []


def _mark(what):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "controller")
    with open(os.environ["SUITE_TIMELINE"], "a") as out:
        out.write(f"{time.time():.3f} {worker} {what}\\n")


def pytest_configure(config):
    _mark("configured")


def pytest_collection_finish(session):
    _mark("collected")


def pytest_runtest_setup(item):
    if not _FIRST:
        _FIRST.append(item)
        _mark("first test")


def pytest_sessionfinish(session):
    _mark("finished")
"""
TEST = """\
import os

import numpy as np
import pytest

N = int(os.environ["SUITE_FLOATS"])


@pytest.mark.parametrize("index", range(int(os.environ["SUITE_TESTS"])))
def test_scale(gpu_bench, index):
    kernel = gpu_bench.kernel("scale.hip", "scale")
    dx, dy = gpu_bench.empty(N), gpu_bench.empty(N)
    gpu_bench(
        kernel, grid=(N + 255) // 256, block=256, args=(dx, dy, 2.0, N),
        bytes=8 * N, cache="cold",
    )
"""


def make_project(root: Path, timeline: bool) -> None:
    (root / "scale.hip").write_text(KERNEL)
    (root / "conftest.py").write_text(CONFTEST + (TIMELINE if timeline else ""))
    (root / "test_suite.py").write_text(TEST)


def _plugin_flag() -> list[str]:
    """`-p pytest_gpuperf.plugin` when the package runs from the tree (no entry point loads it)."""
    try:
        importlib.metadata.distribution("pytest-gpuperf")
    except importlib.metadata.PackageNotFoundError:
        return ["-p", "pytest_gpuperf.plugin"]
    return []


def run_suite(
    project: Path, label: str, extra: Sequence[str], env: Mapping[str, str], root: Path
) -> dict[str, Any]:
    """One pytest process over the project (main_job.run_job runs it): wall, session,
    GPU-lock account per device, the GPUs the results name, the probe and the timeline."""
    report = project / f"report-{label}.json"
    timeline = project / f"timeline-{label}.txt"
    started_at = time.time()
    run = run_job(
        report,
        extra=[*extra, *_plugin_flag()],
        timeout_s=300,
        job=("--gpuperf", "-p", "no:cacheprovider", "-q"),
        cwd=project,
        env={**env, "SUITE_TIMELINE": str(timeline)},
        root=root,
    )
    row: dict[str, Any] = {"run": label, "exit": run["exit"], "wall_s": run["wall_s"]}
    if timeline.exists():
        row["timeline"] = _timeline(timeline.read_text(), started_at)
    row["session_s"] = run["session_s"] or round(run.get("report_wall_s") or 0.0, 2)
    if "error" in run:
        row["error"] = run["error"]
        return row
    document = json.loads(report.read_text())
    devices = document.get("devices", ())
    row["lock_held_s"] = sum(d.get("lock_held_s") or 0.0 for d in devices)
    row["lock_max_device_s"] = max((d.get("lock_held_s") or 0.0 for d in devices), default=0.0)
    results = document.get("results", ())
    row["results"] = len(results)
    named = [((r.get("measurement") or {}).get("gpu") or {}).get("uuid") for r in results]
    row["unnamed"] = sum(1 for uuid in named if not uuid)
    row["gpus"] = sorted({uuid for uuid in named if uuid})
    row["board"] = [d.get("name") for d in devices]
    row["summary"] = document.get("summary")
    probe = document.get("probe") or {}
    row["probe_s"] = [round(gpu["probe_s"], 2) for gpu in probe.get("gpus", ())]
    return row


def _timeline(text: str, started_at: float) -> list[str]:
    """The conftest's marks as seconds since the process was started, in order."""
    marks = sorted(line.split(" ", 1) for line in text.splitlines() if line)
    return [f"+{float(at) - started_at:.2f} s {what}" for at, what in marks]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", type=int, default=48)
    parser.add_argument("--floats", type=int, default=20 << 20)
    parser.add_argument("--runs", type=int, default=2, help="warm runs of each kind")
    parser.add_argument("--workers", default="2", help="comma-separated -n values")
    parser.add_argument("--backend", default="hip,cuda,sim")
    parser.add_argument(
        "--timeline",
        action="store_true",
        help="print when each process configured, collected, ran its first test and finished",
    )
    parser.add_argument(
        "--plugin-root",
        default="",
        help="the checkout whose pytest_gpuperf runs (default: "
        "this one); e.g. an older commit unpacked elsewhere, for before/after on one board",
    )
    parser.add_argument("--label", default="", help="prefixes every run's name")
    parser.add_argument("--out", default=os.environ.get("OUT") or "suite-scale")
    options = parser.parse_args(argv)
    env = {"SUITE_TESTS": str(options.tests), "SUITE_FLOATS": str(options.floats)}
    root = Path(options.plugin_root).resolve() if options.plugin_root else REPO_ROOT
    backend = [f"--gpuperf-backend={options.backend}"]
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        project = Path(scratch) / "project"
        project.mkdir()
        make_project(project, options.timeline)
        env["GPUPERF_CACHE_DIR"] = str(Path(scratch) / "kernel-cache")
        rows.append(run_suite(project, f"{options.label}first", backend, env, root))
        kinds = [("serial", [])] + [(f"n{w}", ["-n", w]) for w in options.workers.split(",")]
        for index in range(options.runs):
            for name, extra in kinds:
                label = f"{options.label}{name}-{index + 1}"
                rows.append(run_suite(project, label, backend + extra, env, root))
    headers = ["run", "exit", "wall s", "session s", "lock s", "max/GPU s", "results", "GPUs"]
    table = [
        [
            r["run"], r["exit"], f"{r['wall_s']:.2f}", r.get("session_s"),
            f"{r.get('lock_held_s', 0):.2f}", f"{r.get('lock_max_device_s', 0):.2f}",
            f"{r.get('results', 0)} ({r.get('unnamed', '?')} unnamed)",
            " ".join(uuid[:12] for uuid in r.get("gpus", ())),
        ]
        for r in rows
    ]  # fmt: skip
    print(text_table(headers, table))
    for name, _ in kinds:
        walls = [r["wall_s"] for r in rows if r["run"].startswith(f"{options.label}{name}-")]
        print(f"{name}: median wall {statistics.median(walls):.2f} s over {len(walls)} runs")
    for r in rows:
        if "timeline" in r:
            probed = f" (probe {r['probe_s']} s)" if r.get("probe_s") else ""
            print(f"{r['run']}{probed}: " + "; ".join(r["timeline"]))
    for r in rows:
        if "error" in r:
            print(f"{r['run']}: {r['error']}")
    Path(options.out).mkdir(parents=True, exist_ok=True)
    write_json(
        str(Path(options.out) / f"suite_scale{options.label.strip('-')}.json"),
        {"date": time.ctime(), "rows": rows},
    )
    return 0 if all(r["exit"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
