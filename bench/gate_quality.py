"""How often the gate cries wolf, and how often it catches a real regression: the A/B
comparison in one run (--gpuperf-compare) and stored baselines that learn their spread from a
history of saves (--gpuperf-save). Every decision is the gate's own (pytest_gpuperf.gate).

Two parts:

processes (`--backend cuda` on the GPU; `--backend sim --quick`, the same path on the simulated
device, as its smoke test). A throwaway git project in a temporary directory: one kernel file
per point, all the same vector add at the BASE commit (`vector_add_more`,
kernels/bench_variants.hip), then uncommitted HEAD edits, at each of three sizes S (long, mid,
short):

  S_same               unchanged: the A/A control (timed through --gpuperf-compare-force; each
                       side loaded separately, 8 times)
  S_equiv              another code object doing the same work (GQ_SALT): A/A'
  S_slow1, S_slow2     HEAD reads more bytes (EXTRA_PERMILLE): +1% and +2% kernel time
  long_slow3           +3% at the long size (the stored-baseline history's detection point)

"long" is the seed's 32M fp32 elements (~145 us cold on an H100), "mid" 6M (~30 us), "short" 1M
elements (12 MiB, ~8 us cold on an H100; docs/hip-on-cuda.md: cold and rotate agree there, so
cold mode is right). The extra bytes per point are calibrated first, in one process, by the
library's A/B pair (a time slowdown is what the gate judges, and reading x% more bytes costs a
scalar vector add less than x% of time: 10% more bytes cost 6.4% on the H100); the tables
report the head/base ratio each point really caused. A later part can reuse a first part's
plan (--plan-from), and --merge joins the parts' files into one document. Then N separate
`python -m pytest` processes run in the project, each `--gpuperf --gpuperf-compare=HEAD
--gpuperf-compare-force --gpuperf-json=...`, tests in a random order per process; every
kernel's output is checked against NumPy (a wrong result leaves the measurement unjudged and
uncounted). Scored:

- A/B: per point, the share of comparisons whose state is regressed (a false alarm for
  A/A and A/A', a detection for the slower heads), improved, inconclusive and pass, with the
  median head/base ratio and the median half-width of its interval;
- stored baseline: histories of K saves (K = 1, 3, 5) of long_same's head measurements from
  other processes than the one judged, built by the gate's own saving code (plan_save ->
  entry_from_history, as --gpuperf-save builds them), judged by check_baseline at the default
  tolerance and at 0: long_same judged regressed is a false alarm, long_slow3 judged regressed
  a detection. K = 1 is the single save with the prior spread (the old way).

library (`--backend sim`): the simulated MI300X (run_spread=0.07) through the library, each
trial a fresh simulated device with a fresh seed, >= 500 trials per point, in a process pool:
A/B (Device.compare with the gate's stopping rule, judged by gate.ab.check_comparison) of
identical code (A/A), of other code doing the same work (A/A') and of a head 3% or 5% slower
(its own code object, slowed through the simulator's fingerprint-keyed kernel_slowdown), over
a grid of the run-to-run variance's share that is particular to a code object (the model's
placement and common shares are passed through when the simulator accepts them); and the
history path (K saves from K fresh devices, a further device judged unchanged and 3, 5, 10,
20% slower). Numbers from this part are the model's, not a device's.

Usage (from the repository root; nothing needs installing):
  PYTHONPATH=. python3 bench/gate_quality.py --backend cuda --processes 16 --deadline 530 \
      --seed 1 --out gq1.json                                    # one part, < 9.5 minutes
  PYTHONPATH=. python3 bench/gate_quality.py --backend cuda --processes 16 --deadline 530 \
      --seed 2 --plan-from gq1.json --out gq2.json               # another, the same plan
  PYTHONPATH=. python3 bench/gate_quality.py --merge gq1.json gq2.json gq3.json --out gq.json
  PYTHONPATH=. python3 bench/gate_quality.py --backend sim --quick          # smoke test, here
  PYTHONPATH=. python3 bench/gate_quality.py --backend sim --update-docs    # the library part
  PYTHONPATH=. python3 bench/gate_quality.py --render gq.json --update-docs  # a GPU run's file
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import math
import multiprocessing
import os
import random
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import itertools

from _common import (  # the script's own directory, so it runs from anywhere
    KERNELS_DIR,
    REPO_ROOT,
    emit,
    markdown_table,
    replace_section,
    run_child,
    text_table,
    write_json,
)

KERNEL = "vector_add_more"
BLOCK = 256
LONG_ELEMENTS = 32 << 20  # the seed's 32M fp32 vector add: 384 MiB moved
MID_ELEMENTS = 6 << 20  # 72 MiB moved: ~30 us cold on an H100
SHORT_ELEMENTS = 1 << 20  # 12 MiB moved: ~8 us cold on an H100
SIZES = ("long", "mid", "short")
MAX_PERMILLE = 333  # vector_add_more reads at most one extra float per element
# The simulated device runs no kernel code; a kernel file's `gpuperf-sim: efficiency=`
# directive stands in for its extra bytes: SIM_EFFICIENCY / (1 + EXTRA_PERMILLE / 1000),
# where SIM_EFFICIENCY is the seed's 71.85% for vector add on MI300X.
SIM_EFFICIENCY = 0.7185
# Used only when the calibration fails: on the H100 (2026-11-23, the previous version of this
# script and tests/gpu/test_gate_on_gpu.py) 10% and 20% more bytes, read by the first threads,
# cost 6.4% and 13.0% more time: 1.56 x the bytes per unit of time.
FALLBACK_BYTES_PER_TIME = 1.56
PROBE_PERMILLE = {"long": 50, "mid": 100, "short": 100}  # the probe: 5% / 10% more bytes
HISTORY_SAVES = (1, 3, 5)  # 1: a single save with the prior spread (the old way)
HISTORY_PATH = "gate-quality (in memory)"
TEST_ID = "test_gate_quality.py::test_kernel"
BEGIN, END = "// gate-quality kernel: begin", "// gate-quality kernel: end"
DOCS = REPO_ROOT / "docs" / "benchmarks.md"
DOCS_MARKER = "ab-gate-quality"
SIM_SLOWDOWNS = (0.03, 0.05)  # A/B heads of the library part
SIM_HISTORY_SLOWDOWNS = (0.03, 0.05, 0.10, 0.20)
CODE_SHARES = (0.0, 0.05, 0.15, 0.30)

AA, AA_OTHER, SLOWER = "A/A", "A/A'", "slower"


@dataclass(frozen=True)
class Point:
    """One kernel file of the throwaway project: its size and what HEAD does to it."""

    name: str
    size: str  # "long" | "mid" | "short"
    kind: str  # AA | AA_OTHER | SLOWER
    slowdown: float = 0.0  # the kernel-time slowdown HEAD is calibrated to

    @property
    def label(self) -> str:
        if self.kind == AA:
            return f"{self.size} A/A (identical code)"
        if self.kind == AA_OTHER:
            return f"{self.size} A/A' (other code, same work)"
        return f"{self.size} +{self.slowdown:.0%} time"


POINTS = (
    *(Point(f"{size}_same", size, AA) for size in SIZES),
    *(Point(f"{size}_equiv", size, AA_OTHER) for size in SIZES),
    *(Point(f"{size}_slow1", size, SLOWER, 0.01) for size in SIZES),
    *(Point(f"{size}_slow2", size, SLOWER, 0.02) for size in SIZES),
    Point("long_slow3", "long", SLOWER, 0.03),
)
POINT = {point.name: point for point in POINTS}


class Stopped(Exception):
    """SIGTERM or SIGINT (a `timeout` around the run): score and print what there is."""


# -- the kernel files -------------------------------------------------------------------------


def kernel_block() -> str:
    """vector_add_more and its comments, as kernels/bench_variants.hip holds it."""
    text = (KERNELS_DIR / "bench_variants.hip").read_text()
    return text[text.index(BEGIN) : text.index(END) + len(END)] + "\n"


def sim_efficiency(permille: int) -> float:
    """The simulated device's stand-in for reading `permille` per mille more bytes."""
    return round(SIM_EFFICIENCY / (1.0 + permille / 1000.0), 6)


