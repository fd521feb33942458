"""The stored gate at the lengths users' kernels run: allowance by saves, false alarms, catches.

A throwaway git project with a user-style kernel of its own (bench/lab/kernels.py's scale:
y = a * x with an optional extra read, real traffic the declared bytes do not count) at three
lengths, cold (about 7.8, 28 and 210 us on an H100). Each step is a separate
`python -m pytest --gpuperf` process with the plugin of `--plugin-root` (so the same script
measures two trees, e.g. main and a branch, in one device call):

  saves      `--saves` runs with --gpuperf-save, one after another; each is judged by pytest
             against the file of the saves before it, so save k's allowance is the gate's
             band after k - 1 saves (at the run's own level: 3 tests); the file is kept after
             every save.
  unchanged  runs of the same code judged against the file of 3 saves: a failure is a false
             alarm (first round and confirmed).
  drop       runs with the extra read on (`--extra` of n more floats read), judged against the
             file of 3 saves: caught when the gate says regressed (confirmed).

Judged runs go `--jobs` at a time (the GPU lock serialises their measurements; the
processes' start overlaps). Saves never overlap.

Usage (repository root; one GPU device call):
  PYTHONPATH=. python3 bench/stored_lengths.py --plugin-root . --out after.json
  PYTHONPATH=. python3 bench/stored_lengths.py --backend sim --saves 4 --unchanged-runs 2 \\
      --drop-runs 2                                               # the same path, SIMULATED
  PYTHONPATH=. python3 bench/stored_lengths.py --render after.json --markdown
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from lab import REPO_ROOT, cli
from lab.kernels import SCALE_KERNEL, SCALE_MODEL
from lab.projects import write_project
from lab.pytest_runs import NAMED_PLUGIN, gpuperf_args, plugin_env
from lab.pytest_runs import run_pytest as lab_pytest
from lab.runs import scratch
from lab.tables import table
from scipy import stats

# elements of x and y (8 bytes moved each): about 7.8, 28 and 210 us cold on an H100 (on
# 2026-11-27 1.15M, 11.4M and 57M took 7.3, 38.2 and 189 us: about 3.8 us + 3.0 us per M)
LENGTHS = {"short": 1_320_000, "mid": 8_000_000, "long": 64_000_000}
# n_extra / n of the drop runs: 9% of n more floats read (4.5% more bytes than declared;
# 4.5% of n took 0.9-1.1% more time at 38-189 us on 2026-11-27, so this is about -2%)
DEFAULT_EXTRA = 0.09

TEST_MODULE = '''\
"""Written by bench/stored_lengths.py: the user's kernel at three lengths, cold."""

import os

import numpy as np
import pytest

SIZES = {sizes!r}
EXTRA = float(os.environ.get("SCENARIO_EXTRA", "0"))


@pytest.mark.parametrize("size", list(SIZES))
def test_scale(gpu_bench, size):
    n = SIZES[size]
    n_extra = int(n * EXTRA)
    kernel = gpu_bench.kernel("scale.hip", "scale")
    x = np.random.default_rng(0).random(n, dtype=np.float32)
    dx, dy = gpu_bench.to_device(x), gpu_bench.empty(n)
    extra = gpu_bench.to_device(np.zeros(max(n_extra, 1), np.float32))
    gpu_bench(
        kernel, grid=(n + 255) // 256, block=256,
        args=(dx, dy, extra, 2.0, n, n_extra),
        bytes=8 * n, cache="cold", name="scale",
    )
    np.testing.assert_array_equal(gpu_bench.from_device(dy, np.float32, n), 2.0 * x)
