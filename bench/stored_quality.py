"""Stored baselines that borrow strength: how often the stored-baseline gate cries wolf and
how often it catches a slowdown when each entry's prior is pooled from its file
(docs/baselines.md, "How the gate's band is made"). Every decision is the gate's own: entries
are built by --gpuperf-save's code (gate.saving.plan_save), pooled by the store's code
(baseline.pool.FilePool, as BaselineStore.lookup does) and judged by gate.stored.check_baseline.

Three parts:

  replay  (--replay GQ.json) the per-process results of a `bench/gate_quality.py` processes run
          (on the H100, 2026-11-24: 47 separate processes, 7 kernels and their A/B bases each).
          Every kernel of a process is one entry of a file; a trial takes K saves of every
          entry from K processes and judges another process: its unchanged kernel (a false
          alarm when regressed), the same work in other code (A/A', a false alarm too: a pull
          request that edits a kernel without slowing it), and its slower kernels (detections).
  model   a Monte Carlo of files whose entries scatter as the H100's did between processes:
          sigma(t)^2 = a^2 + (b / t)^2 fitted to the replayed run's long and short kernels (or
          the defaults below), entries at the kernel times of baselines/h100-sxm.toml (the
          project's perf suite), K saves each, judged unchanged and 1, 2, 3, 5% slower (time).
  sim     the simulated device through the library (SIMULATED): K fresh devices save a file
          of vector adds of several sizes; a further device is judged unchanged and slower.
          The plugin takes the simulated device's spread as known (no history can improve on
          it), so the sim part judges as a real backend's entry would be judged (the backend's
          prior worth PRIOR_DF), to show what pooling does under the simulator's noise model.

Usage (from the repository root):
  PYTHONPATH=. python3 bench/stored_quality.py --replay gq.json --markdown   # replay + model
  PYTHONPATH=. python3 bench/stored_quality.py --model-only                  # model, defaults
  PYTHONPATH=. python3 bench/stored_quality.py --sim --sim-trials 100        # SIMULATED part
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import tomllib

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO_ROOT, markdown_table, read_run, text_table, write_json

PEAK_BPS = 3.352e12  # H100 SXM's datasheet bandwidth (the device table's figure)
SAVES = (1, 3, 5)
TOLERANCE = 0.01  # the plugin's default tolerance
# The one-sided level each check is judged at (--false-alarm-rate): 1% for one test alone; a
# run's budget sets its own (A / N for N tests under --gpuperf-suite-alarm A).
LEVEL = {"false_alarm_rate": 0.01}
SLOWDOWNS = (0.01, 0.02, 0.03, 0.05)
# The H100's between-process spread (2026-11-24, 47 processes, bench/gate_quality.py): sigma of
# log efficiency 0.16% for the 145 us cold vector add, 0.90% for the 7.8 us one.
DEFAULT_SPREADS = {145.2e-6: 0.0016, 7.78e-6: 0.0090}
SUITE_FILE = REPO_ROOT / "baselines" / "h100-sxm.toml"
PATH = "stored-quality (in memory)"


@dataclass(frozen=True)
class Saved:
    """One kernel's result in one run: what a save records."""

    efficiency: float
    time_s: float
    rel_ci: float


def measurement(kernel: str, run: Saved, bytes_moved: int, backend: str = "cuda") -> Any:
    """`run` as the engine reports it; the declared bytes stay the kernel's own from save to
    save (other bytes would restart its history), so its time follows from the efficiency."""
    from pytest_gpuperf.engine.results import Measurement

    time_s = bytes_moved / (run.efficiency * PEAK_BPS)
    return Measurement(
        name=kernel,
        kernel=kernel,
        cache="cold",
        bytes_moved=bytes_moved,
        time_s=time_s,
        time_ci_s=(time_s * (1 - run.rel_ci), time_s * (1 + run.rel_ci)),
        samples_s=(time_s,) * 100,
        peak_bps=PEAK_BPS,
        device_key="h100-sxm",
        device_name="NVIDIA H100 SXM 80GB",
        backend=backend,
        simulated=False,
        queue_method="flush kernel",
        fingerprint=f"sha256:{kernel}",
    )