def kernel_source(permille: int = 0, salt: int = 1) -> str:
    """A kernel file: vector_add_more reading `permille` per mille more bytes than it declares,
    with code-object salt `salt`, and the simulated device's directive for the same."""
    if not 0 <= permille <= MAX_PERMILLE:
        raise ValueError(f"EXTRA_PERMILLE must be in [0, {MAX_PERMILLE}], not {permille}")
    declaration = f"GPUPERF_KERNEL void {KERNEL}("
    directive = f"// gpuperf-sim: efficiency={sim_efficiency(permille)}\n"
    block = kernel_block().replace(declaration, directive + declaration, 1)
    return (
        '#include "gpuperf.h"\n'
        f"#define EXTRA_PERMILLE {permille}\n"
        f"#define GQ_SALT {salt}\n\n" + block
    )


def extra_floats(elements: int, permille: int) -> int:
    """The floats of `extra` vector_add_more reads (its own integer arithmetic)."""
    return 3 * elements * permille // 1000


# -- the plan: sizes and the bytes each slower head reads ---------------------------------------


@dataclass(frozen=True)
class Plan:
    sizes: dict[str, int]  # size -> fp32 elements
    permille: dict[str, int]  # point name -> HEAD's EXTRA_PERMILLE (0 for the controls)
    calibration: dict[str, Any] = field(default_factory=dict)

    def elements(self, size: str) -> int:
        return self.sizes[size]

    @property
    def points(self) -> tuple[Point, ...]:
        """The points of this plan (a plan read from an older file has fewer sizes)."""
        return tuple(p for p in POINTS if p.size in self.sizes and p.name in self.permille)

    @property
    def extra_floats(self) -> int:
        """Size of the `extra` buffer every test allocates: what the hungriest head reads."""
        needed = [
            extra_floats(self.elements(point.size), self.permille.get(point.name, 0))
            for point in self.points
        ]
        return max(1, *needed)


def permille_for(
    slowdown: float, slope_per_permille: float | None, probes: Sequence[Sequence[float]] = ()
) -> int:
    """EXTRA_PERMILLE that slows the kernel by `slowdown`: interpolated between measured
    probes ((permille, time ratio) pairs) where there are any, else from the time slope (None
    or not positive: the H100's fallback figure). The probes matter for short kernels, whose
    first extra loads cost more than their bytes: on the H100 1 per mille more bytes cost a
    7.8 us kernel +0.26% and 21 per mille +1.83%, where a line through 0 put +1% at 4."""
    if probes:
        value = interpolate_permille(slowdown, probes)
    elif slope_per_permille is None or not slope_per_permille > 0:
        value = 1000.0 * slowdown * FALLBACK_BYTES_PER_TIME
    else:
        value = slowdown / slope_per_permille
    return int(min(MAX_PERMILLE, max(1, round(value))))


def interpolate_permille(slowdown: float, probes: Sequence[Sequence[float]]) -> float:
    """The permille at which the piecewise-linear curve through (0, 0) and the probes'
    (permille, ratio - 1) reaches `slowdown`; past the last probe, its last segment goes on.
    Noise can make a larger probe read a smaller ratio: the curve keeps the running maximum."""
    points = [(0.0, 0.0)]
    for permille, ratio in sorted((float(p), float(r)) for p, r in probes):
        if permille > points[-1][0]:
            points.append((permille, max(ratio - 1.0, points[-1][1])))
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if slowdown <= y1 and y1 > y0:
            return x0 + (slowdown - y0) * (x1 - x0) / (y1 - y0)
    (x0, y0), (x1, y1) = points[-2], points[-1]
    slope = (y1 - y0) / (x1 - x0)
    return x1 + (slowdown - y1) / slope if slope > 0 else float(MAX_PERMILLE)


def plan_from(sizes: Mapping[str, int], calibration: Mapping[str, Any] | None) -> Plan:
    """The plan for `sizes` ({size: elements}) from a calibration ({size:
    {"slope_per_permille": ...}, "source": ...}); a size without a positive slope takes the
    fallback, and the plan's source says so."""
    calibration = dict(calibration or {})
    slopes = {size: calibration.get(size, {}).get("slope_per_permille") for size in sizes}
    probes = {size: calibration.get(size, {}).get("probes", ()) for size in sizes}
    permille = {
        point.name: (
            permille_for(point.slowdown, slopes[point.size], probes[point.size])
            if point.kind == SLOWER
            else 0
        )
        for point in POINTS
        if point.size in sizes
    }
    unusable = [size for size, slope in slopes.items() if slope is None or not slope > 0]
    source = calibration.get("source", "")
    if unusable and "FALLBACK" not in source:
        fallback = f"{FALLBACK_BYTES_PER_TIME} x the slowdown in bytes"
        source = f"{source}; FALLBACK for {', '.join(unusable)}: {fallback}".lstrip("; ")
    calibration["source"] = source
    return Plan(dict(sizes), permille, calibration)


def calibrate_child(spec: Mapping[str, Any]) -> None:
    """In its own process: how much longer vector_add_more takes per size, by the library's
    interleaved A/B pair (measure_pair) on the same buffers, at two probes: PROBE_PERMILLE
    more bytes, then the permille that probe's slope puts at +1%. A line through both is what
    the plan inverts, so the small slowdowns land where they are named."""
    import numpy as np

    from pytest_gpuperf import open_device

    warnings.simplefilter("ignore")  # the simulated device: the probes have no model
    workdir = Path(spec["workdir"])
    workdir.mkdir(parents=True, exist_ok=True)
    with open_device(spec["backend"]) as device:
        for size, elements in spec["sizes"].items():
            big = PROBE_PERMILLE[size]
            base_path = workdir / "base.hip"
            base_path.write_text(kernel_source(0))
            base = device.kernel(base_path, KERNEL)
            rng = np.random.default_rng(0)
            a = device.to_device(rng.random(elements, dtype=np.float32))
            b = device.to_device(rng.random(elements, dtype=np.float32))
            c = device.empty(elements)
            extra = device.to_device(np.zeros(extra_floats(elements, big) + 1, np.float32))
            args = (a, b, c, extra, elements)
            paired = _probe_pair(device, base, workdir / f"probe_{size}_{big}.hip", big, args)
            probes = [(big, paired.ratio)]
            small = permille_for(0.01, (paired.ratio - 1.0) / big)
            if small < big:
                path = workdir / f"probe_{size}_{small}.hip"
                probes.append((small, _probe_pair(device, base, path, small, args).ratio))
            emit(
                {
                    "size": size,
                    "elements": elements,
                    "probe_permille": big,
                    "ratio": paired.ratio,
                    "ratio_ci": list(paired.ratio_ci),
                    "pairs": paired.pairs,
                    "probes": [list(probe) for probe in probes],
                    "base_time_s": paired.base.time_s,
                    "slope_per_permille": (paired.ratio - 1.0) / big,
                    "device": device.spec.name,
                    "simulated": device.simulated,
                }
            )


def _probe_pair(device: Any, base: Any, path: Path, permille: int, args: tuple[Any, ...]) -> Any:
    """measure_pair of vector_add_more reading `permille` more bytes against `base`."""
    from pytest_gpuperf.measure import MeasureSettings, measure_pair

    path.write_text(kernel_source(permille))
    elements = args[-1]
    return measure_pair(
        device.backend,
        device.kernel(path, KERNEL),
        base,
        grid=(elements + BLOCK - 1) // BLOCK,
        block=BLOCK,
        args=args,
        bytes_moved=12 * elements,
        device=device.spec,
        settings=MeasureSettings(cache="cold", target_rel_ci=0.002, budget_s=3.0),
        stop_when=lambda ci, _base_s: (ci[1] - ci[0]) / 2 <= 0.002,
    )