'''


def run_pytest(
    options: argparse.Namespace, project: Path, args: Sequence[str], report: Path, env: Mapping
) -> dict[str, Any]:
    """One pytest process with the plugin of --plugin-root: each measurement's verdict and
    how it sampled, or the failure to make a report."""
    run = lab_pytest(
        ["-q", *NAMED_PLUGIN, *gpuperf_args(options.backend, budget=options.budget), *args],
        report, cwd=project, env=plugin_env(Path(options.plugin_root).resolve(), **env),
    )  # fmt: skip
    if run.report is None:
        return {"error": f"{run.problem}\n{run.output}"[-3000:], "wall_s": run.wall_s}
    return {"exit": run.returncode, "wall_s": run.wall_s, "results": [_result(r) for r in run.rows]}


def _result(row: Any) -> dict[str, Any]:
    """What a row says about the stored gate, and how its measurement sampled (the
    statistics its samples give besides the median)."""
    m, check = row.measurement, row.verdict.baseline
    band = check.band
    result = {
        "entry": row.test_id.split("[")[-1].rstrip("]"), "test_id": row.test_id,
        "cache": m.cache, "efficiency": m.efficiency, "time_s": m.time_s,
        "relative_ci": m.relative_ci, "board": (m.gpu.uuid if m.gpu else "") or "",
        "status": row.verdict.status, "outcome": check.outcome,
        "first_outcome": check.first_outcome or check.outcome, "delta": check.delta,
        "allowance": check.allowance, "basis": band.basis if band else "",
        "board_status": band.board_status if band else "",
        "false_alarm_rate": check.false_alarm_rate or 0.01,
        "between_added": 1.959963984540054 * (band.between_sigma if band else 0.0),
        "between_source": band.between_source if band else "",
        "between_figure": band.between_figure if band else "",
    }  # fmt: skip
    samples = np.asarray(m.samples_s or (), dtype=float)
    if samples.size >= 3:
        result.update(
            samples=int(samples.size), stopped_by=m.stopped_by,
            median_s=float(np.median(samples)), trimmed_s=float(stats.trim_mean(samples, 0.1)),
            sampled_s=float(samples.sum()),
        )  # fmt: skip
    return result


def scenario(options: argparse.Namespace) -> dict[str, Any]:
    with scratch("stored-lengths") as root:
        return _scenario(options, root)


def _scenario(options: argparse.Namespace, root: Path) -> dict[str, Any]:
    started = time.monotonic()
    project = root / "project"
    sizes = LENGTHS if options.backend != "sim" else {k: v // 16 for k, v in LENGTHS.items()}
    files = {"scale.hip": SCALE_KERNEL, "conftest.py": SCALE_MODEL}
    files["test_lengths.py"] = TEST_MODULE.format(sizes=dict(sizes))
    files[".gitignore"] = "baselines/\n__pycache__/\n"
    write_project(project, files, "the user's kernel")
    snapshots, reports = root / "snapshots", root / "reports"
    snapshots.mkdir()
    reports.mkdir()
    runs: list[dict[str, Any]] = []
    files: dict[str, str] = {}
    for number in range(1, options.saves + 1):
        if time.monotonic() - started > options.deadline:
            break
        run = run_pytest(
            options, project, ["--gpuperf-save"], reports / f"save{number}.json",
            {"GPUPERF_SIM_SEED": str(number)},
        )  # fmt: skip
        runs.append({"kind": "save", "number": number, **run})
        if "error" in run:
            raise SystemExit(f"stored_lengths: save {number} made no report:\n{run['error']}")
        target = snapshots / str(number)
        target.mkdir()
        saved = sorted((project / "baselines").glob("*.toml"))  # the device's key: h100-sxm, h200
        if len(saved) != 1:
            raise SystemExit(f"stored_lengths: save {number} wrote {saved}, not one file")
        shutil.copy(saved[0], target / saved[0].name)
        files[str(number)] = saved[0].read_text()
    against = min(3, len(files))
    jobs = [("drop", i) for i in range(options.drop_runs)]
    jobs += [("unchanged", i) for i in range(options.unchanged_runs)]
    jobs.sort(key=lambda job: job[1])  # interleaved, so a deadline cuts both kinds alike

    def judge(job: tuple[str, int]) -> dict[str, Any]:
        kind, index = job
        if time.monotonic() - started > options.deadline:
            return {"kind": kind, "number": index, "skipped": True}
        env = {"GPUPERF_SIM_SEED": f"{7 if kind == 'unchanged' else 9}{index}"}
        if kind == "drop":
            env["SCENARIO_EXTRA"] = str(options.extra)
        run = run_pytest(
            options, project, [f"--gpuperf-baseline-dir={snapshots / str(against)}"],
            reports / f"{kind}{index}.json", env,
        )  # fmt: skip
        return {"kind": kind, "number": index, "against": against, **run}

    if against:
        with ThreadPoolExecutor(max_workers=options.jobs) as pool:
            runs += [r for r in pool.map(judge, jobs) if not r.get("skipped")]
    return {
        "title": "the stored gate at three lengths (bench/stored_lengths.py)",
        "label": options.label, "backend": options.backend, "simulated": options.backend == "sim",
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "sizes": dict(sizes),
        "extra": options.extra, "budget": options.budget, "jobs": options.jobs, "runs": runs,
        "files": files, "wall_s": time.monotonic() - started,
    }  # fmt: skip


def analyse(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per entry: the allowance after k saves (save k + 1's own judgement), the scatter of the
    saves, and the judged runs' false alarms and catches."""
    runs = [r for r in document["runs"] if "results" in r]
    entries = sorted(
        {x["entry"] for r in runs for x in r["results"]},
        key=lambda e: list(LENGTHS).index(e) if e in LENGTHS else 9,
    )
    found = []
    for entry in entries:
        mine = [(r, x) for r in runs for x in r["results"] if x["entry"] == entry]
        saves = [(r, x) for r, x in mine if r["kind"] == "save"]
        row: dict[str, Any] = {"entry": entry}
        row["time_us"] = statistics.median(x["time_s"] for _, x in saves) * 1e6 if saves else 0
        effs = [x["efficiency"] for _, x in saves]
        row["save_efficiencies"] = effs
        row["allowance_by_saves"] = {
            str(r["number"] - 1): {"allowance": x["allowance"], "basis": x["basis"]}
            for r, x in saves
            if r["number"] > 1 and x["allowance"] is not None
        }
        for kind in ("unchanged", "drop"):
            judged = [x for r, x in mine if r["kind"] == kind]
            deltas = [x["delta"] for x in judged if x["delta"] is not None]
            row[kind] = {
                "runs": len(judged),
                "first": sum(x["first_outcome"] == "regressed" for x in judged),
                "failed": sum(x["outcome"] == "regressed" for x in judged),
                "deltas": deltas,
                "allowances": sorted({round(x["allowance"], 5) for x in judged if x["allowance"]}),
            }
        found.append(row)
    return found


def render(document: Mapping[str, Any], markdown: bool) -> str:
    rows = analyse(document)
    label = "SIMULATED " if document.get("simulated") else ""
    runs = document["runs"]
    count = {k: sum(1 for r in runs if r["kind"] == k) for k in ("save", "unchanged", "drop")}
    errors = [r for r in runs if "error" in r]
    boards = sorted({x["board"][:12] for r in runs for x in r.get("results", ()) if x["board"]})
    out = [
        f"{label}{document.get('label') or 'stored gate'}, {document['backend']}, "
        f"{document['started']}, board {', '.join(boards) or '?'}: {count['save']} saves, "
        f"{count['unchanged']} unchanged and {count['drop']} drop runs (+{document['extra']:.1%} "
        f"of n read), each a separate pytest process ({len(errors)} made no report); "
        f"{document['wall_s']:.0f} s",
        "",
    ]
    most = max((len(r["allowance_by_saves"]) for r in rows), default=0)
    headers = ["entry", "time", "saves' sigma", *(f"after {k}" for k in range(1, most + 1))]
    body = []
    for r in rows:
        effs = r["save_efficiencies"]
        sigma = statistics.stdev(effs) / statistics.fmean(effs) if len(effs) > 1 else 0.0
        cells = [r["entry"], f"{r['time_us']:.1f} us", f"{sigma:.2%}"]
        for k in range(1, most + 1):
            a = r["allowance_by_saves"].get(str(k))
            cells.append(f"{a['allowance']:.2%} {a['basis']}" if a else "-")
        body.append(cells)
    out += ["Allowance after k saves (pytest's own judgement of save k + 1):", ""]
    out += [table(headers, body, markdown), ""]
    headers = [
        "entry", "unchanged", "false (first / confirmed)", "deltas", "drop", "caught (confirmed)",
        "drop deltas", "allowance vs 3 saves",
    ]  # fmt: skip
    body = []
    for r in rows:
        u, d = r["unchanged"], r["drop"]
        body.append(
            [
                r["entry"], u["runs"], f"{u['first']} / {u['failed']}", _span(u["deltas"]),
                d["runs"], f"{d['failed']} of {d['runs']}", _span(d["deltas"]),
                ", ".join(f"{a:.2%}" for a in sorted(set(u["allowances"] + d["allowances"]))),
            ]
        )  # fmt: skip
    out += [table(headers, body, markdown)]
    for r in errors[:3]:
        out += ["", f"no report ({r['kind']} {r['number']}): {r['error'][-400:]}"]
    return "\n".join(out)


def _span(values: Sequence[float]) -> str:
    if not values:
        return "-"
    return f"{min(values):+.2%}..{max(values):+.2%} (median {statistics.median(values):+.2%})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = cli.parser(__doc__, backends=("cuda", "sim"))
    parser.add_argument("--plugin-root", default=str(REPO_ROOT))
    parser.add_argument("--label", default="")
    parser.add_argument("--saves", type=int, default=6)
    parser.add_argument("--unchanged-runs", type=int, default=14)
    parser.add_argument("--drop-runs", type=int, default=20)
    parser.add_argument("--extra", type=float, default=DEFAULT_EXTRA)
    parser.add_argument("--budget", default="0.3", help="--gpuperf-budget of each process")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--deadline", type=float, default=240.0, help="seconds")
    options = parser.parse_args(argv)
    print(render(cli.measured_or_rendered(options, scenario), options.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
