"""The gate's defaults and the rules that are not statistics: what a first save records, how
long a history is, how small an A/B difference may be before it counts.

Kept free of SciPy so the pytest layer can quote these defaults in help texts without paying
for the statistics at import.
"""

from __future__ import annotations

import math

# One-sided: an unchanged kernel whose noise is as recorded fails the baseline gate about 1%
# of the time; the same rate sizes the A/B interval's tails (docs/measurement.md).
FALSE_ALARM_RATE = 0.01
# Stored spreads are +-ranges at ~95% ("0.07 is +-7%", as the MI300X run-to-run figure is
# quoted in "Making memory bound kernels go brr on a MI300X").
RUN_SPREAD_CONFIDENCE = 0.95
Z_95 = 1.959963984540054

# The run-to-run spread a FIRST save records, before a history can say better (the prior),
# per backend and cache mode: sigma(t)^2 = relative^2 + (jitter_s / t)^2, both standard
# deviations of log efficiency, t the kernel time. HIP: the +-7% reported for MI300X, no board
# of ours measured; the simulated device: its own setting (prior_run_spread).
# Measured: docs/benchmarks.md#run-to-run-spread-of-a-first-save
RUN_SPREAD_MODEL = {
    # backend: {cache: (relative sigma, jitter sigma in s)}
    "cuda": {"cold": (0.0005, 0.035e-6), "rotate": (0.0005, 0.095e-6), "hot": (0.0008, 0.005e-6)},
    "hip": {
        "cold": (0.07 / 1.96, 0.2e-6),
        "rotate": (0.07 / 1.96, 0.2e-6),
        "hot": (0.07 / 1.96, 0.0),
    },
}
# How far a process's level after 15 ms of sampling may still lie from the level it reaches
# by 0.3 s (a standard deviation in seconds per launch), which the sequential rule adds to its
# bound. Measured: docs/benchmarks.md#process-wander
PROCESS_WANDER_S = {
    "cuda": {"cold": 40e-9, "rotate": 75e-9, "hot": 0.0},
    "hip": {"cold": 80e-9, "rotate": 150e-9, "hot": 0.0},
}
# Kept for readers of older files and help texts: the relative part as a +-95% range.
DEFAULT_RUN_SPREAD = {"hip": 0.07, "cuda": 0.003, "sim": 0.07}

# Between boards of one device model: how much one board's level differs from another's, as
# sigma(t)^2 = relative^2 + (jitter_s / t)^2 per cache mode, used until a baseline file holds
# saves from several boards (gate/noise.py then learns it from them, with this as its prior).
# HIP: the CUDA figure doubled, stated as assumed; the simulated device: its per-GPU spread.
# Measured: docs/benchmarks.md#spread-between-boards
BETWEEN_BOARD_MODEL = {
    # backend: {cache: (relative sigma, jitter sigma in s)}
    "cuda": {"cold": (0.002, 0.12e-6), "rotate": (0.002, 0.12e-6), "hot": (0.002, 0.02e-6)},
    "hip": {"cold": (0.004, 0.24e-6), "rotate": (0.004, 0.24e-6), "hot": (0.004, 0.04e-6)},
}
BETWEEN_BOARD_SOURCE = {
    "cuda": "measured on H100 SXM boards against the committed baselines, 2026-11-24/25",
    "hip": "assumed (no AMD board measured): twice the H100 figure",
    "sim": "the simulated device's per-GPU spread setting",
}
# A launch's fixed cost, kept for the A/B side (a first save now uses RUN_SPREAD_MODEL).
LAUNCH_JITTER_S = 0.2e-6

# Saves kept per baseline entry (the centre is their median; every save of the same code on
# a board still counts towards its spread after it slides out: baseline/model.BoardSpread),
# and how many of the same code it takes before the file's `run_spread` is written from them
# instead of from the prior.
HISTORY_LENGTH = 10
MIN_HISTORY = 3
# Baselines an entry replaced (a re-save after a code change starts a new history) that the
# file keeps, so a drift across code versions stays visible (gate/drift.py).
TRAIL_LENGTH = 8
# What the backend's figure for a first save is worth, in degrees of freedom, when the gate
# combines it with an entry's saves: enough that a few saves do not outweigh a figure fitted
# over many processes, little enough that a user's own saves soon do. An entry whose saves
# scatter significantly more counts it as worth PRIOR_DF (gate/noise.py prior_conflict). The
# file's pooled spread replaces the figure once the pool holds as many degrees of freedom.
# Why these values: docs/benchmarks.md#prior-degrees-of-freedom
PRIOR_DF = 3.0
PRIOR_DF_BY_BACKEND = {"cuda": 8.0}
# What the between-board figure is worth (docs/benchmarks.md#prior-degrees-of-freedom).
BETWEEN_PRIOR_DF = 8.0

# An entry whose saves scatter more than its file's pool at this significance (a one-sided F
# test) is judged without the pool: a kernel noisier than its neighbours is not theirs to judge.
POOL_CONFLICT_P = 0.01


def prior_df_for(backend: str) -> float:
    """What the backend's figure is worth (PRIOR_DF_BY_BACKEND, else PRIOR_DF); the simulated
    device's spread is its own setting, known exactly, so no history can improve on it
    (infinite)."""
    return math.inf if backend == "sim" else PRIOR_DF_BY_BACKEND.get(backend, PRIOR_DF)


