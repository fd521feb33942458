"""Why gpu_bench and not pytest-benchmark? One user kernel timed both ways, in separate pytest
processes, unchanged and with 3% more memory traffic, at a large and a small size.

pytest-benchmark's way, as users time a GPU kernel with it today: `benchmark(launch)` where
the launch is followed by a device synchronize, default settings (rounds until 1 s), the
median of its rounds; a pull request compares the head process's median with the base
process's and fails above a threshold (`--benchmark-compare-fail=median:T%`, scored here for
T = 1% and 3%). gpu_bench's way: `pytest --gpuperf --gpuperf-compare=<base>`, head and base
interleaved in one process (the gate's own verdict: the test fails only on a confirmed
regression). The kernel's own time comes from the library (`pytest_gpuperf.session.api`), event
timing of back-to-back launches with the queue kept ahead of the host (hot caches, as
pytest-benchmark's rounds find them) and of cold launches (as gpu_bench measures).

The kernel is vector_add_more (kernels/bench_variants.hip): a vector add that can read
EXTRA_PERMILLE per mille more bytes. A throwaway git project commits it unchanged (the base);
each trial is three processes: the base itself, the unchanged head and the head with 3% more
traffic. pytest-benchmark's false alarms are (base, unchanged) pairs whose median rose past
the threshold, its detections (base, +3%) pairs that did; gpu_bench's false alarms are failed
tests of unchanged code (the base and unchanged processes, timed with
--gpuperf-compare-force), its detections failed tests of the +3% head.

Usage (from the repository root; the CUDA backend on an NVIDIA GPU, or `sim` as a smoke test):
  PYTHONPATH=. python3 bench/vs_pytest_benchmark.py --backend cuda --deadline 150 --out vs.json
  PYTHONPATH=. python3 bench/vs_pytest_benchmark.py --render vs.json --update-readme
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lab import REPO_ROOT, cli, projects
from lab.children import run as run_command
from lab.devices import device_name
from lab.kernels import BLOCK, KERNEL, extra_floats, kernel_source, vector_add_more_model
from lab.pytest_runs import NAMED_PLUGIN, gpuperf_args, plugin_env, run_pytest
from lab.runs import scratch

SIZES = {"large": 32 * 1024 * 1024, "small": 1024 * 1024}  # elements: 384 MiB / 12 MiB moved
MORE_PERMILLE = 30  # +3% bytes read
THRESHOLDS = (0.01, 0.03)  # pytest-benchmark's --benchmark-compare-fail=median:T
ROLES = ("base", "same", "more")
README = REPO_ROOT / "README.md"
BEGIN, END = "<!-- vs-pytest-benchmark: begin -->", "<!-- vs-pytest-benchmark: end -->"

TEST_MODULE = '''\
"""Written by bench/vs_pytest_benchmark.py: one kernel per size, timed by pytest-benchmark
(launch + synchronize) and by gpu_bench (cold caches, A/B against the base commit)."""

import numpy as np
import pytest

SIZES = {sizes!r}
EXTRA = {extra!r}
BLOCK = {block}


def _buffers(gpu_bench, size):
    n = SIZES[size]
    rng = np.random.default_rng(0)
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    extra = gpu_bench.to_device(np.zeros(EXTRA[size], np.float32))
    args = (gpu_bench.to_device(a), gpu_bench.to_device(b), gpu_bench.empty(n), extra, n)
    return gpu_bench.kernel(size + ".hip", "{kernel}"), args, a + b


@pytest.mark.parametrize("size", list(SIZES))
def test_pytest_benchmark(benchmark, gpu_bench, size):
    kernel, args, expected = _buffers(gpu_bench, size)
    grid = (SIZES[size] + BLOCK - 1) // BLOCK
    benchmark(gpu_bench.launch, kernel, grid=grid, block=BLOCK, args=args)  # launch + sync
    np.testing.assert_array_equal(gpu_bench.from_device(args[2], np.float32, SIZES[size]), expected)


@pytest.mark.parametrize("size", list(SIZES))
def test_gpu_bench(gpu_bench, size):
    kernel, args, expected = _buffers(gpu_bench, size)
    grid = (SIZES[size] + BLOCK - 1) // BLOCK
    gpu_bench(kernel, grid=grid, block=BLOCK, args=args, bytes=12 * SIZES[size], name=size)
    np.testing.assert_array_equal(gpu_bench.from_device(args[2], np.float32, SIZES[size]), expected)
'''


def write_project(directory: Path) -> None:
    """The base committed (each size's file the plain vector add); heads are written later."""
    extra = {size: max(1, extra_floats(n, MORE_PERMILLE)) for size, n in SIZES.items()}
    files = {f"{size}.hip": kernel_source(0) for size in SIZES}
    files["conftest.py"] = vector_add_more_model()
    files["test_vs.py"] = TEST_MODULE.format(sizes=SIZES, extra=extra, block=BLOCK, kernel=KERNEL)
    projects.write_project(directory, files, "base: the plain vector add")


def set_head(directory: Path, role: str) -> None:
    """The work tree as a pull request of this role leaves it (base: no change at all)."""
    permille = MORE_PERMILLE if role == "more" else 0
    for size in SIZES:
        (directory / f"{size}.hip").write_text(kernel_source(permille))


def run_process(
    directory: Path, backend: str, role: str, index: int, cache: Path
) -> dict[str, Any]:
    """One pytest process: what pytest-benchmark reported and what gpu_bench decided."""
    set_head(directory, role)
    benchmark_json = directory.parent / f"benchmark-{index}.json"
    args = ["-q", *NAMED_PLUGIN, "-p", "pytest_benchmark.plugin", "--gpuperf-compare=HEAD",
            "--gpuperf-compare-force", f"--benchmark-json={benchmark_json}",
            *gpuperf_args(backend, require=True)]  # fmt: skip
    # a pytest (or xdist worker) running this script must not pass its own variables down
    env = plugin_env(inherit=False, GPUPERF_CACHE_DIR=str(cache), GPUPERF_SIM_SEED=str(index + 1))
    run = run_pytest(args, directory.parent / f"gpuperf-{index}.json", cwd=directory, env=env)
    record: dict[str, Any] = {"role": role, "index": index, "exit": run.returncode}
    record["wall_s"] = round(run.wall_s, 2)
    if run.report is None or not benchmark_json.is_file():
        record["error"] = f"{run.problem}\n{run.output}"[-3000:]
        return record
    record["pytest_benchmark"] = {
        re.search(r"\[(\w+)\]", b["name"]).group(1): {  # type: ignore[union-attr]
            "median_s": b["stats"]["median"],
            "min_s": b["stats"]["min"],
            "rounds": b["stats"]["rounds"],
        }
        for b in json.loads(benchmark_json.read_text())["benchmarks"]
    }
    record["gpu_bench"] = {}
    for row in run.rows:
        comparison = row.verdict.comparison
        record["gpu_bench"][row.measurement.name] = {
            "time_s": row.measurement.time_s,
            "test_outcome": row.test_outcome,
            "state": comparison.state if comparison is not None else "",
            "ratio": comparison.ratio if comparison is not None else None,
        }
    return record


OWN_TIME_CHILD = """
import json, sys
import numpy as np
from pytest_gpuperf.session.api import open_device
sys.path.insert(0, {bench!r})
from lab.kernels import BLOCK, KERNEL
sizes, extra, project, backend = {sizes!r}, {extra!r}, {project!r}, {backend!r}
with open_device(backend) as device:
    out = {{}}
    for size, n in sizes.items():
        kernel = device.kernel(project + "/" + size + ".hip", KERNEL)
        a = device.to_device(np.ones(n, np.float32))
        b = device.to_device(np.ones(n, np.float32))
        args = (a, b, device.empty(n), device.to_device(np.zeros(extra[size], np.float32)), n)
        grid = (n + BLOCK - 1) // BLOCK
        out[size] = {{
            cache: device.measure(
                kernel, grid=grid, block=BLOCK, args=args, bytes=12 * n, cache=cache, budget_s=1.0
            ).time_s
            for cache in ("hot", "cold")
        }}
    print(json.dumps(out))
"""


def kernel_own_times(directory: Path, backend: str, cache: Path) -> dict[str, dict[str, float]]:
    """The unchanged kernel's own time per size, hot and cold, from the library's event
    timing (one more separate process)."""
    set_head(directory, "base")
    extra = {size: max(1, extra_floats(n, MORE_PERMILLE)) for size, n in SIZES.items()}
    code = OWN_TIME_CHILD.format(
        bench=str(Path(__file__).resolve().parent),
        sizes=SIZES,
        extra=extra,
        project=str(directory),
        backend=backend,
    )
    env = plugin_env(inherit=False, GPUPERF_CACHE_DIR=str(cache))
    done = run_command([sys.executable, "-c", code], env=env)
    if done.returncode != 0:
        raise SystemExit(f"the kernel's own time: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- scoring ---------------------------------------------------------------------------------


def score(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per size: pytest-benchmark's false alarms and detections at each threshold (pairs of
    a trial's base and head processes), gpu_bench's (its tests' outcomes), and the medians."""
    by_trial: dict[int, dict[str, Mapping[str, Any]]] = {}
    for record in records:
        if "error" not in record:
            by_trial.setdefault(record["index"] // len(ROLES), {})[record["role"]] = record
    ok = [r for r in records if "error" not in r]
    sizes: dict[str, Any] = {}
    for size in SIZES:
        row: dict[str, Any] = {}
        for threshold in THRESHOLDS:
            alarms = detections = pairs = 0
            for trial in by_trial.values():
                if not all(role in trial for role in ROLES):
                    continue
                limit = _pb_median(trial["base"], size) * (1 + threshold)
                pairs += 1
                alarms += _pb_median(trial["same"], size) > limit
                detections += _pb_median(trial["more"], size) > limit
            row[f"pb_{threshold:g}"] = {"alarms": alarms, "detections": detections, "of": pairs}
        unchanged = [r["gpu_bench"][size] for r in ok if r["role"] in ("base", "same")]
        slower = [r["gpu_bench"][size] for r in ok if r["role"] == "more"]
        row["gpu_bench"] = {
            "alarms": sum(m["test_outcome"] == "failed" for m in unchanged),
            "unchanged": len(unchanged),
            "detections": sum(m["test_outcome"] == "failed" for m in slower),
            "more": len(slower),
            "inconclusive": sum(m["state"] == "inconclusive" for m in unchanged + slower),
            "more_ratio": _median([m["ratio"] for m in slower if m["ratio"]]),
        }
        row["pb_median_s"] = _median([_pb_median(r, size) for r in ok if r["role"] != "more"])
        both = [t for t in by_trial.values() if "more" in t and "base" in t]
        row["pb_more_ratio"] = _median(
            [_pb_median(t["more"], size) / _pb_median(t["base"], size) for t in both]
        )
        row["gpu_bench_median_s"] = _median(
            [r["gpu_bench"][size]["time_s"] for r in ok if r["role"] != "more"]
        )
        sizes[size] = row
    return sizes


def _pb_median(record: Mapping[str, Any], size: str) -> float:
    """The median pytest-benchmark reported for `size` in one process's record."""
    return record["pytest_benchmark"][size]["median_s"]


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _us(time_s: float | None) -> str:
    return "—" if time_s is None else f"{time_s * 1e6:.1f} µs"


def render(document: Mapping[str, Any]) -> str:
    """The README's table: per size and tool, the time it reports against the kernel's own,
    its false alarms on unchanged code and its detections of +3% traffic."""
    scored, own = document["scored"], document["own_time_s"]
    lines = [
        f"`bench/vs_pytest_benchmark.py --backend {document['backend']}` on "
        f"{document['device']}, {document['date']}: {document['trials']} trials of three "
        "separate pytest processes (the base, the unchanged head, the head reading 3% more "
        "bytes); the kernel's own time is the library's event timing of the unchanged "
        "kernel, hot (as pytest-benchmark's rounds find the caches) / cold.",
        "",
        "| size | kernel's own time (hot / cold) | tool | time it reports | "
        "unchanged flagged | +3% traffic flagged |",
        "|---|---|---|---|---|---|",
    ]
    for size, elements in SIZES.items():
        row, kernel = scored[size], own[size]
        label = f"{size} ({elements * 12 // 2**20} MiB)"
        own_text = f"{_us(kernel['hot'])} / {_us(kernel['cold'])}"
        for threshold in THRESHOLDS:
            pb = row[f"pb_{threshold:g}"]
            lines.append(
                f"| {label} | {own_text} | pytest-benchmark, `median:{threshold:.0%}` | "
                f"{_us(row['pb_median_s'])} (launch + sync) | {pb['alarms']} of {pb['of']} | "
                f"{pb['detections']} of {pb['of']} |"
            )
        gb = row["gpu_bench"]
        lines.append(
            f"| {label} | {own_text} | gpu_bench, `--gpuperf-compare` | "
            f"{_us(row['gpu_bench_median_s'])} (cold) | {gb['alarms']} of {gb['unchanged']} | "
            f"{gb['detections']} of {gb['more']} |"
        )
    lines += [
        "",
        "The +3% head's time over the base's, medians: "
        + "; ".join(
            f"{size}: pytest-benchmark {_ratio(scored[size]['pb_more_ratio'])}, "
            f"gpu_bench {_ratio(scored[size]['gpu_bench']['more_ratio'])}"
            for size in SIZES
        )
        + ".",
    ]
    return "\n".join(lines)


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{value - 1:+.2%}"


def update_readme(table: str) -> None:
    text = README.read_text()
    if BEGIN not in text:
        raise SystemExit(f"README.md has no {BEGIN} ... {END} block")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    README.write_text(f"{head}{BEGIN}\n{table}\n{END}{tail}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = cli.parser(__doc__, markdown=False)
    parser.add_argument("--trials", type=int, default=100, help="at most this many trials")
    parser.add_argument("--deadline", type=float, default=150.0, help="seconds for trials")
    parser.add_argument("--update-readme", action="store_true", help="write the table there")
    options = parser.parse_args(argv)
    document = cli.measured_or_rendered(options, lambda o: run(o.backend, o.trials, o.deadline))
    table = render(document)
    print(table)
    if options.update_readme:
        update_readme(table)
    return 0


def run(backend: str, trials: int, deadline_s: float) -> dict[str, Any]:
    started = time.monotonic()
    with scratch("gpuperf-vs-pb") as work:
        project, cache = work / "project", work / "cache"
        write_project(project)
        own = kernel_own_times(project, backend, cache)
        records: list[dict[str, Any]] = []
        index = 0
        for _trial in range(trials):
            if records and time.monotonic() - started > deadline_s:
                break
            for role in ROLES:
                record = run_process(project, backend, role, index, cache)
                index += 1
                records.append(record)
                print(json.dumps({k: v for k, v in record.items() if k != "error"}), flush=True)
                if "error" in record:
                    print(record["error"], file=sys.stderr)
        done_trials = index // len(ROLES)
        return {
            "backend": backend,
            "device": device_name(backend),
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
            "trials": done_trials,
            "own_time_s": own,
            "records": records,
            "scored": score(records),
        }


if __name__ == "__main__":
    sys.exit(main())