def calibrate(
    backend: str, sizes: Mapping[str, int], workdir: Path, env: Mapping[str, str]
) -> dict[str, Any]:
    """Run calibrate_child; {size: its row} plus "source" (what the plan rests on)."""
    spec = {"backend": backend, "sizes": dict(sizes), "workdir": str(workdir)}
    rows = run_child([__file__, "--child", "calibrate", json.dumps(spec)], 120, env=env)
    found: dict[str, Any] = {row["size"]: row for row in rows}
    found["source"] = (
        "calibrated: interpolated between the library's A/B pairs of two probes (5% / 10% "
        "more bytes, and the permille that slope puts at +1%)"
    )
    return found


# -- the throwaway project ------------------------------------------------------------------

CONFTEST = '''\
"""Written by bench/gate_quality.py.

The simulated device runs no kernel code: the model below computes what vector_add_more
computes (its time comes from each file's gpuperf-sim directive). On a GPU it is not used.
GATE_QUALITY_ORDER shuffles the tests per process, so a kernel's place in the process cannot
bias the learned-history scores.
"""

import os
import random
from pathlib import Path

from pytest_gpuperf import simulate


def _vector_add_more(args, launch):
    a, b, c, extra, n = args
    count = min(n, launch.threads_x)
    c[:count] = a[:count] + b[:count]


for _path in sorted(Path(__file__).parent.glob("*.hip")):
    simulate.register(_path, "vector_add_more", _vector_add_more)


def pytest_collection_modifyitems(items):
    order = os.environ.get("GATE_QUALITY_ORDER")
    if order:
        random.Random(int(order)).shuffle(items)
'''

TEST_MODULE = '''\
"""Written by bench/gate_quality.py: one measurement per kernel file, its output checked."""

import numpy as np
import pytest

SIZES = {sizes!r}
EXTRA_FLOATS = {extra}
BLOCK = {block}


@pytest.mark.parametrize("name", list(SIZES))
def test_kernel(gpu_bench, name):
    n = SIZES[name]
    kernel = gpu_bench.kernel(name + ".hip", "{kernel}")
    rng = np.random.default_rng(0)
    a = rng.random(n, dtype=np.float32)
    b = rng.random(n, dtype=np.float32)
    da, db = gpu_bench.to_device(a), gpu_bench.to_device(b)
    extra = gpu_bench.to_device(np.zeros(EXTRA_FLOATS, np.float32))  # zeros: c never changes
    dc = gpu_bench.empty(n)
    gpu_bench(
        kernel, grid=(n + BLOCK - 1) // BLOCK, block=BLOCK, args=(da, db, dc, extra, n),
        bytes=12 * n, name=name,
    )
    np.testing.assert_array_equal(gpu_bench.from_device(dc, np.float32, n), a + b)
'''


GIT_IDENTITY = ("-c", "user.name=gate-quality", "-c", "user.email=gate-quality@localhost")


def git(directory: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *GIT_IDENTITY, "-c", "commit.gpgsign=false", *args],
        cwd=directory,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def head_source(point: Point, plan: Plan) -> str | None:
    """HEAD's version of a point's kernel file (None: unchanged from BASE)."""
    if point.kind == AA_OTHER:
        return kernel_source(0, salt=2)
    if point.kind == SLOWER:
        return kernel_source(plan.permille[point.name])
    return None


def write_project(directory: Path, plan: Plan) -> None:
    """The project: BASE committed (every file the same vector add), HEAD's edits left in the
    work tree, as a pull request's checkout with --gpuperf-compare=<its base> sees them."""
    directory.mkdir(parents=True)
    sizes = {point.name: plan.elements(point.size) for point in plan.points}
    for point in plan.points:
        (directory / f"{point.name}.hip").write_text(kernel_source(0))
    (directory / "conftest.py").write_text(CONFTEST)
    (directory / "test_gate_quality.py").write_text(
        TEST_MODULE.format(sizes=sizes, extra=plan.extra_floats, block=BLOCK, kernel=KERNEL)
    )
    (directory / "pytest.ini").write_text("[pytest]\n")  # this directory is the rootdir
    git(directory, "init", "-q")
    git(directory, "add", "-A")
    git(directory, "commit", "-qm", "BASE: every kernel file the same vector add")
    for point in plan.points:
        text = head_source(point, plan)
        if text is not None:
            (directory / f"{point.name}.hip").write_text(text)


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


@dataclass
class Trial:
    """One measurement of one process: its A/B comparison and head's measurement."""

    name: str
    status: str  # the verdict's: pass | fail | marginal | unjudged
    test_outcome: str
    state: str  # the comparison's (pass, regressed, improved, inconclusive, ...) or ""
    ratio: float | None
    ratio_ci: tuple[float, float] | None
    pairs: int
    threshold: float
    time_s: float
    efficiency: float
    relative_ci: float
    base_efficiency: float | None
    drift: float | None = None  # the drift between loads the gate used (+-95% per side)
    drift_basis: str = ""
    median_ratio: float | None = None  # the median of the pair ratios (the old statistic)
    measurement: Any = field(repr=False, default=None)  # results.Measurement (head's)

    @property
    def valid(self) -> bool:
        """A timed comparison of a test whose output was right."""
        return (
            self.status != "unjudged"
            and self.ratio_ci is not None
            and self.state in ("pass", "regressed", "improved", "inconclusive")
        )

    def summary(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "measurement"}


def trials_from_report(document: Mapping[str, Any]) -> dict[str, Trial]:
    """The trials of one --gpuperf-json report, read back with the library's reader."""
    from pytest_gpuperf.report.json_report import rows_from_json

    trials = {}
    for row in rows_from_json(document):
        m, comparison = row.measurement, row.verdict.comparison
        trials[m.name] = Trial(
            name=m.name,
            status=row.verdict.status,
            test_outcome=row.test_outcome,
            state=comparison.state if comparison is not None else "",
            ratio=comparison.ratio if comparison is not None else None,
            ratio_ci=tuple(comparison.ratio_ci)
            if comparison is not None and comparison.ratio_ci
            else None,
            pairs=comparison.pairs if comparison is not None else 0,
            threshold=comparison.threshold if comparison is not None else 0.0,
            time_s=m.time_s,
            efficiency=m.efficiency,
            relative_ci=m.relative_ci,
            base_efficiency=comparison.base_efficiency if comparison is not None else None,
            drift=getattr(comparison, "drift", None),
            drift_basis=getattr(comparison, "drift_basis", ""),
            median_ratio=getattr(comparison, "median_ratio", None),
            measurement=m,
        )
    return trials


@dataclass
class ProcessRecord:
    index: int
    seed: int
    wall_s: float
    returncode: int | None
    trials: dict[str, Trial]
    problem: str = ""
    device: str = ""

    def to_json(self) -> dict[str, Any]:
        trials = {name: trial.summary() for name, trial in self.trials.items()}
        for name in HISTORY_POINTS:  # what a merge needs to score the history again
            if name in self.trials and self.trials[name].measurement is not None:
                trials[name]["measurement"] = compact_measurement(self.trials[name].measurement)
        return {
            "index": self.index,
            "seed": self.seed,
            "wall_s": self.wall_s,
            "returncode": self.returncode,
            "problem": self.problem,
            "device": self.device,
            "trials": trials,
        }


# The points the stored-baseline history is scored on (score_history).
HISTORY_POINTS = ("long_same", "long_slow3")


def compact_measurement(measurement: Any) -> dict[str, Any]:
    """A measurement as plain data without its samples (a save records only their count,
    kept as `sample_count`), so a part's file stays small and a merge can judge histories."""
    from pytest_gpuperf.plain import to_plain

    data = dict(to_plain(measurement))
    data["sample_count"] = len(data.pop("samples_s", ()))
    return data


