"""The sequential stopping rule's error rates and cost, SIMULATED (vectorised NumPy; no device).

For each noise model and kernel length, `--runs` unchanged judgements and `--regression-runs`
judgements of each efficiency drop (-1%, -2%, -2.5%) are simulated end to end as the stored
gate makes them: three saves (each a separate process sampled to the horizon, as a save
still is), the band from them (gate/noise.py's rule: the backend's prior worth its degrees
of freedom combined with the saves' scatter, a one-sided prediction bound at the run's
level, never below the 1% tolerance), then one judged process sampled sample by sample at
the sampling loop's looks (batches that double from 10 samples, at most 50 ms of device
time each), stopped

  today  on a GPU, a kernel under 100 us at the first look past the fixed minimum of 0.3 s
         (the horizon); a longer one, and every kernel on the simulated device, at the first
         look where the median's precision (+-0.5%) is reached; and
  rule   by engine/sequential.py: at the first look where the median's precision is reached
         and its confidence sequence (with the process wander of the target, half a timer
         tick) lies wholly on the passing side of the regressed edge and on one side of the
         improved edge, else at the horizon (the same final look as today).

A judgement is REGRESSED when the median's efficiency lies below the baseline by more than
the allowance (made, as the gate does, with max(sigma, the run's own sigma from its
interval); the rule's edges without the run's own, as gate/stop_target.py makes them).
The table gives the false-alarm rate of each rule among the unchanged judgements (it must
not exceed the gate's promised level), the detection rate of each drop, and the samples and
sampling time each rule used.

Noise models (log time of sample j of process p: level + P_p + W_p(j) + e_pj, quantised):
  gpu  the documented H100 priors (docs/baselines.md, gate/policy.py): between processes
       sigma(t)^2 = 0.05%^2 + (35 ns / t)^2 at the horizon, split into a process level P and a
       wander W (AR(1), correlation time 2 ms, sized so that a 15 ms measurement's level lies
       PROCESS_WANDER_S = 40 ns from its 0.3 s level); per-sample jitter 3.7% x (7.8 us /
       t)^0.62 (3.7% at 7.8 us and 1.6% at 30 us cold, docs/measurement.md); a 32 ns timer
       tick; a sample costs t + 32 us of device time (the flush).
  sim  the simulated device at GPUPERF_SIM_RUN_SPREAD=0.002 (the quiet device the plugin's
       tests use): sigma 0.1% between processes known exactly, jitter 0.4%, no wander, no
       tick; a sample costs t + 109 us (the MI300X flush); horizon 0.05 s.

Usage:
  python3 bench/sequential_rule.py                        # the table, ~1-3 min on 2 cores
  python3 bench/sequential_rule.py --markdown --runs 10000 --regression-runs 4000
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import signal
from scipy import stats as sstats

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import markdown_table, text_table

from pytest_gpuperf.engine import sequential as seq
from pytest_gpuperf.engine.policy import MIN_SAMPLING_BELOW_S
from pytest_gpuperf.engine.timing import MAX_BATCH_DEVICE_S
from pytest_gpuperf.gate.noise import centre_factor
from pytest_gpuperf.gate.policy import (
    DEFAULT_TOLERANCE,
    PRIOR_DF_BY_BACKEND,
    Z_95,
    prior_run_spread,
    process_wander_s,
)

LENGTHS_S = (7.5e-6, 27e-6, 210e-6)
DROPS = (0.01, 0.02, 0.025)
# The stored_lengths scenario's level: a run of 3 tests at the 1% suite budget.
RATE = 0.01 / 3
SAVES = 3
TARGET_REL_CI = 0.005  # MeasureSettings.target_rel_ci
MIN_SAMPLES = 10  # MeasureSettings.min_samples: the first batch


@dataclass(frozen=True)
class Model:
    name: str
    backend: str
    horizon_s: float
    overhead_s: float  # device time a sample costs beside the kernel (the flush)
    tick_s: float
    wander_tau_s: float

    def between_sigma(self, t: float) -> float:
        if self.backend == "sim":
            return 0.002 / Z_95
        return prior_run_spread("cuda", t, "cold") / Z_95

    def jitter(self, t: float) -> float:
        if self.backend == "sim":
            return 0.004
        return 0.037 * (7.8e-6 / t) ** 0.62

    def wander_s(self) -> float:
        return process_wander_s(self.backend, "cold")


MODELS = {
    "gpu": Model("gpu (H100 priors)", "cuda", 0.3, 32e-6, 32e-9, 2e-3),
    "sim": Model("sim (quiet)", "sim", seq.SIM_STORED_HORIZON_S, 109e-6, 0.0, 0.0),
}


def looks(per_sample_s: float, horizon_s: float) -> list[int]:
    """Cumulative sample counts at the sampling loop's looks, up to the first past the
    horizon: batches double from MIN_SAMPLES, at most MAX_BATCH_DEVICE_S of device time."""
    cap = max(1, int(MAX_BATCH_DEVICE_S / per_sample_s))
    counts, batch, total = [], MIN_SAMPLES, 0
    while True:
        total += batch
        counts.append(total)
        if total * per_sample_s >= horizon_s:
            return counts
        batch = min(2 * batch, cap)


def band(model: Model, t: float, save_logs: np.ndarray, rate: float) -> tuple[float, np.ndarray]:
    """(quantile x centre factor, sigma) of the band for each row's saves (log
    efficiencies), as gate/noise.py makes it for an entry on the board of its saves: the
    noise is their product with max(sigma, the judged run's own sigma)."""
    prior = model.between_sigma(t)
    factor = centre_factor(SAVES)
    if model.backend == "sim":  # known exactly
        return float(sstats.norm.isf(rate)) * factor, np.full(save_logs.shape[0], prior)
    prior_df = PRIOR_DF_BY_BACKEND["cuda"]
    squares = np.var(save_logs, axis=1, ddof=1) * (SAVES - 1)
    df = prior_df + SAVES - 1
    sigma = np.sqrt((prior_df * prior**2 + squares) / df)
    return float(sstats.t.isf(rate, df)) * factor, sigma


def judged_logs(
    model: Model, t: float, rows: int, count: int, rng: np.random.Generator
) -> np.ndarray:
    """Log times (relative to the kernel's nominal time) of `rows` judged processes, `count`
    samples each, in time order: level P + wander W + jitter, quantised to the tick."""
    per_sample_s = t + model.overhead_s
    sigma_between = model.between_sigma(t)
    jitter = model.jitter(t)
    wander_var_k = 0.0
    values = rng.normal(0.0, jitter, size=(rows, count))
    if model.wander_tau_s > 0:
        tau = model.wander_tau_s / per_sample_s
        keep = math.exp(-1.0 / tau)
        reference = seq.WANDER_REFERENCE_S / per_sample_s
        # Var(mean over n) ~ w^2 2 tau / n for n >> tau: size w so that the mean over the
        # reference time lies wander_s from the mean over the horizon
        ahead = 1.0 / reference - 1.0 / count
        w = (model.wander_s() / t) / math.sqrt(2.0 * tau * ahead)
        shocks = rng.normal(0.0, w * math.sqrt(1 - keep**2), size=(rows, count))
        shocks[:, 0] = rng.normal(0.0, w, size=rows)
        values += signal.lfilter([1.0], [1.0, -keep], shocks, axis=1)
        wander_var_k = w**2 * 2.0 * tau / count
    own_var = (seq.MEDIAN_FACTOR * jitter) ** 2 / count + wander_var_k
    level_sigma = math.sqrt(max(sigma_between**2 - own_var, 0.0))
    values += rng.normal(0.0, level_sigma, size=(rows, 1))
    if model.tick_s > 0:
        times = np.round(t * np.exp(values) / model.tick_s) * model.tick_s
        values = np.log(times / t)
    return values


def own_sigma(part: np.ndarray) -> np.ndarray:
    """The run's own sigma of its median, as the gate reads it from the measurement's 95%
    interval (relative_ci / 1.96), in the normal approximation 1.2533 x sigma / sqrt(n)."""
    centre = np.median(part, axis=1, keepdims=True)
    sigma = seq.MAD_TO_SIGMA * np.median(np.abs(part - centre), axis=1)
    return seq.MEDIAN_FACTOR * sigma / math.sqrt(part.shape[1])


def precise(part: np.ndarray) -> np.ndarray:
    """The precision rule, as a normal approximation of the median's 95% interval: its
    half-width 1.96 x 1.2533 x sigma / sqrt(n) within TARGET_REL_CI."""
    return (1.96 * own_sigma(part) <= TARGET_REL_CI) & (part.shape[1] >= MIN_SAMPLES)


def today_stops(model: Model, t: float) -> bool:
    """Whether today's rule holds this kernel to the fixed minimum (policy.py)."""
    return model.backend != "sim" and t < MIN_SAMPLING_BELOW_S


@dataclass
class Outcome:
    regressed_today: np.ndarray
    regressed_rule: np.ndarray
    samples_rule: np.ndarray
    samples_today: np.ndarray
    per_sample_s: float


def judge(
    model: Model,
    t: float,
    rows: int,
    drop: float,
    rng: np.random.Generator,
    rate: float,
    tolerance: float = DEFAULT_TOLERANCE,
) -> Outcome:
    per_sample_s = t + model.overhead_s
    counts = looks(per_sample_s, model.horizon_s)
    final = counts[-1]
    total_sigma = model.between_sigma(t)
    save_logs = rng.normal(0.0, total_sigma, size=(rows, SAVES))  # log times of the saves
    quantile, sigma = band(model, t, save_logs, rate)
    allowance = np.maximum(tolerance, quantile * sigma)  # the edges: without the run's own
    centre = np.median(save_logs, axis=1)  # the baseline's log time (median of the saves)
    edge_regressed = centre - np.log1p(-allowance)  # log time: efficiency 1 - A
    edge_improved = centre - np.log1p(allowance)
    logs = judged_logs(model, t, rows, final, rng) - math.log1p(-drop)  # slower by 1/(1-drop)
    target = seq.StopTarget(
        seq.STORED,
        (seq.Edge(1.0, slow_early=False), seq.Edge(1.0)),
        alpha=rate,
        horizon_s=model.horizon_s,
        wander_s=model.wander_s(),
    )
    step_rel = model.tick_s / t
    stopped = np.zeros(rows, dtype=bool)
    estimate, estimate_sigma = np.zeros(rows), np.zeros(rows)
    used = np.full(rows, final)
    held = today_stops(model, t)
    today_done = np.zeros(rows, dtype=bool)
    today, today_sigma = np.zeros(rows), np.zeros(rows)
    today_used = np.full(rows, final)
    for count in counts:
        part = logs[:, :count]
        median, radius = seq.bounds(
            part, rate, step_rel, target.wander_rel(count * per_sample_s, 1.0)
        )
        mine = own_sigma(part)
        if not held and count < final:
            new = precise(part) & ~today_done
            today[new], today_used[new], today_sigma[new] = median[new], count, mine[new]
            today_done |= new
        if count < seq.MIN_DECIDE_SAMPLES or count == final:
            continue
        low, high = median - radius, median + radius
        decided = (
            precise(part)
            & (high < edge_regressed)
            & ((high < edge_improved) | (low > edge_improved))
        )
        new = decided & ~stopped
        estimate[new], estimate_sigma[new] = median[new], mine[new]
        used[new] = count
        stopped |= decided
    at_horizon, horizon_sigma = np.median(logs, axis=1), own_sigma(logs)
    estimate[~stopped], estimate_sigma[~stopped] = at_horizon[~stopped], horizon_sigma[~stopped]
    today[~today_done], today_sigma[~today_done] = (
        at_horizon[~today_done],
        horizon_sigma[~today_done],
    )

    def regressed(log_time: np.ndarray, run_sigma: np.ndarray) -> np.ndarray:
        judged = np.maximum(tolerance, quantile * np.maximum(sigma, run_sigma))
        return np.exp(centre - log_time) - 1.0 < -judged

    return Outcome(
        regressed(today, today_sigma),
        regressed(estimate, estimate_sigma),
        used,
        today_used,
        per_sample_s,
    )


def simulate(options: argparse.Namespace) -> list[list[object]]:
    rng = np.random.default_rng(options.seed)
    rows = []
    for key in options.models:
        model = MODELS[key]
        for t in LENGTHS_S:
            cells: list[object] = [model.name, f"{t * 1e6:g} us"]
            outcomes = {}
            for drop in (0.0, *DROPS):
                runs = options.runs if drop == 0.0 else options.regression_runs
                parts = [
                    judge(
                        model,
                        t,
                        min(options.chunk, runs - done),
                        drop,
                        rng,
                        options.rate,
                        options.tolerance,
                    )
                    for done in range(0, runs, options.chunk)
                ]
                outcomes[drop] = parts
            unchanged = outcomes[0.0]
            today_fa = np.concatenate([o.regressed_today for o in unchanged])
            rule_fa = np.concatenate([o.regressed_rule for o in unchanged])
            cells += [today_fa.size, f"{today_fa.mean():.3%}", f"{rule_fa.mean():.3%}"]
            for drop in DROPS:
                today = np.concatenate([o.regressed_today for o in outcomes[drop]])
                rule = np.concatenate([o.regressed_rule for o in outcomes[drop]])
                cells.append(f"{today.mean():.1%} / {rule.mean():.1%}")
            samples = np.concatenate([o.samples_rule for o in unchanged])
            before = np.concatenate([o.samples_today for o in unchanged])
            per_sample_s = unchanged[0].per_sample_s
            final = max(looks(per_sample_s, model.horizon_s))
            cells += [
                f"{before.mean():.0f} / {samples.mean():.0f}",
                f"{before.mean() * per_sample_s * 1e3:.1f} / "
                f"{samples.mean() * per_sample_s * 1e3:.1f} ms",
                f"{np.mean(samples < final):.1%}",
            ]
            rows.append(cells)
            print(f"  {model.name} {t * 1e6:g} us done", file=sys.stderr, flush=True)
    return rows


HEADERS = [
    "model",
    "kernel",
    "unchanged",
    "false alarms today",
    "false alarms rule",
    "caught -1% (today / rule)",
    "caught -2%",
    "caught -2.5%",
    "samples (today / rule, unchanged)",
    "sampling time (today / rule)",
    "rule stopped before the horizon",
]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["gpu", "sim"], choices=sorted(MODELS))
    parser.add_argument("--runs", type=int, default=10_000, help="unchanged judgements each")
    parser.add_argument("--regression-runs", type=int, default=2_000, help="per drop")
    parser.add_argument("--rate", type=float, default=RATE, help="the gate's level")
    parser.add_argument(
        "--tolerance", type=float, default=DEFAULT_TOLERANCE, help="0: the band alone decides"
    )
    parser.add_argument("--chunk", type=int, default=500, help="rows simulated at once")
    parser.add_argument("--seed", type=int, default=46)
    parser.add_argument("--markdown", action="store_true")
    options = parser.parse_args(argv)
    began = time.monotonic()
    rows = simulate(options)
    table = markdown_table if options.markdown else text_table
    print(
        f"SIMULATED: the sequential rule against today's fixed minimum, level {options.rate:.3%} "
        f"one-sided, tolerance {options.tolerance:.1%}, {SAVES} saves, seed {options.seed}, "
        f"{time.strftime('%Y-%m-%d', time.gmtime())}, {time.monotonic() - began:.0f} s"
    )
    print()
    print(table(HEADERS, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