def build_entry(kernel: str, runs: Sequence[Saved]) -> Any:
    """The entry --gpuperf-save builds from these runs (oldest first), by its own code."""
    from pytest_gpuperf.gate.policy import prior_run_spread
    from pytest_gpuperf.gate.saving import SaveContext, plan_save

    bytes_moved = max(int(runs[0].efficiency * PEAK_BPS * runs[0].time_s), 1)
    entry = None
    for number, run in enumerate(runs):
        m = measurement(kernel, run, bytes_moved)
        context = SaveContext(
            test_id=f"bench::{kernel}",
            path=PATH,
            device_key="h100-sxm",
            prior_spread=prior_run_spread("cuda", m.time_s, "cold"),
            history_length=len(runs),
            when=f"2026-01-01T00:00:{number:02d}Z",
        )
        _, entry = plan_save(m, entry, context)
    return entry


def judge(entries: Mapping[str, Any], kernel: str, run: Saved, tolerance: float) -> Any:
    """The stored-baseline check of `run` against `kernel`'s entry, pooled with the file."""
    from pytest_gpuperf.baseline.pool import FilePool
    from pytest_gpuperf.gate.stored import check_baseline

    entry = entries[kernel]
    pooled = FilePool(entries.values()).for_entry(entry.key, entry.cache, entry.time_s)
    ref = entry.to_ref(PATH, "h100-sxm", pooled)
    m = measurement(kernel, run, entry.bytes_moved)
    return check_baseline(m, ref, tolerance=tolerance, false_alarm_rate=LEVEL["false_alarm_rate"])


def rate(checks: Sequence[Any], outcome: str = "regressed") -> float:
    return sum(c.outcome == outcome for c in checks) / len(checks) if checks else math.nan


def pooled_share(checks: Sequence[Any]) -> float:
    """How many of the checks the file's pool decided (the rest: the backend's prior)."""
    return sum(c.band is not None and c.band.basis == "pooled" for c in checks) / len(checks)


# -- replay: a gate_quality processes run ---------------------------------------------------


def processes_from(document: Mapping[str, Any]) -> list[dict[str, Saved]]:
    """Per process: every head kernel, and each A/B base that is another code object's run."""
    runs = []
    for process in document.get("processes", ()):
        kernels: dict[str, Saved] = {}
        for name, trial in process.get("trials", {}).items():
            if not trial.get("efficiency") or trial.get("test_outcome") not in ("passed", "failed"):
                continue
            rel_ci = trial.get("relative_ci") or 0.0
            kernels[name] = Saved(trial["efficiency"], trial["time_s"], rel_ci)
            base = trial.get("base_efficiency")
            if base and not name.endswith("_same"):
                time_s = trial["time_s"] * trial["efficiency"] / base
                kernels[f"{name}.base"] = Saved(base, time_s, rel_ci)
        runs.append(kernels)
    return runs


def replay_points(names: set[str]) -> list[tuple[str, str, str]]:
    """(entry, judged kernel, what it is) for every size of the run: its `<size>_same` kernel
    is the entry; judged are the same kernel (unchanged), `<size>_equiv` (the same work in
    other code: a pull request that edits a kernel without slowing it) and `<size>_slow*`."""
    points = []
    for entry in sorted(n for n in names if n.endswith("_same")):
        size = entry.removesuffix("_same")
        points.append((entry, entry, "unchanged"))
        if f"{size}_equiv" in names:
            points.append((entry, f"{size}_equiv", "other code, same work"))
        points += [
            (entry, n, "slower")
            for n in sorted(names)
            if n.startswith(f"{size}_slow") and "." not in n
        ]
    return points