def measurement_from_compact(data: Mapping[str, Any]) -> Any:
    """compact_measurement's inverse; the samples are stand-ins (time_s, as many as there
    were): only their count is read by the gate's saving code."""
    from pytest_gpuperf.plain import from_plain
    from pytest_gpuperf.results import Measurement

    fields = {k: v for k, v in data.items() if k != "sample_count"}
    fields["samples_s"] = [data["time_s"]] * int(data.get("sample_count", 0))
    return from_plain(Measurement, fields)


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


# -- scoring -----------------------------------------------------------------------------


def _median(values: Iterable[float | None]) -> float:
    kept = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.median(kept) if kept else math.nan


def ab_row(label: str, kind: str, trials: Sequence[Trial], target: str = "") -> dict[str, Any]:
    """Rates of each A/B state among the valid trials of one point."""
    valid = [t for t in trials if t.valid]
    count = Counter(t.state for t in valid)
    n = len(valid)

    def rate(state: str) -> float:
        return count[state] / n if n else math.nan

    return {
        "point": label,
        "kind": kind,
        "trials": n,
        "invalid": len(trials) - n,
        "regressed": rate("regressed"),
        "improved": rate("improved"),
        "inconclusive": rate("inconclusive"),
        "pass": rate("pass"),
        "median_ratio": _median(t.ratio for t in valid),
        "median_ci_half": _median((t.ratio_ci[1] - t.ratio_ci[0]) / 2 for t in valid),
        "median_pairs": _median(t.pairs for t in valid),
        "median_time_us": _median(t.time_s * 1e6 for t in valid),
        "median_drift": _median(t.drift for t in valid),
        "drift_measured": sum(t.drift_basis == "measured" for t in valid) / n if n else math.nan,
        "median_of_medians": _median(t.median_ratio for t in valid),
        "target": target,
        "met": meets(target, n, rate("regressed"), rate("inconclusive")),
    }


def meets(target: str, trials: int, regressed: float, inconclusive: float = 0.0) -> str:
    """Whether a row meets the issue's target ("" when it has none): "<= 1% regressed ..."
    (false alarms) or ">= 95% regressed ..." (detection, any percentage), optionally "...
    and <= 10% inconclusive", over at least 40 trials per point (100 where the target says
    "over >= 100")."""
    if not target:
        return ""
    wanted = 100 if "over >= 100" in target else 40
    if trials < wanted:
        return f"too few trials (< {wanted})"
    rate = float(target.split("%")[0].split()[-1]) / 100
    ok = regressed <= rate if target.startswith("<=") else regressed >= rate
    if "inconclusive" in target:
        limit = float(target.split("and <=")[1].split("%")[0]) / 100
        ok = ok and inconclusive <= limit
    return "yes" if ok else "NO"


# The targets per point (false alarms of both controls at every size besides).
AB_TARGETS = {
    "short_same": "<= 1% regressed and <= 10% inconclusive",
    "short_equiv": "<= 1% regressed and <= 10% inconclusive",
    "long_slow1": ">= 95% regressed (kernel >= 20 us)",
    "mid_slow1": ">= 95% regressed (kernel >= 20 us)",
    "short_slow1": ">= 80% regressed (7-8 us cold)",
    "short_slow2": ">= 95% regressed (7-8 us cold)",
}


def score_ab(records: Sequence[ProcessRecord]) -> list[dict[str, Any]]:
    """One row per point, plus the A/A rows together (the issue's >= 100 A/A comparisons)."""

    def of(name: str) -> list[Trial]:
        return [r.trials[name] for r in records if name in r.trials]

    rows = []
    same = [t for point in POINTS if point.kind == AA for t in of(point.name)]
    rows.append(ab_row("A/A, every size", AA, same, "<= 1% regressed over >= 100"))
    for point in POINTS:
        if not of(point.name):
            continue
        default = "<= 1% regressed" if point.kind in (AA, AA_OTHER) else ""
        target = AB_TARGETS.get(point.name, default)
        rows.append(ab_row(point.label, point.kind, of(point.name), target))
    return rows


def history_check(
    saves: Sequence[Any],
    judged: Any,
    tolerance: float,
    simulated_spread: float | None = None,
) -> dict[str, Any]:
    """Judge `judged` against the entry --gpuperf-save would have built from `saves` (oldest
    first), with the gate's own functions: plan_save (-> entry_from_history) and
    check_baseline."""
    from pytest_gpuperf.gate.policy import prior_run_spread
    from pytest_gpuperf.gate.saving import SaveContext, plan_save
    from pytest_gpuperf.gate.stored import check_baseline

    entry, restarted = None, 0
    for measurement in saves:
        context = SaveContext(
            test_id=TEST_ID,
            path=HISTORY_PATH,
            device_key=measurement.device_key,
            prior_spread=prior_run_spread(
                measurement.backend, measurement.time_s, measurement.cache, simulated_spread
            ),
            history_length=len(saves),
        )
        action, saved = plan_save(measurement, entry, context)
        if saved is None:
            continue
        restarted += bool(action.new_history)
        entry = saved
    if entry is None:
        raise ValueError("no save of the history was saved (floor or unjudged)")
    reference = entry.to_ref(HISTORY_PATH, judged.device_key)
    check = check_baseline(judged, reference, tolerance=tolerance)
    return {
        "outcome": check.outcome,
        "delta": check.delta,
        "allowance": check.allowance,
        "noise": check.noise,
        "saves": reference.saves,
        "spread_basis": reference.spread_basis,
        "run_spread": reference.run_spread,
        "restarted": restarted,
    }


def tolerances() -> tuple[float, ...]:
    from pytest_gpuperf.gate.policy import DEFAULT_TOLERANCE

    return (DEFAULT_TOLERANCE, 0.0)


def history_row(
    saves: int, tolerance: float, checks: Mapping[str, Sequence[Mapping[str, Any]]]
) -> dict[str, Any]:
    """False alarms (checks["unchanged"]) and detections (other keys) for one setting."""

    def rate(items: Sequence[Mapping[str, Any]], outcome: str = "regressed") -> float:
        return sum(c["outcome"] == outcome for c in items) / len(items) if items else math.nan

    unchanged = checks["unchanged"]
    row = {
        "saves": saves,
        "basis": unchanged[0]["spread_basis"] if unchanged else "",
        "tolerance": tolerance,
        "trials": len(unchanged),
        "false_alarm": rate(unchanged),
        "improved": rate(unchanged, "improved"),
        "median_allowance": _median(c["allowance"] for c in unchanged),
        "median_spread": _median(c["run_spread"] for c in unchanged),
        "restarted": sum(c["restarted"] for c in unchanged),
    }
    for key, items in checks.items():
        if key != "unchanged":
            row[f"detect_{key}"] = rate(items)
    return row


def score_history(
    records: Sequence[ProcessRecord], trials: int, seed: int, simulated_spread: float | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """(rows, every trial, why skipped or ""): histories of long_same's head measurements
    from other processes, judged on one process's long_same (unchanged) and long_slow3."""
    usable = [
        r
        for r in records
        if all(name in r.trials and r.trials[name].valid for name in ("long_same", "long_slow3"))
    ]
    most = max(HISTORY_SAVES)
    if len(usable) < most + 1:
        return [], [], f"needs {most + 1} processes with valid long_same and long_slow3"
    rng = random.Random(seed)
    checks: dict[tuple[int, float], dict[str, list]] = {}
    kept = []
    for trial in range(trials):
        judged = usable[trial % len(usable)]
        others = sorted(
            rng.sample([r for r in usable if r is not judged], most), key=lambda r: r.index
        )
        for saves in HISTORY_SAVES:
            history = [r.trials["long_same"].measurement for r in others[-saves:]]
            for tolerance in tolerances():
                slot = checks.setdefault((saves, tolerance), {"unchanged": [], "+3%": []})
                for key, name in (("unchanged", "long_same"), ("+3%", "long_slow3")):
                    check = history_check(
                        history, judged.trials[name].measurement, tolerance, simulated_spread
                    )
                    slot[key].append(check)
                    kept.append(
                        {
                            "judged": judged.index,
                            "history": [r.index for r in others[-saves:]],
                            "saves": saves,
                            "tolerance": tolerance,
                            "judged_kernel": name,
                            **check,
                        }
                    )
    rows = [history_row(s, t, items) for (s, t), items in sorted(checks.items())]
    return rows, kept, ""


# -- the processes part -------------------------------------------------------------------


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
            plan = plan_from_json(json.loads(Path(options.plan_from).read_text())["plan"])
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
        print(f"plan: {_plan_line(plan)}", file=sys.stderr)
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
    walls = [r.wall_s for r in records]
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
            "process_wall_s": {
                "median": _median(walls),
                "max": max(walls) if walls else math.nan,
                "first": walls[0] if walls else math.nan,
            },
        }
    )
    return document


