"""How often the gate cries wolf, and how often it catches a real regression.

A baseline is recorded in one run and compared with a measurement from another run, through
the plugin's verdict logic, for an unchanged kernel (every failure is a false alarm) and for
kernels slowed by 3%, 5%, 10% and 20% (every failure is a detection). Each is gated twice:
on plain efficiency, and on efficiency calibrated against the reference copy kernel measured
interleaved in the same run (measure.py: calibrated = efficiency / reference efficiency).

--backend sim (runs here, no GPU; numbers are SIMULATED): the simulated MI300X with +-7%
run-to-run noise (run_spread=0.07), over a grid of the fraction of that noise common to the
whole device (0, 0.5, 0.75, 0.9, 1.0); every run is a fresh simulated device with a fresh seed,
which is what a separate process on a real machine would draw; >= 500 runs per point.

--backend cuda (the H100): a real slowdown (vector_add_extra from kernels/bench_variants.hip
reads 3-20% more bytes than vector_add declares) and a real noise source (a separate process
that hogs memory bandwidth, on and off at random); every run is a separate process, >= 20 per
point, and every ordered pair of distinct processes is one (baseline, comparison) trial.

The allowance needs the run-to-run spread the baseline recorded; it is estimated from runs
that are not scored (sim: 200 separate pilot runs; cuda: the unchanged runs of the other
processes, leave-two-out), as `--gpuperf-save` over several runs would record it.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # the script's own directory, so it runs from anywhere
    KERNELS_DIR,
    device_spec,
    emit,
    markdown_table,
    regressed,
    run_child,
    text_table,
    write_json,
)

SLOWDOWNS = (0.03, 0.05, 0.10, 0.20)
FRACTIONS = (0.0, 0.5, 0.75, 0.9, 1.0)
SIM_ELEMENTS = 1 << 16
CUDA_ELEMENTS = 32 << 20  # the MI300X blog post's 32M-element vector add
SIM_PILOT_RUNS = 200  # runs that only estimate the spread a baseline would record
BLOCK = 256


@dataclass(frozen=True)
class Run:
    """What one run measured for one kernel: plain and calibrated efficiency, each with
    the relative half-width of its confidence interval."""

    efficiency: float
    relative_ci: float
    calibrated: float
    calibrated_relative_ci: float


def _run_from(measurement) -> Run:
    reference_s = measurement.extra["reference_samples_s"]
    reference_ci = _relative_ci(reference_s)
    return Run(
        efficiency=measurement.efficiency,
        relative_ci=measurement.relative_ci,
        calibrated=measurement.calibrated_efficiency,
        calibrated_relative_ci=float(np.hypot(measurement.relative_ci, reference_ci)),
    )


def _relative_ci(samples_s: Sequence[float]) -> float:
    from pytest_gpuperf.stats import summarize

    return summarize(list(samples_s), 0.95).relative_ci


# -- the simulated device ---------------------------------------------------------------------


def sim_run(job: tuple[str, int, float, float]) -> tuple[str, float, float, Run]:
    """One run: a fresh simulated MI300X (its own seed = its own run-to-run drift)."""
    role, seed, fraction, slowdown = job
    from pytest_gpuperf.measure import MeasureSettings, measure_kernel, release
    from pytest_gpuperf.runtime.sim import open as open_sim

    backend = open_sim(
        0,
        device="mi300x",
        seed=seed,
        run_spread=0.07,
        common_fraction=fraction,
        kernel_slowdown={"vector_add": 1.0 + slowdown} if slowdown else None,
    )
    try:
        kernel = backend.compile(KERNELS_DIR / "vector_add.hip").kernel("vector_add")
        n = SIM_ELEMENTS
        rng = np.random.default_rng(seed)
        a = backend.to_device(rng.random(n, dtype=np.float32))
        b = backend.to_device(rng.random(n, dtype=np.float32))
        c = backend.alloc(4 * n)
        measurement = measure_kernel(
            backend,
            kernel,
            grid=(n + BLOCK - 1) // BLOCK,
            block=BLOCK,
            args=(a, b, c, n),
            bytes_moved=12 * n,
            device=device_spec(backend),
            settings=MeasureSettings(cache="cold", calibrate=True),
        )
        release(backend)
        return role, fraction, slowdown, _run_from(measurement)
    finally:
        backend.close()


def sim_part(runs: int, fractions: Sequence[float], workers: int, tolerance: float) -> list[dict]:
    """Pilot runs (spread), baseline runs, and comparison runs per slowdown, each a fresh
    seed; baseline i is compared with comparison run i of every slowdown."""
    seeds = iter(np.random.SeedSequence(20240611).generate_state(10_000_000, np.uint32))
    jobs = []
    for fraction in fractions:
        jobs += [("pilot", int(next(seeds)), fraction, 0.0) for _ in range(SIM_PILOT_RUNS)]
        jobs += [("baseline", int(next(seeds)), fraction, 0.0) for _ in range(runs)]
        for slowdown in (0.0, *SLOWDOWNS):
            jobs += [("compare", int(next(seeds)), fraction, slowdown) for _ in range(runs)]
    results: dict[tuple[str, float, float], list[Run]] = {}
    began = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        for done, (role, fraction, slowdown, run) in enumerate(
            pool.imap(sim_run, jobs, chunksize=16)
        ):
            results.setdefault((role, fraction, slowdown), []).append(run)
            if done % 2000 == 1999:
                print(
                    f"  {done + 1}/{len(jobs)} runs, {time.perf_counter() - began:.0f} s",
                    file=sys.stderr,
                )
    rows = []
    for fraction in fractions:
        pilots = results[("pilot", fraction, 0.0)]
        baselines = results[("baseline", fraction, 0.0)]
        pairs = {
            s: [
                (base, now, pilots)
                for base, now in zip(baselines, results[("compare", fraction, s)], strict=True)
            ]
            for s in (0.0, *SLOWDOWNS)
        }
        for calibrated in (False, True):
            rows.append(_score(f"common {fraction:.2f}", calibrated, pairs, tolerance))
    return rows


# -- the H100 (or any CUDA device) ----------------------------------------------------------


def cuda_child() -> None:
    """One process: the unchanged kernel and each slowed variant, once each."""
    from pytest_gpuperf.measure import MeasureSettings, measure_kernel
    from pytest_gpuperf.runtime import open_backend

    backend = open_backend("cuda")
    device = device_spec(backend)
    kernel = backend.compile(KERNELS_DIR / "bench_variants.hip").kernel("vector_add_extra")
    n = CUDA_ELEMENTS
    rng = np.random.default_rng(os.getpid())
    a = backend.to_device(rng.random(n, dtype=np.float32))
    b = backend.to_device(rng.random(n, dtype=np.float32))
    c = backend.alloc(4 * n)
    extra = backend.to_device(np.zeros(3 * n, np.float32))  # zeros: never changes c
    for slowdown in (0.0, *SLOWDOWNS):
        extra_n = round(slowdown * 3 * n)  # slowdown x the 12n declared bytes
        measurement = measure_kernel(
            backend,
            kernel,
            grid=(max(n, extra_n) + BLOCK - 1) // BLOCK,
            block=BLOCK,
            args=(a, b, c, extra, n, extra_n),
            bytes_moved=12 * n,
            device=device,
            settings=MeasureSettings(cache="cold", calibrate=True),
            name=f"vector_add +{slowdown:.0%} bytes",
        )
        run = _run_from(measurement)
        emit(
            {
                "slowdown": slowdown,
                **run.__dict__,
                "time_s": measurement.time_s,
                "throttled": bool(measurement.clocks and measurement.clocks.throttled),
            }
        )


def hog_child() -> None:
    """A noise source: copies 2 x 1 GiB back and forth for random bursts of 20-200 ms,
    idle for random 20-200 ms in between, until terminated."""
    from pytest_gpuperf.runtime import open_backend

    backend = open_backend("cuda")
    kernel = backend.compile(KERNELS_DIR / "bench_variants.hip").kernel("hog_copy")
    count = (1 << 30) // 16
    src, dst = backend.alloc(16 * count), backend.alloc(16 * count)
    rng = np.random.default_rng()
    grid = backend.info.compute_units * 8
    while True:
        burst_end = time.perf_counter() + rng.uniform(0.02, 0.2)
        while time.perf_counter() < burst_end:
            backend.launch(kernel, grid, BLOCK, (src, dst, count, 1))
            backend.synchronize()
        time.sleep(rng.uniform(0.02, 0.2))


def cuda_part(processes: int, timeout_s: float, tolerance: float) -> list[dict]:
    rows = []
    for noise in ("quiet", "bandwidth hog in another process"):
        hog = None
        if noise != "quiet":
            hog = subprocess.Popen([sys.executable, __file__, "--child", "hog"])
            time.sleep(2.0)  # let it start hogging
        try:
            runs_by_process = []
            for _ in range(processes):
                rows_of_child = run_child([__file__, "--child", "cuda"], timeout_s)
                by_slowdown = {
                    r["slowdown"]: Run(
                        r["efficiency"],
                        r["relative_ci"],
                        r["calibrated"],
                        r["calibrated_relative_ci"],
                    )
                    for r in rows_of_child
                }
                if len(by_slowdown) == 1 + len(SLOWDOWNS):
                    runs_by_process.append(by_slowdown)
        finally:
            if hog is not None:
                hog.send_signal(signal.SIGTERM)
                hog.wait(timeout=30)
        # Each (baseline i, comparison j) pair takes its recorded spread from the unchanged
        # runs of the other processes (leave-two-out): never from the runs it scores.
        count = len(runs_by_process)
        pairs = {
            s: [
                (
                    runs_by_process[i][0.0],
                    runs_by_process[j][s],
                    [runs_by_process[k][0.0] for k in range(count) if k not in (i, j)],
                )
                for i in range(count)
                for j in range(count)
                if i != j
            ]
            for s in (0.0, *SLOWDOWNS)
        }
        for calibrated in (False, True):
            rows.append(_score(noise, calibrated, pairs, tolerance))
    return rows


# -- scoring ------------------------------------------------------------------------------------


def _score(
    condition: str,
    calibrated: bool,
    pairs: dict[float, list[tuple[Run, Run, list[Run]]]],
    tolerance: float,
) -> dict:
    """False-alarm and detection rates for one condition and one gated quantity; each trial
    is (baseline run, compared run, the runs its recorded spread comes from)."""

    def value(run: Run) -> tuple[float, float]:
        if calibrated:
            return run.calibrated, run.calibrated_relative_ci
        return run.efficiency, run.relative_ci

    spreads: dict[int, float] = {}

    def spread_of(pilots: list[Run]) -> float:
        # Baselines store the spread as a +-range at ~95%: 1.96 relative standard deviations.
        if id(pilots) not in spreads:
            values = [value(r)[0] for r in pilots]
            spreads[id(pilots)] = 1.96 * statistics.stdev(values) / statistics.fmean(values)
        return spreads[id(pilots)]

    rates = {}
    for slowdown, trials in pairs.items():
        fails = sum(
            regressed(*value(base), *value(now), spread_of(pilots), tolerance)
            for base, now, pilots in trials
        )
        rates[slowdown] = fails / len(trials)
    return {
        "condition": condition,
        "gated_on": "calibrated" if calibrated else "efficiency",
        "run_spread": statistics.fmean(spreads.values()),
        "trials": len(pairs[0.0]),
        "false_alarm": rates[0.0],
        **{f"detect_{s:.0%}": rates[s] for s in SLOWDOWNS},
    }


HEADERS = [
    "condition",
    "gated on",
    "spread (+-95%)",
    "trials",
    "false alarms",
    *(f"detects {s:.0%}" for s in SLOWDOWNS),
]


def _table(rows: list[dict]) -> list[list]:
    return [
        [
            r["condition"],
            r["gated_on"],
            f"{r['run_spread']:.2%}",
            r["trials"],
            f"{r['false_alarm']:.1%}",
            *(f"{r[f'detect_{s:.0%}']:.1%}" for s in SLOWDOWNS),
        ]
        for r in rows
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="sim", choices=["sim", "cuda"])
    parser.add_argument("--runs", type=int, default=500, help="sim: runs per point (500)")
    parser.add_argument(
        "--fractions",
        default=",".join(map(str, FRACTIONS)),
        help="sim: common fractions of the run-to-run noise",
    )
    parser.add_argument(
        "--processes", type=int, default=20, help="cuda: scored processes per noise condition (20)"
    )
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--tolerance",
        type=float,
        default=0.0,
        help="the gate's tolerance (default 0: the noise allowance alone; the plugin's "
        "default --gpuperf-tolerance of 5%% would hide every drop below 5%%)",
    )
    parser.add_argument("--out", help="write the rows as JSON")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table too")
    parser.add_argument("--child", choices=["cuda", "hog"], help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.child == "cuda":
        cuda_child()
        return 0
    if options.child == "hog":
        hog_child()
        return 0
    began = time.perf_counter()
    if options.backend == "sim":
        fractions = [float(f) for f in options.fractions.split(",")]
        rows = sim_part(options.runs, fractions, options.workers, options.tolerance)
        title = f"gate quality, SIMULATED MI300X (run_spread=0.07), {options.runs} runs per point"
    else:
        rows = cuda_part(options.processes, timeout_s=300, tolerance=options.tolerance)
        title = f"gate quality on cuda, {options.processes} processes per condition"
    title += f", tolerance {options.tolerance:.0%}, {time.perf_counter() - began:.0f} s"
    print(title)
    print(text_table(HEADERS, _table(rows)))
    if options.markdown:
        print()
        print(markdown_table(HEADERS, _table(rows)))
    write_json(options.out, {"title": title, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
