"""How long publishing a large history takes, and where the time goes (not part of the plugin).

    python bench/publish_scale.py [--tests 1000] [--runs 100] [--out DIR] [--profile N] [--reuse]

Issue 45 item 16: `python -m pytest_gpuperf.publish` of 1,000 tests x 100 runs took 8 min
26 s and 1.44 GB, silently. This script writes such a history fast (one run made by the
plugin's own code through bench/publish_page.py's `make_history`, then copies of it with new
commits, times and noisy efficiencies), publishes it in a child process (its peak memory is
its own) and prints a table: the history's size, the wall time and peak RSS of the publish,
and, with --profile N, the N functions of most cumulative time under cProfile. The history is
generated: everything in it is labelled simulated.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.publish_page import make_history

_CHILD = """
import cProfile, io, pstats, resource, sys, time
from pathlib import Path
from pytest_gpuperf.publish.__main__ import publish
inputs, out, top = [Path(p) for p in sys.argv[3:]], Path(sys.argv[1]), int(sys.argv[2])
began, cpu = time.perf_counter(), time.process_time()
profile = cProfile.Profile() if top else None
if profile: profile.enable()
written = publish(inputs, out)
if profile: profile.disable()
wall, cpu = time.perf_counter() - began, time.process_time() - cpu
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"RESULT {wall:.2f} {cpu:.2f} {peak_mb:.0f} {written}")
if profile:
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(top)
    print(text.getvalue())
"""


def grow(folder: Path, tests: int, runs: int, seed: int = 1) -> list[Path]:
    """The baseline file and `runs` reports of `tests` measurements: one report judged by
    the plugin's code, the rest copies with new commits, times and efficiencies."""
    baseline, (first,) = make_history(folder, measurements=tests, runs=1, seed=seed)
    template = json.loads(first.read_text())
    rng = random.Random(seed)
    created = datetime.fromisoformat(template["created"].replace("Z", "+00:00"))
    paths = [first]
    for r in range(1, runs):
        document = copy.deepcopy(template)
        moment = created + timedelta(days=r)
        document["created"] = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
        document["commit"]["id"] = f"{rng.getrandbits(160):040x}"
        for result in document["results"]:
            measurement = result["measurement"]
            measurement["efficiency"] *= 1 + rng.gauss(0, 0.003)
        path = first.with_name(f"run-{r:03d}.json")
        path.write_text(json.dumps(document))
        paths.append(path)
    return [baseline, *paths]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--out", type=Path, default=Path("publish-scale"))
    parser.add_argument("--profile", type=int, default=0, metavar="N")
    parser.add_argument(
        "--reuse", action="store_true", help="publish the history already in --out again"
    )
    options = parser.parse_args(argv)
    began = time.perf_counter()
    if options.reuse:
        runs = sorted((options.out / "runs").glob("run-*.json"))
        inputs = [*sorted((options.out / "baselines").glob("*.toml")), *runs]
    else:
        inputs = grow(options.out, options.tests, options.runs)
    made_s = time.perf_counter() - began
    size_mb = sum(p.stat().st_size for p in inputs) / 1e6
    page = options.out / "dashboard.html"
    root = str(Path(__file__).resolve().parents[1])
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(page), str(options.profile), *map(str, inputs)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": root, "PATH": "/usr/bin:/bin"},
    )
    if done.returncode != 0:
        print(done.stderr, file=sys.stderr)
        return 1
    result = next(line for line in done.stdout.splitlines() if line.startswith("RESULT"))
    _, wall_s, cpu_s, peak_mb, written = result.split()
    progress = [line for line in done.stderr.splitlines() if " of " in line]
    rows = [
        ("tests x runs", f"{options.tests} x {options.runs}"),
        ("history (files, MB)", f"{len(inputs)}, {size_mb:.1f} MB (made in {made_s:.0f} s)"),
        ("publish wall time", f"{float(wall_s):.1f} s"),
        ("publish CPU time", f"{float(cpu_s):.1f} s (the wall time on an idle machine)"),
        ("publish peak RSS", f"{peak_mb} MB"),
        ("page size", f"{int(written) / 1e6:.1f} MB"),
        ("progress lines on stderr", str(len(progress))),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")
    if options.profile:
        print(done.stdout.split("\n", 1)[1])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
