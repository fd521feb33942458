"""Where the README's main job spends its time: wall, pytest's session, the GPU lock, a profile.

The main job (`python3 -m pytest --gpuperf --gpuperf-backend=hip,cuda,sim tests/perf`, as the
README prints it) is run as separate processes from the repository root:

  warm      once, untimed: byte-compiles the tree and fills the compiled-kernel cache, so
            the timed runs see what a CI runner sees from its second job on.
  serial    timed: wall time of the process, pytest's own session time (the "in 12.34s" of
            its last line), the GPU-lock time (the JSON report's timing.gpu_lock_held_s:
            what the process spent holding the GPU, i.e. measuring) and every measurement's
            efficiency with the stored baseline's allowance for it.
  profile   the serial run again under cProfile (`-m cProfile -o`), its top entries by
            cumulative and by own time; the .prof file is kept for snakeviz / pstats.
  xdist     the same with `-n 2` (two workers share the one GPU through the GPU lock).
  fixture   what `gpu_bench` costs a user's test with NumPy inputs, per call, beyond the
            user's own code: a throwaway project of K tests (NumPy inputs, to_device, one
            measured launch of a small kernel, from_device, assert_allclose) run with K = 1
            and K = FIXTURE_TESTS; per call = (the difference in session time - in GPU-lock
            time - in the time the tests spent in their own NumPy code) / (K - 1).

Python writes bytecode in every child (PYTHONDONTWRITEBYTECODE is dropped: an image that
sets it recompiles every module, pytest's assertion rewrites included, in every process).

`--compare BEFORE.json AFTER.json` puts two runs' efficiencies side by side with the band
each measurement's stored baseline allows (the change under test must not move what is
measured), and their times.

Usage (on the GPU machine, from the repository root):
  PYTHONPATH=. python3 bench/main_job.py --out measured/ --label before
  python3 bench/main_job.py --compare measured/main-job-before.json measured/main-job-after.json
"""

from __future__ import annotations

import argparse
import io
import os
import pstats
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lab import REPO_ROOT, cli
from lab.projects import write_files
from lab.pytest_runs import plugin_env, run_pytest
from lab.runs import read_run, write_json
from lab.tables import table

MAIN_JOB = ("--gpuperf", "--gpuperf-backend=hip,cuda,sim", "tests/perf")
TOP = 25
FIXTURE_TESTS = 41
USER_KERNEL = """\
#include "gpuperf.h"

GPUPERF_KERNEL void scale(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
"""
USER_CONFTEST = """\
from pytest_gpuperf import simulate  # the simulated device's model, for a run without a GPU


@simulate.model("scale.hip", "scale")
def scale(args, launch):
    x, y, a, n = args
    y[:n] = a * x[:n]
"""
USER_TEST = """\
import os
import time

import numpy as np
import pytest

N = 1 << 20  # 8 MiB moved: a ~5 us kernel on an H100


@pytest.mark.parametrize("index", range(int(os.environ["MAIN_JOB_TESTS"])))
def test_user(gpu_bench, index):
    started = time.perf_counter()
    x = np.random.default_rng(index).random(N, dtype=np.float32)
    own_s = time.perf_counter() - started
    kernel = gpu_bench.kernel("scale.hip", "scale")
    dx, dy = gpu_bench.to_device(x), gpu_bench.empty(N)
    gpu_bench(kernel, grid=N // 256, block=256, args=(dx, dy, 2.0, N), reads=(x,), writes=(x,))
    y = gpu_bench.from_device(dy, np.float32, N)
    started = time.perf_counter()
    np.testing.assert_allclose(y, 2 * x, rtol=1e-6)
    own_s += time.perf_counter() - started
    with open(os.environ["MAIN_JOB_OWN"], "a") as out:
        out.write(f"{own_s}\\n")
"""


