"""A new user's stored-baseline gate, end to end, in separate pytest processes on one board.

A throwaway git project with the user's own kernel (y = a * x, plus an optional read of an
extra buffer: real extra traffic that the declared bytes do not count) at three lengths
(>= 100 us, 20-50 us, <= 10 us on an H100), each measured cold and hot: six entries of one
baselines file. Then, each step a separate `python -m pytest --gpuperf` process:

  saves     1..8 `--gpuperf-save` runs; the file is copied after saves 1, 2, 3, 5 and 8.
  drop      runs with the extra read on (SCENARIO_EXTRA: +2.5-3% time on the long kernel),
            judged by pytest against the file of 3 saves: caught when the gate says regressed
            (first round and confirmed).
  unchanged runs of the unchanged kernel judged against the files of 3, 5 and 8 saves in
            turn: a failure is a false alarm.

Every process's measurements are also judged offline, by the gate's own check
(gate.stored.check_baseline, first round only, at the level the run used), against every
copy of the file, so the tables show each entry's allowance after 1, 2, 3, 5, 8 saves, the
entry's own scatter between processes, and the arithmetic of each band (the prior, the saves,
Student's t, the centre's factor). The saves also measure the run-to-run spread on one board
at three kernel lengths: the fit sigma(t)^2 = r^2 + (j / t)^2 per cache mode is what the
gate's prior for a first save (policy.RUN_SPREAD_MODEL) is set from.

`--perf-suite` then judges the repository's committed baselines (tests/perf against
baselines/<device>.toml) in one more process and records its board (GPU UUID), first-round
and confirmed regressions, and the between-board spread the gate added.

Usage (from the repository root; one GPU device call):
  PYTHONPATH=. python3 bench/stored_scenario.py --backend cuda --deadline 300 \\
      --out scenario.json --perf-suite
  PYTHONPATH=. python3 bench/stored_scenario.py --backend sim --saves 3 --drop-runs 2 \\
      --unchanged-runs 3                                      # the same path, SIMULATED
  PYTHONPATH=. python3 bench/stored_scenario.py --render scenario.json --markdown
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
from _common import REPO_ROOT, markdown_table, read_run, text_table, write_json

SNAPSHOTS = (1, 2, 3, 5, 8)
# elements of x (and y): 8 bytes each moved; on an H100 (about 3 TB/s cold) 64M is about
# 170 us, 12M about 32 us and 1M about 3-4 us (hot: 8 MB stays in the 50 MB L2)
SIZES = {"long": 64 << 20, "mid": 12 << 20, "short": 1 << 20}
CACHES = ("cold", "hot")
# The extra read of the "drop" runs, as a share of the elements: 0.075 reads 7.5% of n more
# floats, 3.75% more bytes than the 8 n declared.
DEFAULT_EXTRA = 0.075
DEVICE_KEY = {"cuda": "h100-sxm", "sim": "mi300x-sim"}

KERNEL = """\
#include "gpuperf.h"

// y = a * x, plus extra[i] for i < n_extra (zeros: y is unchanged): real traffic that the
// declared bytes (8 n) do not count.
// gpuperf-sim: efficiency=0.72
GPUPERF_KERNEL void scale(const float* x, float* y, const float* extra, float a, int n,
                          int n_extra) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = a * x[i];
        if (i < n_extra) v += extra[i];
        y[i] = v;
    }
}
"""

CONFTEST = '''\
"""Written by bench/stored_scenario.py: the simulated device's model of scale()."""

from pytest_gpuperf import simulate


def _traffic(args):
    x, y, extra, a, n, n_extra = args
    return 8 * int(n) + 4 * int(n_extra)


@simulate.model("scale.hip", "scale", traffic_bytes=_traffic)
def scale(args, launch):
    x, y, extra, a, n, n_extra = args
    y[:n] = a * x[:n]
'''

TEST_MODULE = '''\
"""Written by bench/stored_scenario.py: the user's kernel at three lengths, cold and hot."""