def _plan_line(plan: Plan) -> str:
    slowed = ", ".join(
        f"{name} {permille / 10:g}% more bytes"
        for name, permille in plan.permille.items()
        if permille
    )
    sizes = ", ".join(f"{size} {elements} elements" for size, elements in plan.sizes.items())
    return f"{sizes}; {slowed} ({plan.calibration.get('source', '')})"


def plan_json(plan: Plan) -> dict[str, Any]:
    return {
        "sizes": plan.sizes,
        **{f"{size}_elements": elements for size, elements in plan.sizes.items()},
        "permille": plan.permille,
        "calibration": plan.calibration,
    }


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


# -- the library part on the simulated MI300X -------------------------------------------


def sim_open_kwargs(
    accepted: Iterable[str],
    run_spread: float,
    common_fraction: float | None,
    code_share: float | None,
    extra: Mapping[str, float],
) -> dict[str, Any]:
    """open_sim's model options: run_spread, and the variance split where the simulator
    takes it (common_fraction; placement_fraction = what the common and code shares leave)."""
    accepted = set(accepted)
    kwargs: dict[str, Any] = {"device": "mi300x", "run_spread": run_spread}
    if common_fraction is not None and "common_fraction" in accepted:
        kwargs["common_fraction"] = common_fraction
    if code_share is not None:
        if "placement_fraction" not in accepted:
            raise ValueError(
                "this simulated device has no code-object share (no placement_fraction)"
            )
        common = common_fraction if common_fraction is not None else 0.5
        placement = 1.0 - common - code_share
        if placement < -1e-9:
            raise ValueError(
                f"common_fraction {common} + code share {code_share} exceed the whole variance"
            )
        kwargs["placement_fraction"] = max(0.0, placement)
    for key, value in extra.items():
        if key not in accepted:
            raise ValueError(
                f"the simulated device has no option {key!r}; it takes {sorted(accepted)}"
            )
        kwargs[key] = value
    return kwargs


def _open_sim_parameters() -> tuple[set[str], dict[str, Any]]:
    from pytest_gpuperf.sim.device import open as open_sim

    parameters = inspect.signature(open_sim).parameters
    defaults = {k: p.default for k, p in parameters.items() if p.default is not inspect._empty}
    return set(parameters), defaults


@dataclass(frozen=True)
class SimKernels:
    """The library part's kernel files and their simulated fingerprints."""

    base: str
    other: str  # the same work, another code object (GQ_SALT 2)
    slowed: dict[float, tuple[str, str]]  # slowdown -> (file, fingerprint)


def write_sim_kernels(directory: Path) -> SimKernels:
    from pytest_gpuperf import open_device

    directory.mkdir(parents=True, exist_ok=True)
    paths = {"base": directory / "base.hip", "other": directory / "other.hip"}
    paths["base"].write_text(kernel_source(0))
    paths["other"].write_text(kernel_source(0, salt=2))
    slowdowns = sorted(set(SIM_SLOWDOWNS) | set(SIM_HISTORY_SLOWDOWNS))
    slowed = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with open_device("sim", seed=0) as device:
            for number, slowdown in enumerate(slowdowns):
                path = directory / f"slow{number}.hip"
                path.write_text(kernel_source(0, salt=10 + number))
                kernel = device.kernel(path, KERNEL)
                slowed[slowdown] = (str(path), device.backend.kernel_fingerprint(kernel))
            settings = device.backend.settings
            if not hasattr(settings, "slowdown"):
                raise RuntimeError(
                    "this simulated device keys kernel_slowdown by kernel name only: a slower "
                    "head needs its own code object's slowdown (fingerprint keys)"
                )
    return SimKernels(str(paths["base"]), str(paths["other"]), slowed)


def _sim_buffers(device: Any, elements: int) -> tuple:
    """Lazily zero-filled buffers (nothing is computed: the library part times only)."""
    backend = device.backend
    return (
        backend.alloc(4 * elements),
        backend.alloc(4 * elements),
        backend.alloc(4 * elements),
        backend.alloc(4),
        elements,
    )


def sim_ab_trial(job: Mapping[str, Any]) -> dict[str, Any]:
    """One A/B comparison on a fresh simulated device, decided as the plugin decides it."""
    from pytest_gpuperf import open_device
    from pytest_gpuperf.gate.ab import check_comparison
    from pytest_gpuperf.gate.policy import DEFAULT_COMPARE_THRESHOLD

    warnings.simplefilter("ignore")
    elements = job["elements"]
    with open_device(
        "sim", seed=job["seed"], **job["model"], kernel_slowdown=job["slowdown"]
    ) as device:
        base = device.kernel(job["base"], KERNEL)
        head = device.kernel(job["head"], KERNEL)
        paired = device.compare(
            head,
            base,
            grid=(elements + BLOCK - 1) // BLOCK,
            block=BLOCK,
            args=_sim_buffers(device, elements),
            bytes=12 * elements,
            cache="cold",
            budget_s=2 * job["budget"],  # the fixture gives a pair twice the budget
            threshold=DEFAULT_COMPARE_THRESHOLD,
        )
    check = check_comparison(paired, ref="base", ref_commit="", threshold=DEFAULT_COMPARE_THRESHOLD)
    return {
        "share": job["share"],
        "size": job["size"],
        "point": job["point"],
        "seed": job["seed"],
        "state": check.state,
        "ratio": paired.ratio,
        "ratio_ci": list(paired.ratio_ci),
        "pairs": paired.pairs,
        "time_s": paired.base.time_s,
        "drift": check.drift,
        "drift_basis": check.drift_basis,
        "loads": check.loads,
        "median_ratio": check.median_ratio,
        "valid": True,
    }