def run_job(
    report: Path,
    extra: Sequence[str] = (),
    profile: Path | None = None,
    timeout_s: float = 280,
    job: Sequence[str] = MAIN_JOB,
    cwd: Path = REPO_ROOT,
    env: Mapping[str, str] | None = None,
    root: Path = REPO_ROOT,
) -> dict[str, Any]:
    """One main-job process: its wall and session time, GPU-lock account and measurements
    (`root`: the checkout whose pytest_gpuperf it runs, first on PYTHONPATH). The plugin
    loads as the README's command loads it, and bytecode is written (see above)."""
    environment = plugin_env(
        root, autoload=True, PYTHONDONTWRITEBYTECODE=None,
        PYTHONUNBUFFERED=os.environ.get("PYTHONUNBUFFERED"), **(env or {}),
    )  # fmt: skip
    done = run_pytest([*job, *extra], report, cwd=cwd, env=environment, timeout_s=timeout_s,
                      profile=profile)  # fmt: skip
    prefix = ["-m", "cProfile", "-o", str(profile)] if profile else []
    run: dict[str, Any] = {
        "command": " ".join(["python3", *prefix, "-m", "pytest", *job, *extra]),
        "exit": done.returncode,
        "wall_s": done.wall_s,
        "session_s": done.session_s,
        "summary": done.summary,
    }
    if done.report is None:
        run["error"] = f"{done.problem}\n{done.output}"[-3000:]
        return run
    timing = done.document.get("timing") or {}
    run["report_wall_s"] = timing.get("wall_s")
    run["gpu_lock_held_s"] = done.lock_s
    run["gpu_lock_waited_s"] = timing.get("gpu_lock_waited_s")
    devices = done.document.get("devices", ())
    run["gpu_lock_holds"] = sum(d.get("lock_holds") or 0 for d in devices)
    run["boards"] = sorted({d["uuid"] for d in devices if d.get("uuid")})
    run["device"] = sorted({d.get("runtime_name") or d.get("name", "") for d in devices})
    run["measurements"] = [
        {
            "key": f"{row.test_id} {row.measurement.name or ''} [{row.measurement.cache}]",
            "efficiency": row.measurement.efficiency,
            "time_s": row.measurement.time_s,
            "status": row.verdict.status,
            "baseline_outcome": row.verdict.baseline.outcome,
            "allowance": row.verdict.baseline.allowance,
        }
        for row in done.rows
    ]
    return run


def profile_tops(path: Path, count: int = TOP) -> dict[str, str]:
    """The profile's top `count` entries by cumulative and by own time, as pstats prints."""
    tops = {}
    for order in ("cumulative", "tottime"):
        text = io.StringIO()
        stats = pstats.Stats(str(path), stream=text)
        stats.strip_dirs().sort_stats(order).print_stats(count)
        tops[order] = text.getvalue()
    return tops


def measure(options: argparse.Namespace) -> dict[str, Any]:
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="main-job-"))
    document: dict[str, Any] = {
        "title": "the README's main job (bench/main_job.py)",
        "label": options.label,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "environment_dont_write_bytecode": os.environ.get("PYTHONDONTWRITEBYTECODE"),
    }
    for _ in range(options.warm):
        document.setdefault("warm", []).append(_brief(run_job(scratch / "warm.json")))
    document["serial"] = run_job(scratch / "serial.json")
    profile = out / f"main-job-{options.label}.prof"
    document["profile"] = _brief(run_job(scratch / "profile.json", profile=profile))
    tops = profile_tops(profile)
    for order, text in tops.items():
        (out / f"main-job-{options.label}-{order}.txt").write_text(text)
    document["profile_top"] = {order: _entries(text) for order, text in tops.items()}
    if options.xdist:
        document["xdist"] = run_job(scratch / "xdist.json", extra=("-n", "2"))
    if options.fixture:
        document["fixture"] = fixture_overhead(scratch / "user", options.fixture_tests)
    write_json(str(out / f"main-job-{options.label}.json"), document)
    return document


def fixture_overhead(project: Path, tests: int) -> dict[str, Any]:
    """What gpu_bench costs per call beyond the user's own code (see the module's text)."""
    write_files(project, {"scale.hip": USER_KERNEL, "test_user.py": USER_TEST,
                          "conftest.py": USER_CONFTEST})  # fmt: skip
    job = ("-p", "pytest_gpuperf.plugin", "--gpuperf", "--gpuperf-backend=hip,cuda,sim", ".")
    runs = {}
    for count in (1, 1, tests):  # the first K = 1 run warms bytecode and the kernel cache
        own = project / f"own-{count}.txt"
        own.unlink(missing_ok=True)
        env = {
            "MAIN_JOB_TESTS": str(count),
            "MAIN_JOB_OWN": str(own),
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",  # -p names the plugin
        }
        run = run_job(project / f"user-{count}.json", ("-p", "no:cacheprovider"), job=job,
                      cwd=project, env=env)  # fmt: skip
        run["own_s"] = sum(float(x) for x in own.read_text().split()) if own.exists() else None
        runs[count] = _brief(run)
    one, many = runs[1], runs[tests]
    parts = ("session_s", "gpu_lock_held_s", "own_s")
    if any(one.get(p) is None or many.get(p) is None for p in parts):
        return {"runs": runs, "error": "a run made no session time, report or own time"}
    session, lock, own = ((many[p] - one[p]) / (tests - 1) for p in parts)
    return {
        "tests": tests,
        "runs": {str(k): v for k, v in runs.items()},
        "per_call_s": {"session": session, "gpu_lock": lock, "own_code": own},
        "overhead_per_call_s": session - lock - own,
    }