def replay(document: Mapping[str, Any], trials: int, seed: int) -> list[dict[str, Any]]:
    processes = processes_from(document)
    names = set.intersection(*(set(p) for p in processes)) if processes else set()
    points = replay_points(names)
    usable = [p for p in processes if all(k in p for _, k, _ in points)]
    if not points or len(usable) < max(SAVES) + 1:
        raise SystemExit(f"replay needs {max(SAVES) + 1} processes with every kernel")
    rng = random.Random(seed)
    ratios = {
        kernel: statistics.median(p[kernel].time_s / p[entry].time_s for p in usable)
        for entry, kernel, _ in points
    }
    checks: dict[tuple[int, str, str], list[Any]] = {}
    for trial in range(trials):
        judged = usable[trial % len(usable)]
        others = rng.sample([p for p in usable if p is not judged], max(SAVES))
        for count in SAVES:
            history = others[:count]
            entries = {k: build_entry(k, [p[k] for p in history]) for k in sorted(names)}
            for entry, kernel, _ in points:
                check = judge(entries, entry, judged[kernel], TOLERANCE)
                checks.setdefault((count, entry, kernel), []).append(check)
    rows = []
    for (count, entry, kernel), items in sorted(checks.items()):
        what = {k: w for _, k, w in points}[kernel]
        rows.append(
            {
                "part": "replay",
                "saves": count,
                "entry": entry,
                "judged": kernel,
                "what": what,
                "time_ratio": ratios[kernel],
                "time_us": statistics.median(p[entry].time_s for p in usable) * 1e6,
                "trials": len(items),
                "regressed": rate(items),
                "improved": rate(items, "improved"),
                "median_allowance": statistics.median(c.allowance for c in items),
                "pooled": pooled_share(items),
            }
        )
    return rows


# -- model: files with the H100's spreads ---------------------------------------------------


def fit_spread(points: Mapping[float, float]) -> tuple[float, float]:
    """(a, b) of sigma(t)^2 = a^2 + (b / t)^2 through the longest and shortest kernel."""
    (t_short, s_short), (t_long, s_long) = sorted(points.items())[0], sorted(points.items())[-1]
    b2 = (s_short**2 - s_long**2) / (1 / t_short**2 - 1 / t_long**2)
    a2 = max(s_long**2 - b2 / t_long**2, 0.0)
    return math.sqrt(a2), math.sqrt(max(b2, 0.0))


def spreads_from(document: Mapping[str, Any]) -> dict[float, float]:
    processes = processes_from(document)
    found = {}
    for kernel in ("long_same", "short_same"):
        runs = [p[kernel] for p in processes if kernel in p]
        if len(runs) >= 5:
            time_s = statistics.median(r.time_s for r in runs)
            found[time_s] = statistics.stdev(math.log(r.efficiency) for r in runs)
    return found if len(found) == 2 else dict(DEFAULT_SPREADS)


def suite_times() -> list[float]:
    document = tomllib.loads(SUITE_FILE.read_text())
    return sorted(e["time_s"] for e in document["entry"] if e.get("cache", "cold") == "cold")