import os

import numpy as np
import pytest

SIZES = {sizes!r}
EXTRA = float(os.environ.get("SCENARIO_EXTRA", "0"))


@pytest.mark.parametrize("cache", ["cold", "hot"])
@pytest.mark.parametrize("size", list(SIZES))
def test_scale(gpu_bench, size, cache):
    n = SIZES[size]
    n_extra = int(n * EXTRA)
    kernel = gpu_bench.kernel("scale.hip", "scale")
    x = np.random.default_rng(0).random(n, dtype=np.float32)
    dx, dy = gpu_bench.to_device(x), gpu_bench.empty(n)
    extra = gpu_bench.to_device(np.zeros(max(n_extra, 1), np.float32))
    gpu_bench(
        kernel, grid=(n + 255) // 256, block=256,
        args=(dx, dy, extra, 2.0, n, n_extra),
        bytes=8 * n, cache=cache, name="scale",
    )
    np.testing.assert_array_equal(gpu_bench.from_device(dy, np.float32, n), 2.0 * x)
'''


def git(directory: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=scenario", "-c", "user.email=scenario@localhost", *args],
        cwd=directory,
        check=True,
        capture_output=True,
    )


def write_project(
    directory: Path,
    sizes: Mapping[str, int],
    test_module: str = TEST_MODULE,
    test_file: str = "test_scenario.py",
) -> None:
    """The user's git project: the kernel, its simulated model and `test_module` at `sizes`."""
    directory.mkdir(parents=True)
    (directory / "scale.hip").write_text(KERNEL)
    (directory / "conftest.py").write_text(CONFTEST)
    (directory / test_file).write_text(test_module.format(sizes=dict(sizes)))
    (directory / "pytest.ini").write_text("[pytest]\n")
    (directory / ".gitignore").write_text("baselines/\nreports/\nsnapshots/\n__pycache__/\n")
    git(directory, "init", "-q")
    git(directory, "add", "-A")
    git(directory, "commit", "-qm", "the user's kernel")


def run_pytest(
    project: Path,
    backend: str,
    budget: str,
    args: Sequence[str],
    report: Path,
    env: Mapping,
    plugin_root: Path = REPO_ROOT,
) -> dict[str, Any]:
    """One pytest process with the plugin of `plugin_root`; its JSON report (or the failure
    to make one)."""
    # the repository's own root conftest loads the plugin; a throwaway project names it
    plugin = [] if project == REPO_ROOT else ["-p", "pytest_gpuperf.plugin"]
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin, "--gpuperf",
        f"--gpuperf-backend={backend}", f"--gpuperf-budget={budget}",
        f"--gpuperf-json={report}", *args,
    ]  # fmt: skip
    path = os.pathsep.join(filter(None, [str(plugin_root), os.environ.get("PYTHONPATH", "")]))
    environment = {**os.environ, **env, "PYTHONPATH": path}
    if plugin:  # named with -p: an installed entry point must not register it a second time
        environment["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    select = env.get("SCENARIO_SELECT", "")
    if select:
        command += ["-k", select]
    started = time.monotonic()
    done = subprocess.run(
        command, cwd=project, capture_output=True, text=True, env=environment, timeout=300
    )
    wall_s = time.monotonic() - started
    if not report.exists():
        return {"error": (done.stdout + done.stderr)[-3000:], "wall_s": wall_s}
    document = json.loads(report.read_text())
    return {"exit": done.returncode, "wall_s": wall_s, "results": _results(document)}


def _results(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for result in document.get("results", ()):
        m = result["measurement"]
        check = result["verdict"]["baseline"]
        band = check.get("band") or {}
        rows.append(
            {
                "entry": f"{result['test_id'].split('[')[-1].rstrip(']')}",
                "test_id": result["test_id"],
                "cache": m["cache"],
                "efficiency": m["efficiency"],
                "time_s": m["time_s"],
                "relative_ci": _relative_ci(m),
                "board": (m.get("gpu") or {}).get("uuid") or "",
                "status": result["verdict"]["status"],
                "outcome": check.get("outcome"),
                "first_outcome": check.get("first_outcome") or check.get("outcome"),
                "delta": check.get("delta"),
                "allowance": check.get("allowance"),
                "false_alarm_rate": check.get("false_alarm_rate") or 0.01,
                "basis": band.get("basis", ""),
                "board_status": band.get("board_status", ""),
                "between_added": 1.959963984540054 * (band.get("between_sigma") or 0.0),
                "between_source": band.get("between_source", ""),
                "between_figure": band.get("between_figure", ""),
            }
        )
    return rows


def _relative_ci(m: Mapping[str, Any]) -> float:
    low, high = m["time_ci_s"]
    return (high - low) / 2 / m["time_s"]


def scenario(options: argparse.Namespace) -> dict[str, Any]:
    """The whole scenario in a scratch folder that is removed however it ends."""
    root = Path(tempfile.mkdtemp(prefix="stored-scenario-"))
    try:
        return _scenario(options, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _scenario(options: argparse.Namespace, root: Path) -> dict[str, Any]:
    started = time.monotonic()
    project = root / "project"
    sizes = dict(SIZES) if options.backend != "sim" else {k: v // 16 for k, v in SIZES.items()}
    write_project(project, sizes)
    key = DEVICE_KEY[options.backend]
    baselines, snapshots, reports = project / "baselines", root / "snapshots", root / "reports"
    snapshots.mkdir()
    reports.mkdir()
    runs: list[dict[str, Any]] = []

    def over() -> bool:
        return time.monotonic() - started > options.deadline

    for number in range(1, options.saves + 1):
        if over():
            break
        run = run_pytest(
            project, options.backend, options.budget, ["--gpuperf-save"],
            reports / f"save{number}.json",
            {"GPUPERF_SIM_SEED": str(number), "SCENARIO_SELECT": options.select},
        )  # fmt: skip
        runs.append({"kind": "save", "number": number, **run})
        if "error" in run:  # nothing to judge against: say why instead of a missing file
            raise SystemExit(f"stored_scenario: save {number} made no report:\n{run['error']}")
        if number in SNAPSHOTS:
            target = snapshots / str(number)
            target.mkdir()
            shutil.copy(baselines / f"{key}.toml", target / f"{key}.toml")
    saved = sorted(int(p.name) for p in snapshots.iterdir())
    judge_on = [s for s in (3, 5, 8) if s in saved] or saved[-1:]
    for index in range(max(options.drop_runs, options.unchanged_runs // 2 + 1)):
        if over():
            break
        if index < options.drop_runs and 3 in saved:
            run = run_pytest(
                project, options.backend, options.budget,
                [f"--gpuperf-baseline-dir={snapshots / '3'}"],
                reports / f"drop{index}.json",
                {
                    "SCENARIO_EXTRA": str(options.extra),
                    "GPUPERF_SIM_SEED": f"9{index}",
                    "SCENARIO_SELECT": options.select,
                },
            )  # fmt: skip
            runs.append({"kind": "drop", "against": 3, "number": index, **run})
        for _ in range(2):
            count = sum(1 for r in runs if r["kind"] == "unchanged")
            if count >= options.unchanged_runs or over():
                break
            against = judge_on[count % len(judge_on)]
            run = run_pytest(
                project, options.backend, options.budget,
                [f"--gpuperf-baseline-dir={snapshots / str(against)}"],
                reports / f"same{count}.json",
                {"GPUPERF_SIM_SEED": f"7{count}", "SCENARIO_SELECT": options.select},
            )  # fmt: skip
            runs.append({"kind": "unchanged", "against": against, "number": count, **run})
    files = {str(s): (snapshots / str(s) / f"{key}.toml").read_text() for s in saved}
    document = {
        "title": "stored-baseline scenario (bench/stored_scenario.py)",
        "backend": options.backend,
        "simulated": options.backend == "sim",
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "sizes": sizes,
        "extra": options.extra,
        "budget": options.budget,
        "deadline_s": options.deadline,
        "select": options.select,
        "runs": runs,
        "files": files,
        "device_key": key,
    }
    if options.perf_suite and not over():
        document["perf_suite"] = perf_suite(options, root / "perf.json")
    document["wall_s"] = time.monotonic() - started
    return document


def perf_suite(options: argparse.Namespace, report: Path) -> dict[str, Any]:
    """The committed baselines judged on this board: the repository's tests/perf."""
    run = run_pytest(REPO_ROOT, options.backend, options.perf_budget, ["tests/perf"], report, {})
    return run


# -- analysis: the gate's own check, offline, against every copy of the file -------------------


def analyse(document: Mapping[str, Any]) -> dict[str, Any]:
    from pytest_gpuperf.baseline.schema import parse
    from pytest_gpuperf.gate.noise import stored_band
    from pytest_gpuperf.gate.stored import check_baseline

    key = document["device_key"]
    files = {int(n): parse(text, key)[1] for n, text in document["files"].items()}
    runs = [r for r in document["runs"] if "results" in r]
    saves = [r for r in runs if r["kind"] == "save"]
    judged = [r for r in runs if r["kind"] != "save"]
    entries = sorted({row["test_id"] for r in saves for row in r["results"]})
    table = []
    for test_id in entries:
        row: dict[str, Any] = {"test_id": test_id}
        effs = [x["efficiency"] for r in saves for x in r["results"] if x["test_id"] == test_id]
        times = [x["time_s"] for r in saves for x in r["results"] if x["test_id"] == test_id]
        row["time_us"] = statistics.median(times) * 1e6
        row["cache"] = next(
            x["cache"] for r in saves for x in r["results"] if x["test_id"] == test_id
        )
        row["scatter"] = statistics.stdev(math.log(e) for e in effs) if len(effs) > 1 else 0.0
        for n, entries_of in sorted(files.items()):
            entry = next((e for k, e in entries_of.items() if k[0] == test_id), None)
            if entry is None:
                continue
            board = entry.latest.board if entry.latest else ""
            band = stored_band(entry.to_ref("", board=board), 0.0, false_alarm_rate=0.01 / 6)
            row[f"allow_{n}"] = max(0.01, band.noise)
            row[f"band_{n}"] = {
                "noise": band.noise,
                "sigma": band.sigma,
                "prior_sigma": band.prior_sigma,
                "prior_df": band.prior_df,
                "history_sigma": band.history_sigma,
                "history_df": band.history_df,
                "df": band.df,
                "quantile": band.quantile,
                "centre_factor": band.centre_factor,
                "basis": band.basis,
            }
        for kind in ("unchanged", "drop"):
            mine = [x for r in judged if r["kind"] == kind for x in r["results"]]
            mine = [x for x in mine if x["test_id"] == test_id]
            row[f"{kind}_runs"] = len(mine)
            row[f"{kind}_first"] = sum(x["first_outcome"] == "regressed" for x in mine)
            row[f"{kind}_failed"] = sum(x["outcome"] == "regressed" for x in mine)
            deltas = [x["delta"] for x in mine if x["delta"] is not None]
            row[f"{kind}_median_delta"] = statistics.median(deltas) if deltas else None
            # offline, first round only, against each copy of the file
            for n, entries_of in sorted(files.items()):
                entry = next((e for k, e in entries_of.items() if k[0] == test_id), None)
                if entry is None:
                    continue
                caught = 0
                for x in mine:
                    check = check_baseline(
                        _as_measurement(x, entry),
                        entry.to_ref("", board=x["board"]),
                        tolerance=0.01,
                        false_alarm_rate=x["false_alarm_rate"],
                    )
                    caught += check.outcome == "regressed"
                row[f"{kind}_offline_{n}"] = caught
        table.append(row)
    return {"entries": table, "prior_fit": fit_prior(table)}


def _as_measurement(x: Mapping[str, Any], entry: Any) -> Any:
    from pytest_gpuperf.engine.results import GpuIdentity, Measurement

    peak_bps = entry.bandwidth_bps / entry.efficiency
    time_s = entry.bytes_moved / (x["efficiency"] * peak_bps)
    ci = x["relative_ci"]
    m = Measurement(
        name=entry.name, kernel=entry.kernel, cache=entry.cache, bytes_moved=entry.bytes_moved,
        time_s=time_s, time_ci_s=(time_s * (1 - ci), time_s * (1 + ci)), samples_s=(time_s,),
        peak_bps=peak_bps, device_key="", device_name="", backend="cuda", simulated=False,
        queue_method="",
    )  # fmt: skip
    return replace(m, gpu=GpuIdentity(0, uuid=x["board"]))


def fit_prior(table: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """sigma(t)^2 = r^2 + (j / t)^2 per cache mode, least squares over the entries' scatter
    between save processes (each a sample sd of up to 8 saves: a rough figure)."""
    import numpy as np

    fits = {}
    for cache in CACHES:
        rows = [r for r in table if r["cache"] == cache and r["scatter"] > 0]
        if len(rows) < 2:
            continue
        t = np.array([r["time_us"] * 1e-6 for r in rows])
        y = np.array([r["scatter"] ** 2 for r in rows])
        design = np.stack([np.ones_like(t), 1.0 / t**2], axis=1)
        (r2, j2), *_ = np.linalg.lstsq(design, y, rcond=None)
        fits[cache] = {
            "relative_sigma": math.sqrt(max(r2, 0.0)),
            "jitter_sigma_s": math.sqrt(max(j2, 0.0)),
            "points": [(r["time_us"], r["scatter"]) for r in rows],
        }
    return fits


# -- rendering ---------------------------------------------------------------------------------


def render(document: Mapping[str, Any], markdown: bool) -> str:
    analysis = document.get("analysis") or analyse(document)
    table = markdown_table if markdown else text_table
    label = "SIMULATED " if document.get("simulated") else ""
    runs = document["runs"]
    kinds = {k: sum(1 for r in runs if r["kind"] == k) for k in ("save", "drop", "unchanged")}
    errors = sum(1 for r in runs if "error" in r)
    out = [
        f"{label}stored-baseline scenario, {document['backend']}, {document['started']}: "
        f"{kinds['save']} saves, {kinds['drop']} runs with the extra read "
        f"({document['extra']:.1%} of n), {kinds['unchanged']} unchanged runs, each a separate "
        f"pytest process ({errors} failed to report); {document['wall_s']:.0f} s",
        "",
        "Allowance after K saves (the gate's band at a 6-test run's level, at least the 1% "
        "tolerance), the entry's own scatter between save processes (sigma of log efficiency):",
        "",
    ]
    headers = ["entry", "time", "scatter", *(f"{n} saves" for n in SNAPSHOTS)]
    rows = []
    for r in analysis["entries"]:
        cells = [r["test_id"].split("::")[-1], f"{r['time_us']:.1f} us", f"{r['scatter']:.3%}"]
        cells += [f"{r[f'allow_{n}']:.2%}" if f"allow_{n}" in r else "-" for n in SNAPSHOTS]
        rows.append(cells)
    out += [table(headers, rows), ""]
    out.append("Judged runs (pytest's own verdict: first round / confirmed regressions):")
    out.append("")
    headers = [
        "entry", "unchanged runs", "first", "failed", "median delta", "drop runs", "first",
        "caught", "median delta (drop)",
    ]  # fmt: skip
    rows = []
    for r in analysis["entries"]:
        rows.append(
            [
                r["test_id"].split("::")[-1],
                r["unchanged_runs"],
                r["unchanged_first"],
                r["unchanged_failed"],
                _pct(r["unchanged_median_delta"]),
                r["drop_runs"],
                r["drop_first"],
                r["drop_failed"],
                _pct(r["drop_median_delta"]),
            ]
        )
    out += [table(headers, rows), ""]
    out.append("The band's arithmetic after 5 saves (noise = t(df) x sigma x centre factor):")
    out.append("")
    for r in analysis["entries"]:
        band = r.get("band_5")
        if not band:
            continue
        out.append(
            f"- {r['test_id'].split('::')[-1]}: sigma^2 = ({band['prior_df']:.0f} x "
            f"{band['prior_sigma']:.3%}^2 + {band['history_df']} x {band['history_sigma']:.3%}^2)"
            f" / {band['df']:.0f} -> sigma {band['sigma']:.3%}; t({band['df']:.0f}) "
            f"{band['quantile']:.2f} x {band['sigma']:.3%} x {band['centre_factor']:.3f} = "
            f"{band['noise']:.2%} (basis {band['basis']})"
        )
    fits = analysis.get("prior_fit") or {}
    if fits:
        out += ["", "Run-to-run spread on one board, fitted sigma(t)^2 = r^2 + (j / t)^2:"]
        for cache, fit in fits.items():
            out.append(
                f"- {cache}: r {fit['relative_sigma']:.3%}, j {fit['jitter_sigma_s'] * 1e9:.0f} ns"
            )
    perf = document.get("perf_suite")
    if perf:
        out += ["", perf_text(perf)]
    return "\n".join(out)


def perf_text(perf: Mapping[str, Any]) -> str:
    if "results" not in perf:
        return f"committed baselines: no report ({perf.get('error', '')[-300:]})"
    results = perf["results"]
    boards = sorted({x["board"] for x in results if x["board"]})
    first = [x for x in results if x["first_outcome"] == "regressed"]
    failed = [x for x in results if x["outcome"] == "regressed"]
    added = [x["between_added"] for x in results if x["between_added"] > 0]
    statuses = sorted({x["board_status"] for x in results if x["board_status"]})
    lines = [
        f"Committed baselines judged on board {', '.join(boards) or '?'}: {len(results)} "
        f"measurements, {len(first)} first-round regressions, {len(failed)} confirmed; board "
        f"status {', '.join(statuses) or '-'}; between-board +-"
        f"{min(added, default=0):.2%}..{max(added, default=0):.2%} added"
    ]
    for x in first:
        lines.append(
            f"  first round regressed: {x['test_id']} [{x['cache']}] {_pct(x['delta'])} vs "
            f"-{x['allowance']:.2%}; final {x['outcome']}"
        )
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.2%}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="cuda", choices=("cuda", "sim"))
    parser.add_argument("--saves", type=int, default=8)
    parser.add_argument("--drop-runs", type=int, default=20)
    parser.add_argument("--unchanged-runs", type=int, default=42)
    parser.add_argument("--extra", type=float, default=DEFAULT_EXTRA)
    parser.add_argument("--budget", default="0.3", help="--gpuperf-budget of each process")
    parser.add_argument("--perf-budget", default="0.5", help="--gpuperf-budget of tests/perf")
    parser.add_argument("--deadline", type=float, default=480.0, help="seconds")
    parser.add_argument("--perf-suite", action="store_true")
    parser.add_argument("-k", dest="select", default="", help="pytest -k for every process")
    parser.add_argument("--perf-only", action="store_true", help="only the committed baselines")
    parser.add_argument("--out")
    parser.add_argument("--render")
    parser.add_argument("--markdown", action="store_true")
    options = parser.parse_args(argv)
    if options.render:
        document = read_run(options.render)
    elif options.perf_only:
        root = Path(tempfile.mkdtemp(prefix="stored-scenario-"))
        document = {
            "backend": options.backend,
            "perf_suite": perf_suite(options, root / "perf.json"),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        shutil.rmtree(root, ignore_errors=True)
        write_json(options.out, document)
        print(perf_text(document["perf_suite"]))
        return 0
    else:
        document = scenario(options)
        document["analysis"] = analyse(document)
        write_json(options.out, document)
    print(render(document, options.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