def sim_history_trial(job: Mapping[str, Any]) -> dict[str, Any]:
    """K fresh devices save the base code; one more device is judged on the base code and on
    each slower head (its own code object), every decision by the gate's own functions."""
    from pytest_gpuperf import open_device

    warnings.simplefilter("ignore")
    elements = job["elements"]
    launch = {"grid": (elements + BLOCK - 1) // BLOCK, "block": BLOCK, "bytes": 12 * elements}

    def measure(seed: int, paths: Sequence[str], slowdown: Mapping[str, float]) -> list:
        with open_device("sim", seed=seed, **job["model"], kernel_slowdown=slowdown) as device:
            args = _sim_buffers(device, elements)
            return [
                device.measure(
                    device.kernel(p, KERNEL), args=args, budget_s=job["budget"], **launch
                )
                for p in paths
            ]

    saves = [measure(seed, [job["base"]], {})[0] for seed in job["save_seeds"]]
    slowed = job["slowed"]  # [(slowdown, path, fingerprint)]
    judged = measure(
        job["judged_seed"],
        [job["base"], *(path for _, path, _ in slowed)],
        {fingerprint: 1.0 + s for s, _, fingerprint in slowed},
    )
    checks = []
    for count in HISTORY_SAVES:
        for tolerance in tolerances():
            for label, measurement in zip(
                ["unchanged", *(f"+{s:.0%}" for s, _, _ in slowed)], judged, strict=True
            ):
                check = history_check(saves[-count:], measurement, tolerance, job["run_spread"])
                checks.append({"saves": count, "tolerance": tolerance, "judged": label, **check})
    return {"seed": job["judged_seed"], "checks": checks}


def _pool_map(
    function: Callable[[Any], Any], jobs: Sequence[Any], workers: int, what: str
) -> list[Any]:
    """`function` over `jobs` in a pool of fresh processes (in this one for workers=1)."""
    results = []
    began = time.perf_counter()
    step = max(1, len(jobs) // 10)

    def collect(mapped: Iterable[Any]) -> None:
        for done, result in enumerate(mapped, start=1):
            results.append(result)
            if done % step == 0 or done == len(jobs):
                print(
                    f"  {what}: {done}/{len(jobs)} trials, {time.perf_counter() - began:.0f} s",
                    file=sys.stderr,
                )

    if workers <= 1:
        collect(map(function, jobs))
    else:
        with multiprocessing.get_context("spawn").Pool(workers) as pool:
            collect(pool.imap(function, jobs, chunksize=8))
    return results


def library_part(options: argparse.Namespace, began: float) -> dict[str, Any]:
    """The simulated MI300X through the library: the A/B grid, then the history path."""
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    accepted, defaults = _open_sim_parameters()
    common = options.common_fraction
    if common is None:
        common = defaults.get("common_fraction")
    extra = dict(_parse_option(text) for text in options.sim_option)
    shares: list[float | None] = list(options.code_shares)
    model_note = ""
    if "placement_fraction" not in accepted:
        shares = [None]
        model_note = "this simulator has no code-object share: one run with its own split"
    root = Path(tempfile.mkdtemp(prefix="gate-quality-sim-"))
    try:
        kernels = write_sim_kernels(root / "kernels")
        models = {
            share: sim_open_kwargs(accepted, options.run_spread, common, share, extra)
            for share in shares
        }
        sizes = {"long": options.long_elements, "short": options.short_elements}
        draw = random.Random(options.seed)
        seeds = iter(lambda: draw.getrandbits(31), None)  # distinct runs, reproducibly
        jobs = []
        for share, model in models.items():
            for size, elements in sizes.items():
                heads = {AA: (kernels.base, {}), AA_OTHER: (kernels.other, {})}
                for slowdown in SIM_SLOWDOWNS:
                    path, fingerprint = kernels.slowed[slowdown]
                    heads[f"+{slowdown:.0%}"] = (path, {fingerprint: 1.0 + slowdown})
                for point, (head, slowdown_map) in heads.items():
                    jobs += [
                        {
                            "share": share,
                            "size": size,
                            "point": point,
                            "elements": elements,
                            "model": model,
                            "base": kernels.base,
                            "head": head,
                            "slowdown": slowdown_map,
                            "budget": options.budget,
                            "seed": next(seeds),
                        }
                        for _ in range(options.trials)
                    ]
        ab_trials = _pool_map(sim_ab_trial, jobs, options.workers, "A/B")
        history_share = options.history_share if shares != [None] else None
        history_model = sim_open_kwargs(accepted, options.run_spread, common, history_share, extra)
        slowed = [(s, *kernels.slowed[s]) for s in SIM_HISTORY_SLOWDOWNS]
        history_jobs = [
            {
                "elements": options.long_elements,
                "model": history_model,
                "run_spread": options.run_spread,
                "base": kernels.base,
                "slowed": slowed,
                "budget": options.budget,
                "save_seeds": [next(seeds) for _ in range(max(HISTORY_SAVES))],
                "judged_seed": next(seeds),
            }
            for _ in range(options.trials)
        ]
        history_trials = _pool_map(sim_history_trial, history_jobs, options.workers, "history")
        settings = _model_settings(history_model)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ab_rows = score_sim_ab(ab_trials, models)
    history_rows = score_sim_history(history_trials)
    return {
        "title": "",
        "part": "library",
        "backend": "sim",
        "device": "Simulated AMD Instinct MI300X",
        "command": options.command,
        "started": started,
        "complete": True,
        "model": {
            "open_sim": {str(share): model for share, model in models.items()},
            "history_model": history_model,
            "settings": settings,
            "note": model_note,
        },
        "ab": ab_rows,
        "history": history_rows,
        "ab_trials": ab_trials,
        "history_trials": history_trials,
        "wall_s": time.perf_counter() - began,
    }


def _model_settings(model: Mapping[str, Any]) -> dict[str, Any]:
    """The simulated device's full settings for `model` (what the run really used)."""
    from pytest_gpuperf.sim import device as sim

    backend = sim.open(0, seed=0, **model)
    try:
        settings = backend.settings
        found = {
            name: getattr(settings, name)
            for name in (
                "run_spread",
                "common_fraction",
                "placement_fraction",
                "code_fraction",
                "jitter",
                "launch_overhead_s",
                "host_launch_s",
                "cache_speedup",
            )
            if hasattr(settings, name)
        }
        found["model_version"] = getattr(sim, "MODEL_VERSION", "?")
        return found
    finally:
        backend.close()


def score_sim_ab(trials: Sequence[Mapping[str, Any]], models: Mapping[Any, Any]) -> list[dict]:
    rows = []
    for share in models:
        for size in ("long", "short"):
            by_point: dict[str, list[Trial]] = {}
            for t in trials:
                if t["share"] == share and t["size"] == size:
                    by_point.setdefault(t["point"], []).append(
                        Trial(
                            name=t["point"],
                            status="pass",
                            test_outcome="passed",
                            state=t["state"],
                            ratio=t["ratio"],
                            ratio_ci=tuple(t["ratio_ci"]),
                            pairs=t["pairs"],
                            threshold=0.0,
                            time_s=t["time_s"],
                            efficiency=math.nan,
                            relative_ci=math.nan,
                            base_efficiency=None,
                            drift=t.get("drift"),
                            drift_basis=t.get("drift_basis", ""),
                            median_ratio=t.get("median_ratio"),
                        )
                    )
            for point, items in by_point.items():
                kind = point if point in (AA, AA_OTHER) else SLOWER
                target = {
                    AA: "<= 1% regressed",
                    AA_OTHER: "<= 1% regressed",
                    "+5%": ">= 95% regressed",
                }.get(point, "")
                row = ab_row(f"{size} {point}", kind, items, target)
                row["code_share"] = share
                rows.append(row)
    return rows


def score_sim_history(trials: Sequence[Mapping[str, Any]]) -> list[dict]:
    grouped: dict[tuple[int, float], dict[str, list]] = {}
    for trial in trials:
        for check in trial["checks"]:
            slot = grouped.setdefault((check["saves"], check["tolerance"]), {})
            slot.setdefault(check["judged"], []).append(check)
    rows = []
    for (saves, tolerance), checks in sorted(grouped.items()):
        ordered = {"unchanged": checks["unchanged"]}
        ordered.update((k, v) for k, v in checks.items() if k != "unchanged")
        rows.append(history_row(saves, tolerance, ordered))
    return rows


def _parse_option(text: str) -> tuple[str, float]:
    key, _, value = text.partition("=")
    if not key or not value:
        raise argparse.ArgumentTypeError(f"--sim-option takes KEY=VALUE, got {text!r}")
    return key.strip(), float(value)


# -- output --------------------------------------------------------------------------------


def _pct(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{100 * value:.{digits}f}%"


def _num(value: Any, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, fmt)


AB_HEADERS = [
    "point", "trials", "regressed", "improved", "inconclusive", "pass", "median head/base",
    "median CI +-", "median drift +-", "median pairs", "median time", "target", "met",
]  # fmt: skip


def ab_table(rows: Sequence[Mapping[str, Any]], with_share: bool = False) -> tuple[list, list]:
    headers = (["code share"] if with_share else []) + AB_HEADERS
    table = []
    for r in rows:
        cells = [
            r["point"],
            f"{r['trials']}" + (f" (+{r['invalid']} invalid)" if r["invalid"] else ""),
            _pct(r["regressed"]),
            _pct(r["improved"]),
            _pct(r["inconclusive"]),
            _pct(r["pass"]),
            _num(r["median_ratio"], ".4f"),
            _pct(r["median_ci_half"], 2),
            _pct(r.get("median_drift"), 2),
            _num(r["median_pairs"], ".0f"),
            f"{_num(r['median_time_us'], '.1f')} us",
            r["target"] or "-",
            r["met"] or "-",
        ]
        if with_share:
            share = r.get("code_share")
            cells.insert(0, "model's" if share is None else f"{share:.2f}")
        table.append(cells)
    return headers, table


def history_table(rows: Sequence[Mapping[str, Any]]) -> tuple[list, list]:
    detect_keys = [k for k in (rows[0] if rows else {}) if k.startswith("detect_")]
    headers = [
        "baseline", "tolerance", "trials", "false alarms", "unchanged judged improved",
        *(f"detects {k[len('detect_'):]}" for k in detect_keys),
        "median allowance", "median spread (+-95%)",
    ]  # fmt: skip
    table = []
    for r in rows:
        what = "1 save (prior spread)" if r["saves"] == 1 else f"{r['saves']} saves ({r['basis']})"
        table.append(
            [
                what,
                _pct(r["tolerance"], 0),
                r["trials"],
                _pct(r["false_alarm"]),
                _pct(r["improved"]),
                *(_pct(r[k]) for k in detect_keys),
                _pct(r["median_allowance"], 2),
                _pct(r["median_spread"], 2),
            ]
        )
    return headers, table


def render(document: Mapping[str, Any], markdown: bool) -> str:
    table = markdown_table if markdown else text_table
    lines = [document["title"], ""]
    for note in document.get("notes", ()):
        lines.append(("- " if markdown else "  ") + note)
    if document.get("notes"):
        lines.append("")
    with_share = document["part"] == "library"
    lines += ["A/B in one run (--gpuperf-compare), state of each comparison:", ""]
    lines += [table(*ab_table(document.get("ab", ()), with_share)), ""]
    if document.get("history"):
        what = (
            "long kernel, histories from separate processes"
            if document["part"] == "processes"
            else "long kernel, each save a fresh simulated device"
        )
        lines += [f"Stored baseline ({what}), judged by check_baseline:", ""]
        lines += [table(*history_table(document["history"])), ""]
    elif document.get("history_skipped"):
        lines += [f"Stored baseline: not scored ({document['history_skipped']}).", ""]
    return "\n".join(lines)


def describe(document: dict[str, Any], options: argparse.Namespace) -> None:
    """The title and the notes that say what was run, on what, with which parameters."""
    date = document["started"][:10]
    if document["part"] == "processes":
        processes = len(document["processes"])
        simulated = " (SIMULATED)" if document.get("backend") == "sim" else ""
        document["title"] = (
            f"Gate quality through pytest on {document['device']}{simulated}, {date}: "
            f"{processes} separate processes, {document['wall_s']:.0f} s"
            + ("" if document["complete"] else f" (PARTIAL: {document.get('stopped', '')})")
        )
        plan = document.get("plan", {})
        walls = document.get("process_wall_s", {})
        document["notes"] = [
            f"command: `{document['command']}`",
            f"plan: {_plan_line(plan_from_json(plan))}" if plan else "plan: none",
            f"per process: median {_num(walls.get('median'), '.1f')} s, max "
            f"{_num(walls.get('max'), '.1f')} s, "
            f"first (compiles) {_num(walls.get('first'), '.1f')} s",
            "A/A' is a HEAD edit that changes the code object but not the work (GQ_SALT): what "
            "every real A/B comparison times, since identical code is never timed without "
            "--gpuperf-compare-force",
        ]
    else:
        settings = document["model"]["settings"]
        document["title"] = (
            f"Gate quality on the SIMULATED MI300X (library), {date}: {options.trials} trials per "
            f"point, each a fresh simulated device, {document['wall_s']:.0f} s"
        )
        document["notes"] = [
            f"command: `{document['command']}`",
            "model: "
            + ", ".join(
                f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in settings.items()
            )
            + " (the history part's; the A/B grid varies the code share: placement = 1 - "
            "common - code)",
            "slower heads: their own code object, slowed by the simulator's kernel_slowdown "
            "keyed by that fingerprint; A/A' other code of equal speed",
        ]
        if document["model"]["note"]:
            document["notes"].append(document["model"]["note"])


def plan_from_json(plan: Mapping[str, Any]) -> Plan:
    sizes = plan.get("sizes") or {
        size: plan[f"{size}_elements"] for size in SIZES if f"{size}_elements" in plan
    }
    return Plan(dict(sizes), dict(plan["permille"]), dict(plan["calibration"]))


DOCS_INTRO = """\
## Gate quality: A/B in one run and learned-history baselines

`bench/gate_quality.py` measures the false alarms and detections of the two gates that learn
their noise: the A/B comparison in one run (`--gpuperf-compare`) and stored baselines with a
history of saves (`--gpuperf-save`), each decision made by the gate's own functions. The
processes part runs separate `pytest` processes in a throwaway git project whose HEAD really
reads more bytes (`vector_add_more`, kernels/bench_variants.hip); the library part runs
thousands of fresh simulated MI300X devices. The script's docstring says what each point is.
"""


def update_docs(document: Mapping[str, Any]) -> None:
    """Write the run's Markdown into docs/benchmarks.md: one subsection per part (GPU
    processes, simulated library), inside the ab-gate-quality section."""
    if document["part"] == "processes" and document.get("backend") == "sim":
        raise SystemExit(
            "--update-docs: the processes part on the simulated device is a smoke test"
        )
    text = DOCS.read_text() if DOCS.exists() else ""
    inner = {
        "cuda": f"{DOCS_MARKER}-gpu",
        "sim": f"{DOCS_MARKER}-sim",
    }
    if f"<!-- {DOCS_MARKER}:begin -->" not in text:
        skeleton = DOCS_INTRO + "".join(
            f"\n<!-- {marker}:begin -->\n(not run yet)\n<!-- {marker}:end -->\n"
            for marker in inner.values()
        )
        replace_section(DOCS, DOCS_MARKER, skeleton)
    key = "sim" if document["part"] == "library" else "cuda"
    body = "### " + render(document, markdown=True)
    replace_section(DOCS, inner[key], body)


# -- main ----------------------------------------------------------------------------------


def _on_signal(signum: int, _frame: Any) -> None:
    raise Stopped(signal.Signals(signum).name)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--backend",
        default="sim",
        choices=["sim", "cuda", "hip"],
        help="cuda/hip: the processes part on that GPU; sim: the library part (sim)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the processes part, small (with --backend sim: the smoke test of the GPU run: "
        "8 processes, 4M and 256K elements)",
    )
    parser.add_argument("--processes", type=int, help="processes part: pytest processes (cuda: 50)")
    parser.add_argument(
        "--budget", type=float, default=1.0, help="--gpuperf-budget per measurement, s (1.0)"
    )
    parser.add_argument(
        "--deadline",
        type=float,
        help="processes part: start no process that would end past this many seconds from the "
        "start (cuda: 520, to fit `timeout 560`; 0: none)",
    )
    parser.add_argument(
        "--process-timeout", type=float, default=150.0, help="per pytest process, s (150)"
    )
    parser.add_argument(
        "--long-elements", type=int, help=f"the long kernel's fp32 elements ({LONG_ELEMENTS})"
    )
    parser.add_argument(
        "--mid-elements",
        type=int,
        help=f"processes part: the mid kernel's fp32 elements ({MID_ELEMENTS}; 0: no mid size)",
    )
    parser.add_argument(
        "--short-elements", type=int, help=f"the short kernel's fp32 elements ({SHORT_ELEMENTS})"
    )
    parser.add_argument(
        "--plan-from",
        metavar="JSON",
        help="processes part: take the plan (sizes, extra bytes per point) of an earlier part's "
        "--out file instead of calibrating, so the parts can be merged",
    )
    parser.add_argument(
        "--merge",
        nargs="+",
        metavar="JSON",
        help="join the processes of several --out files of the same plan into one document "
        "(written to --out, printed, and with --update-docs written into the docs)",
    )
    parser.add_argument(
        "--no-calibrate",
        dest="calibrate",
        action="store_false",
        help="x%% more bytes for an x%% slowdown instead of the measured time slope",
    )
    parser.add_argument(
        "--history-trials", type=int, default=200, help="processes part: history trials (200)"
    )
    parser.add_argument("--trials", type=int, help="library part: trials per point (500)")
    parser.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="library part: processes in the pool (the CPU count; 1: no pool)",
    )
    parser.add_argument(
        "--run-spread",
        type=float,
        default=0.07,
        help="library part: open_sim's run_spread, +-95%% (0.07, the seed's MI300X figure)",
    )
    parser.add_argument(
        "--common-fraction", type=float, help="library part: open_sim's (default: its own)"
    )
    parser.add_argument(
        "--code-shares",
        type=lambda text: [float(v) for v in text.split(",")],
        default=list(CODE_SHARES),
        help="library part: the run-to-run variance's share per code object, a grid "
        f"(default {','.join(map(str, CODE_SHARES))})",
    )
    parser.add_argument(
        "--history-share",
        type=float,
        default=0.05,
        help="library part: the code share of the history path's model (0.05)",
    )
    parser.add_argument(
        "--sim-option",
        action="append",
        default=[],
        help="library part: another open_sim option, KEY=VALUE (repeatable)",
    )
    parser.add_argument(
        "--seed", type=int, default=20260101, help="seeds every draw of the script (20260101)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary project")
    parser.add_argument(
        "--out", help="write every trial and the scores as JSON (after every process)"
    )
    parser.add_argument("--markdown", action="store_true", help="print the Markdown tables too")
    parser.add_argument(
        "--update-docs", action="store_true", help="write the tables into docs/benchmarks.md"
    )
    parser.add_argument(
        "--render",
        metavar="JSON",
        help="print (and with --update-docs, write) the tables of a saved --out file instead "
        "of running, e.g. one the GPU machine wrote",
    )
    parser.add_argument("--child", choices=["calibrate"], help=argparse.SUPPRESS)
    parser.add_argument("child_args", nargs="?", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    options.part = "processes" if options.backend != "sim" or options.quick else "library"
    quick = options.quick
    defaults = {
        "processes": 8 if quick else 50,
        "long_elements": (4 << 20) if quick and options.backend == "sim" else LONG_ELEMENTS,
        "mid_elements": (1 << 20) if quick and options.backend == "sim" else MID_ELEMENTS,
        "short_elements": (256 << 10) if quick and options.backend == "sim" else SHORT_ELEMENTS,
        "trials": 500,
        "deadline": 520.0 if options.backend != "sim" else 0.0,
    }
    for name, value in defaults.items():
        if getattr(options, name) is None:
            setattr(options, name, value)
    if options.update_docs and options.quick:
        parser.error("--update-docs: a --quick run is a smoke test, its numbers stay out of docs")
    options.command = "PYTHONPATH=. python3 bench/gate_quality.py " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])
    )
    return options