def _brief(run: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in run.items() if k != "measurements"}


def _entries(text: str) -> list[str]:
    """The table rows of a pstats listing (ncalls tottime percall cumtime percall where)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip().startswith("ncalls")), None)
    return [] if start is None else [line.rstrip() for line in lines[start + 1 :] if line.strip()]


def render(document: Mapping[str, Any], markdown: bool = False) -> str:
    rows = []
    for name in ("serial", "profile", "xdist"):
        run = document.get(name)
        if not run:
            continue
        rows.append((name, run["exit"], f"{run['wall_s']:.1f} s", _s(run.get("session_s")),
                     _s(run.get("gpu_lock_held_s"), 2), run.get("gpu_lock_holds", "-"),
                     run.get("summary", "")[-60:]))  # fmt: skip
    head = ("run", "exit", "wall", "pytest session", "GPU lock held", "holds", "summary")
    lines = [f"{document.get('title', '')}, {document.get('label', '')}, {document['started']}"]
    lines += [table(head, rows, markdown)]
    fixture = document.get("fixture")
    if fixture and "per_call_s" in fixture:
        per = fixture["per_call_s"]
        lines.append(
            f"gpu_bench per call (a user's test, NumPy inputs, {fixture['tests']} tests): "
            f"session {per['session'] * 1e3:.1f} ms = GPU lock {per['gpu_lock'] * 1e3:.1f} ms + "
            f"the test's own NumPy {per['own_code'] * 1e3:.1f} ms + the fixture "
            f"{fixture['overhead_per_call_s'] * 1e3:.1f} ms"
        )
    elif fixture:
        lines.append(f"gpu_bench per call: {fixture.get('error')}")
    for order, entries in (document.get("profile_top") or {}).items():
        lines += ["", f"profile, top by {order}:", *entries[:15]]
    return "\n".join(lines)


def compare(before: Mapping[str, Any], after: Mapping[str, Any], markdown: bool) -> str:
    """Each measurement's efficiency before and after, against its stored baseline's band."""
    old = {m["key"]: m for m in before["serial"].get("measurements", ())}
    rows, outside = [], 0
    for m in after["serial"].get("measurements", ()):
        was = old.get(m["key"])
        if was is None:
            continue
        change = m["efficiency"] / was["efficiency"] - 1
        band = m.get("allowance") or was.get("allowance")
        inside = band is None or abs(change) <= band
        outside += not inside
        rows.append((m["key"].replace("tests/perf/", ""), f"{was['efficiency']:.2%}",
                     f"{m['efficiency']:.2%}", f"{change:+.2%}",
                     "-" if band is None else f"±{band:.2%}",
                     "yes" if inside else "NO"))  # fmt: skip
    head = ("measurement", "before", "after", "change", "band", "within")
    return f"{table(head, rows, markdown)}\n{len(rows)} measurements, {outside} outside their band"


def _s(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f} s"


def main(argv: Sequence[str] | None = None) -> int:
    parser = cli.parser(__doc__, backend=None, out=None)
    parser.add_argument("--out", default="main-job", help="folder for the JSON, profile, tops")
    parser.add_argument("--label", default="run", help="names the files: main-job-LABEL.*")
    parser.add_argument("--warm", type=int, default=1, help="untimed runs first")
    parser.add_argument("--no-xdist", dest="xdist", action="store_false")
    parser.add_argument("--no-fixture", dest="fixture", action="store_false")
    parser.add_argument("--fixture-tests", type=int, default=FIXTURE_TESTS)
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    options = parser.parse_args(argv)
    if options.compare:
        before, after = (read_run(p) for p in options.compare)
        print(compare(before, after, options.markdown))
        return 0
    document = read_run(options.render) if options.render else measure(options)
    print(render(document, options.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