# The smallest relative drop the stored-baseline gate reports (a floor under the noise
# allowance): drops below it are trivia.
DEFAULT_TOLERANCE = 0.01
# The smallest A/B difference (head time / base time - 1) that counts as a regression or an
# improvement.
DEFAULT_COMPARE_THRESHOLD = 0.005
# Below this kernel time the threshold grows to this much absolute time, so that a launch's own
# jitter does not decide. All three: docs/benchmarks.md#tolerance-and-ab-threshold
COMPARE_JITTER_S = 0.04e-6


def prior_run_spread(
    backend: str, time_s: float, cache: str = "cold", simulated_spread: float | None = None
) -> float:
    """The +-95% run-to-run spread a first save records: RUN_SPREAD_MODEL's relative part and
    launch jitter at this kernel time (the jitter dominates for kernels of a few us). The
    simulated device records the spread it was configured with."""
    if backend == "sim":
        return simulated_spread if simulated_spread is not None else DEFAULT_RUN_SPREAD["sim"]
    model = RUN_SPREAD_MODEL.get(backend, RUN_SPREAD_MODEL["hip"])
    relative, jitter_s = model.get(cache, model["cold"])
    return round(Z_95 * level_sigma(relative, jitter_s, time_s), 5)


def level_sigma(relative: float, jitter_s: float, time_s: float) -> float:
    """sqrt(relative^2 + (jitter_s / time_s)^2): a spread of log efficiency at `time_s`."""
    if time_s <= 0:
        return relative
    return math.hypot(relative, jitter_s / time_s)


def between_board_spread(
    backend: str, time_s: float, cache: str = "cold", simulated_spread: float = 0.0
) -> float:
    """The +-95% spread between boards of one model a run on an unseen board adds, until the
    file holds saves from several boards (BETWEEN_BOARD_MODEL)."""
    if backend == "sim":
        return simulated_spread
    model = BETWEEN_BOARD_MODEL.get(backend, BETWEEN_BOARD_MODEL["hip"])
    relative, jitter_s = model.get(cache, model["cold"])
    return round(Z_95 * level_sigma(relative, jitter_s, time_s), 5)


# How much one code object's time may differ from another's of the same speed for the whole
# of a run, as a +-95% range per code object, ASSUMED where the run cannot measure it: an A/B
# pair loads each side several times and measures the drift between loads itself
# (engine/policy.py DEFAULT_PAIR_LOADS); this applies only to a pair of fewer than
# stats.MIN_LOADS_TO_ESTIMATE loads per side (docs/measurement.md, "Code-object drift"). Measure
# yours with bench/gate_quality.py (the A/A' rows) and set --gpuperf-compare-code-spread.
# Where the values come from: docs/benchmarks.md#code-object-spread
DEFAULT_CODE_SPREAD = {"hip": 0.0157, "cuda": 0.0, "sim": 0.0157}
# The one-sided normal quantile at FALSE_ALARM_RATE (scipy.stats.norm.ppf(0.99)).
Z_FALSE_ALARM = 2.3263478740408408


def code_spread_for(backend: str, override: float | None = None) -> float:
    """The code-object spread the A/B gate allows for on `backend` (an override wins)."""
    if override is not None:
        return override
    return DEFAULT_CODE_SPREAD.get(backend, DEFAULT_CODE_SPREAD["hip"])


def code_allowance(code_spread: float) -> float:
    """The head/base difference two code objects of equal speed exceed only at the false-alarm
    rate: each drifts by N(0, (spread / 1.96)^2) in log time, their difference by sqrt(2) x
    that."""
    return math.expm1(Z_FALSE_ALARM * math.sqrt(2.0) * code_spread / Z_95)


def compare_threshold(
    threshold: float, base_time_s: float | None, code_spread: float = 0.0
) -> float:
    """The A/B threshold for a kernel of `base_time_s`: the relative one, widened to
    COMPARE_JITTER_S of absolute time for very short kernels, and to what an assumed drift
    between code objects explains (`code_spread`, 0 when head and base are the same code or
    when the run measured the drift between module loads)."""
    return threshold_and_basis(threshold, base_time_s, code_spread)[0]


# What decided an A/B threshold (checks.ComparisonCheck.threshold_basis).
BASIS_USER, BASIS_QUANTUM, BASIS_DRIFT = "user", "quantum", "drift"


def threshold_and_basis(
    threshold: float, base_time_s: float | None, code_spread: float = 0.0
) -> tuple[float, str]:
    """compare_threshold's value and what decided it: BASIS_USER (the user's threshold),
    BASIS_QUANTUM (a launch's jitter, for a very short kernel) or BASIS_DRIFT (the assumed
    code drift); the larger widening wins."""
    effective, basis = threshold, BASIS_USER
    if code_spread > 0 and code_allowance(code_spread) > effective:
        effective, basis = code_allowance(code_spread), BASIS_DRIFT
    if base_time_s and base_time_s > 0 and COMPARE_JITTER_S / base_time_s > effective:
        effective, basis = COMPARE_JITTER_S / base_time_s, BASIS_QUANTUM
    return effective, basis


def process_wander_s(backend: str, cache: str) -> float:
    """PROCESS_WANDER_S of this backend and cache mode (0 on the simulated device)."""
    if backend == "sim":
        return 0.0
    return PROCESS_WANDER_S.get(backend, PROCESS_WANDER_S["hip"]).get(cache, 0.0)