def render_saved(path: Path, options: argparse.Namespace) -> int:
    """The tables of a document written by --out (a run cut off before its end has no title
    and no history scores: what it has is shown)."""
    document = json.loads(path.read_text())
    if not document.get("title"):
        count = len(document.get("processes", ()))
        document["title"] = (
            f"Gate quality ({document.get('part')}, {document.get('backend')}), "
            f"{document.get('started', '')[:10]}: PARTIAL, {count} processes, no history scores"
        )
    return publish(document, options)


def merge(documents: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One document from the processes parts of one plan (run in separate device calls):
    their processes re-numbered in order, scored again as one run. Parts of different plans
    are refused: their slower heads read different extra bytes."""
    if not documents:
        raise ValueError("nothing to merge")
    if any(d.get("part") != "processes" for d in documents):
        raise ValueError("--merge joins processes parts (GPU runs), not the library part")
    plans = [d.get("plan", {}) for d in documents]
    if any(p.get("permille") != plans[0].get("permille") for p in plans):
        raise ValueError(
            "the parts have different plans (extra bytes per point): run the later parts with "
            "--plan-from the first part's file"
        )
    first = documents[0]
    records = []
    for document in documents:
        for process in document.get("processes", ()):
            records.append(record_from_json(len(records), process))
    spread = 0.07 if first.get("backend") == "sim" else None
    rows, _, skipped = score_history(records, 200, 0, spread)
    walls = [r.wall_s for r in records]
    complete = all(d.get("complete") for d in documents)
    merged = {
        **{k: v for k, v in first.items() if k not in ("processes", "title", "notes")},
        "title": "",
        "complete": complete,
        "stopped": "; ".join(d.get("stopped", "") for d in documents if d.get("stopped")),
        "parts": [
            {"command": d.get("command"), "started": d.get("started"), "wall_s": d.get("wall_s")}
            for d in documents
        ],
        "processes": [r.to_json() for r in records],
        "ab": score_ab(records),
        "history": rows,
        "history_skipped": skipped,
        "wall_s": sum(d.get("wall_s") or 0.0 for d in documents),
        "process_wall_s": {
            "median": _median(walls),
            "max": max(walls) if walls else math.nan,
            "first": walls[0] if walls else math.nan,
        },
    }
    merged["command"] = " ; ".join(str(d.get("command", "")) for d in documents)
    return merged


def record_from_json(index: int, process: Mapping[str, Any]) -> ProcessRecord:
    """A process of a saved document (its history points keep their measurements)."""
    trials = {}
    for name, data in process.get("trials", {}).items():
        fields = {k: v for k, v in data.items() if k in Trial.__dataclass_fields__}
        if fields.get("ratio_ci") is not None:
            fields["ratio_ci"] = tuple(fields["ratio_ci"])
        if data.get("measurement"):
            fields["measurement"] = measurement_from_compact(data["measurement"])
        trials[name] = Trial(**fields)
    return ProcessRecord(
        index,
        process.get("seed", index),
        process.get("wall_s", math.nan),
        process.get("returncode"),
        trials,
        process.get("problem", ""),
        process.get("device", ""),
    )


def merge_saved(paths: Sequence[Path], options: argparse.Namespace) -> int:
    documents = [json.loads(path.read_text()) for path in paths]
    try:
        merged = merge(documents)
    except ValueError as error:
        raise SystemExit(f"--merge: {error}") from None
    merged["started"] = min(d.get("started", "") for d in documents)
    describe(merged, options)
    merged["notes"].insert(1, f"merged from {len(paths)} parts: {', '.join(map(str, paths))}")
    return publish(merged, options)


def publish(document: dict[str, Any], options: argparse.Namespace) -> int:
    """Write --out, print the tables, and with --update-docs write them into the docs."""
    write_json(options.out, document)
    print(render(document, markdown=False))
    if options.markdown:
        print()
        print(render(document, markdown=True))
    if options.update_docs:
        update_docs(document)
        print(f"wrote {DOCS.relative_to(REPO_ROOT)}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(argv)
    if options.child == "calibrate":
        calibrate_child(json.loads(options.child_args))
        return 0
    if options.render:
        return render_saved(Path(options.render), options)
    if options.merge:
        return merge_saved([Path(p) for p in options.merge], options)
    began = time.perf_counter()
    previous = {s: signal.signal(s, _on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        if options.part == "processes":
            document = processes_part(options, began)
        else:
            try:
                document = library_part(options, began)
            except Stopped as signal_name:
                print(f"stopped by {signal_name}: the library part keeps nothing", file=sys.stderr)
                return 130
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    describe(document, options)
    return publish(document, options)


if __name__ == "__main__":
    sys.exit(main())