def model(a: float, b: float, trials: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    times = suite_times()

    def sigma(time_s: float) -> float:
        return math.hypot(a, b / time_s)

    def run(time_s: float, slowdown: float = 0.0) -> Saved:
        efficiency = 0.8 * math.exp(rng.gauss(0.0, sigma(time_s))) / (1 + slowdown)
        return Saved(efficiency, time_s * (1 + slowdown), 0.002)

    checks: dict[tuple[int, str, float], list[Any]] = {}
    for _ in range(trials):
        for count in SAVES:
            entries = {
                f"k{i:02d}": build_entry(f"k{i:02d}", [run(t) for _ in range(count)])
                for i, t in enumerate(times)
            }
            for i, t in enumerate(times):
                band = "7-8 us" if 7e-6 <= t <= 8.2e-6 else ">= 20 us" if t >= 20e-6 else ""
                if not band:
                    continue
                for slowdown in (0.0, *SLOWDOWNS):
                    check = judge(entries, f"k{i:02d}", run(t, slowdown), TOLERANCE)
                    checks.setdefault((count, band, slowdown), []).append(check)
    rows = []
    for (count, band, slowdown), items in sorted(checks.items()):
        rows.append(
            {
                "part": "model",
                "saves": count,
                "kernels": band,
                "slowdown": slowdown,
                "trials": len(items),
                "regressed": rate(items),
                "median_allowance": statistics.median(c.allowance for c in items),
                "pooled": pooled_share(items),
            }
        )
    return rows


# -- sim: the simulated device through the library (SIMULATED) ------------------------------

SIM_SIZES = (1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20)


def sim(trials: int, seed: int, run_spread: float, budget_s: float) -> list[dict[str, Any]]:
    """K fresh simulated devices save vector adds of several sizes; one more is judged."""
    from pytest_gpuperf import open_device
    from pytest_gpuperf.baseline.pool import FilePool
    from pytest_gpuperf.gate.policy import PRIOR_DF, prior_run_spread
    from pytest_gpuperf.gate.saving import SaveContext, plan_save
    from pytest_gpuperf.gate.stored import check_baseline

    source = REPO_ROOT / "kernels" / "vector_add.hip"
    warnings.simplefilter("ignore")

    def device_run(device_seed: int) -> list[Any]:
        with open_device("sim", seed=device_seed, run_spread=run_spread) as device:
            kernel = device.kernel(source, "vector_add")
            out = []
            for n in SIM_SIZES:
                a = device.empty(n)
                c = device.empty(n)
                m = device.measure(
                    kernel,
                    grid=n // 256,
                    block=256,
                    args=(a, a, c, n),
                    bytes=12 * n,
                    cache="cold",
                    budget_s=budget_s,
                )
                out.append(m)
            return out

    checks: dict[tuple[int, float], list[Any]] = {}
    for trial in range(trials):
        base_seed = seed + 1000 * trial
        saves = [device_run(base_seed + k) for k in range(max(SAVES))]
        judged = device_run(base_seed + 999)
        for count in SAVES:
            entries = {}
            for index, _ in enumerate(SIM_SIZES):
                entry = None
                for run in saves[:count]:
                    m = run[index]
                    context = SaveContext(
                        test_id=f"sim::{index}",
                        path=PATH,
                        device_key="mi300x-sim",
                        prior_spread=prior_run_spread("sim", m.time_s, "cold", run_spread),
                    )
                    _, entry = plan_save(m, entry, context)
                entries[index] = entry
            pool = FilePool(entries.values())
            for index, entry in entries.items():
                ref = entry.to_ref(
                    PATH, "mi300x-sim", pool.for_entry(entry.key, "cold", entry.time_s)
                )
                for slowdown in (0.0, 0.03, 0.05, 0.10):
                    m = judged[index] if not slowdown else _slowed(judged[index], slowdown)
                    check = check_baseline(
                        m,
                        ref,
                        tolerance=TOLERANCE,
                        prior_df=PRIOR_DF,
                        false_alarm_rate=LEVEL["false_alarm_rate"],
                    )
                    checks.setdefault((count, slowdown), []).append(check)
    return [
        {
            "part": "sim",
            "saves": count,
            "slowdown": slowdown,
            "run_spread": run_spread,
            "trials": len(items),
            "regressed": rate(items),
            "median_allowance": statistics.median(c.allowance for c in items),
            "pooled": pooled_share(items),
        }
        for (count, slowdown), items in sorted(checks.items())
    ]


def _slowed(m: Any, slowdown: float) -> Any:
    from dataclasses import replace

    low, high = m.time_ci_s
    factor = 1 + slowdown
    return replace(
        m,
        time_s=m.time_s * factor,
        time_ci_s=(low * factor, high * factor),
        samples_s=tuple(s * factor for s in m.samples_s),
    )


# -- output ---------------------------------------------------------------------------------


TAIL = ["trials", "regressed", "allowance", "pooled"]


def _tail(row: Mapping[str, Any]) -> list[Any]:
    """The cells every part's rows end with (TAIL)."""
    return [
        row["trials"],
        f"{row['regressed']:.1%}",
        f"{row['median_allowance']:.2%}",
        f"{row['pooled']:.0%}",
    ]


def _slower(row: Mapping[str, Any]) -> str:
    return f"{row['slowdown']:.0%}" if row["slowdown"] else "unchanged"


def render(document: Mapping[str, Any], markdown: bool) -> str:
    table = markdown_table if markdown else text_table
    rows = document["rows"]
    parts = {
        "replay": (
            "Replay of the processes' own results (each kernel an entry; K saves from K other "
            "processes; tolerance 1%):",
            ["saves", "entry", "judged", "what", "time"],
            lambda r: [
                r["saves"],
                r["entry"],
                r["judged"],
                r["what"],
                f"{r['time_ratio'] - 1:+.1%}",
            ],
        ),
        "model": (
            "Model: files of the perf suite's cold kernel times, sigma(t) = "
            f"hypot({document['a']:.3%}, {document['b'] * 1e9:.0f} ns / t) (tolerance 1%):",
            ["saves", "kernels", "slower by"],
            lambda r: [r["saves"], r["kernels"], _slower(r)],
        ),
        "sim": (
            f"SIMULATED device, vector adds of {len(SIM_SIZES)} sizes, judged as a real "
            "backend's entries (tolerance 1%):",
            ["saves", "run_spread", "slower by"],
            lambda r: [r["saves"], f"{r['run_spread']:.1%}", _slower(r)],
        ),
    }
    lines = [document["title"], ""]
    for part, (heading, head, cells) in parts.items():
        chosen = [r for r in rows if r["part"] == part]
        if chosen:
            lines += [
                heading,
                "",
                table([*head, *TAIL], [[*cells(r), *_tail(r)] for r in chosen]),
                "",
            ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replay", type=Path, help="a bench/gate_quality.py processes JSON")
    parser.add_argument("--model-only", action="store_true", help="the model part, defaults")
    parser.add_argument("--sim", action="store_true", help="the SIMULATED library part")
    parser.add_argument("--trials", type=int, default=200, help="replay/model trials (200)")
    parser.add_argument("--sim-trials", type=int, default=60, help="sim trials (60)")
    parser.add_argument("--sim-spread", type=float, default=0.018, help="sim run_spread (0.018)")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument(
        "--false-alarm-rate",
        type=float,
        default=0.01,
        help="the one-sided level of each check (0.01; a 100-test run's budget: 0.0001)",
    )
    parser.add_argument("--out", type=Path, help="write the JSON here (default $OUT/...)")
    parser.add_argument("--markdown", action="store_true")
    options = parser.parse_args(argv)
    LEVEL["false_alarm_rate"] = options.false_alarm_rate
    rows: list[dict[str, Any]] = []
    source = "defaults (the H100 run of 2026-11-24)"
    spreads = dict(DEFAULT_SPREADS)
    if options.replay:
        document = read_run(options.replay)
        rows += replay(document, options.trials, options.seed)
        spreads = spreads_from(document)
        started = document.get("started", "")[:10]
        source = f"{options.replay.name} ({document.get('device', '?')}, {started})"
    a, b = fit_spread(spreads)
    if options.replay or options.model_only:
        rows += model(a, b, max(options.trials // 4, 20), options.seed)
    if options.sim:
        rows += sim(options.sim_trials, options.seed, options.sim_spread, 0.05)
    title = (
        f"Stored baselines with the file's pooled prior, {datetime.now(timezone.utc):%Y-%m-%d}: "
        f"spreads from {source}; each check at a one-sided {options.false_alarm_rate:g}"
    )
    out = {
        "title": title,
        "a": a,
        "b": b,
        "spreads": {str(k): v for k, v in spreads.items()},
        "rows": rows,
    }
    target = options.out
    if target is None and os.environ.get("OUT"):
        target = Path(os.environ["OUT"]) / "stored-quality.json"
    write_json(str(target) if target else None, out)
    print(render(out, options.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
