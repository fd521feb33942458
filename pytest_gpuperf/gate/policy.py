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

# The run-to-run spread a FIRST save records, before a history can say better (the prior).
# It depends on the kernel's length: a relative part and an absolute launch jitter,
# sigma(t)^2 = relative^2 + (jitter_s / t)^2 (both standard deviations of log efficiency),
# per backend and cache mode (hot launches follow each other; cold and rotate launches start
# on a device that has just run a flush or other buffers).
# CUDA cold: the spread between separate processes of a user-style kernel of its own
# (y = a * x) on H100 SXM boards on 2026-11-27, measured as the stored measurement now takes
# it: each batch of cold samples replayed as one graph (engine/timing.py run_graph_batch) and
# a short kernel sampled at least 0.3 s (engine/policy.py STORED_MIN_SAMPLING_S); sigma of log
# time, t the kernel time, sigma x t in brackets:
#   GPU-50759399, the engine itself (bench/process_level.py, 16 processes): 0.45% at 7.55 us
#     (34 ns), 0.14% at 27.2 us (38 ns);
#   GPU-babbf3ac, 43452fbf, 50759399, 300 samples a process replayed as graphs without the
#     minimum (14-16 processes each): 0.78, 0.80, 0.61% at 7.5 us (46-60 ns), 0.20, 0.12,
#     0.20% at 27 us (33-55 ns).
# A launch jitter of 50 ns covers them all; the relative part stays 0.05% (0.015% fitted from
# 212 us kernels; kept so that long kernels are not judged by less than 5 saves showed).
# CUDA rotate (stream launches, as cold before graph batches): four boards, 14-20 processes
# each (bench/stored_noise.py, bench/process_level.py): 1.18-1.30% at 7.3-8.0 us, 0.26-0.35% at
# 27-38 us, 0.08% at 212 us: sigma x t 86-99 ns, a jitter of 95 ns.
# What graphs remove lies outside the kernel's blocks: the launches' own span (first block
# start to last block end, read from %globaltimer) scatters by 0.07-0.12% between processes,
# the events around stream launches by 0.85-1.14% (docs/measurement.md).
# Before: 2026-11-25 (board a) r 0.2%, j 75 ns; 2026-11-27 morning r 0.05%, j 100 ns (cold
# by stream launches, without the minimum sampling time).
# CUDA hot: 2026-11-25 (bench/measured/stored-scenario-h100-2026-11-25-board-a.json): sigma
# 0.04-0.10% at 3.4-226 us, r 0.08%, j ~0.
# HIP: no AMD board was measured; the +-7% between runs reported for MI300X
# ("Making memory bound kernels go brr on a MI300X") stands as the relative part.
# The simulated device: its own setting (prior_run_spread).
RUN_SPREAD_MODEL = {
    # backend: {cache: (relative sigma, jitter sigma in s)}
    "cuda": {"cold": (0.0005, 0.05e-6), "rotate": (0.0005, 0.095e-6), "hot": (0.0008, 0.005e-6)},
    "hip": {
        "cold": (0.07 / 1.96, 0.2e-6),
        "rotate": (0.07 / 1.96, 0.2e-6),
        "hot": (0.07 / 1.96, 0.0),
    },
}
# How far a process's level after 15 ms of sampling (engine/sequential.py
# WANDER_REFERENCE_S) may still lie from the level the same process reaches by the 0.3 s a
# stored measurement sampled before the sequential rule, beyond what its own samples show: a
# standard deviation in seconds per launch (absolute: what a process keeps lies outside the
# kernel's blocks, docs/measurement.md). The sequential rule adds it to its bound (shrinking
# as sampling goes on) so that a wander slower than the samples taken cannot stop a
# measurement on the wrong side of an edge. From the spreads between processes of
# docs/measurement.md (H100 SXM, 2026-11-27), short sampling against 0.3 s:
#   cold, graph batches: 0.61-0.80% (300 samples, 12-17 ms) against 0.45% at 7.5 us and
#     0.12-0.20% against 0.14% at 27 us: sqrt(0.70^2 - 0.45^2) = 0.54% of 7.5 us = 40 ns;
#   rotate, stream launches: 1.53-1.63% against 1.18-1.30% at 7.6-8.0 us: 0.98% = 75 ns.
# HIP: no AMD board measured; twice the CUDA figures, assumed. The simulated device's
# samples are independent draws around the run's level: none.
PROCESS_WANDER_S = {
    "cuda": {"cold": 40e-9, "rotate": 75e-9, "hot": 0.0},
    "hip": {"cold": 80e-9, "rotate": 150e-9, "hot": 0.0},
}
# Kept for readers of older files and help texts: the relative part as a +-95% range.
DEFAULT_RUN_SPREAD = {"hip": 0.07, "cuda": 0.003, "sim": 0.07}

# Between boards of one device model: how much one board's level differs from another's, as
# sigma(t)^2 = relative^2 + (jitter_s / t)^2 per cache mode, used until a baseline file holds
# saves from several boards (gate/noise.py then learns it from them, with this as its prior).
# CUDA: measured 2026-11-24 on two H100 SXM boards with the committed baselines (kernels
# >= 100 us: the boards' means differed by <= 0.25%; 20-30 us by up to 0.7%), 2026-11-23
# (cold kernels of 4.5-8 us up to 0.35 us longer on one machine) and 2026-11-25 (two more
# boards against the committed file: <= 0.5% at >= 129 us, <= 1.2% at 21-37 us, cold 4.5-8 us
# -2.0% to +5.2%, the 3.4 us hot entry +0.1% and +0.5%: bench/measured/committed-*). HIP: no
# AMD board was measured: the CUDA figure doubled stands in, stated as assumed. The simulated
# device: its per-GPU spread setting (simulate/device_model.py).
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
# combines it with an entry's saves. CUDA: 8, as the between-board figure: it is fitted from
# 14-20 processes on each of several H100 boards with two parameters (four boards for stream
# launches, three for graph batches), more than 8 df of evidence about this kind of kernel,
# but a user's kernel and machine differ from ours, so it must not outweigh what their own
# saves say for long: after 3 saves the saves hold 2 of 10 df, after 10 saves 9 of 17, and
# every save on top keeps adding (a history that slides keeps its spread: BoardSpread). An
# entry whose saves scatter significantly more counts it as worth PRIOR_DF (gate/noise.py
# prior_conflict). Worth 3 before 2026-11-27 (measured on one board): t(5) at a run's level of
# 0.01 / 3 is 4.46 where t(10) is 3.41. Elsewhere 3 (as much as 4 saves): the HIP figure is
# the MI300X blog's, measured on no board of ours. The file's pooled spread replaces the figure
# once the pool holds at least as many degrees of freedom.
PRIOR_DF = 3.0
PRIOR_DF_BY_BACKEND = {"cuda": 8.0}
# What the between-board figure is worth: 8 degrees of freedom. It is fitted over the perf
# suite's 19 entries (two parameters) on several boards, yet each board pair is one draw, so
# saves on three boards or more (2 df and up) soon move it; a figure worth 3 df would be
# judged with t(3), which at a whole run's level (0.01 / 19) is 11, not a usable band.
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
# allowance): drops below it are trivia. 1%: twice the widest A/A spread seen between
# processes on the H100 (+-0.5% for 7 us kernels, docs/benchmarks.md).
DEFAULT_TOLERANCE = 0.01
# The smallest A/B difference (head time / base time - 1) that counts as a regression or an
# improvement: 0.5% for long kernels on the H100, where A/A ratios stay within +-0.1%.
DEFAULT_COMPARE_THRESHOLD = 0.005
# Below this kernel time the threshold grows to this much absolute time: a launch's own
# jitter (+-20-40 ns between two kernels in one run on the H100) would otherwise decide.
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
# stats.MIN_LOADS_TO_ESTIMATE loads per side (docs/measurement.md, "Code-object drift"): the
# part of the run-to-run spread an A/B pair cannot cancel when head and base are different
# code, because each was loaded once, at one place, for the run.
# CUDA 0: on the project's H100 (2026-11-23), forced A/A comparisons of separately loaded
# modules stayed within +-0.2-0.4% over the perf suite, all intervals containing 1.
# HIP and the simulated MI300X: no AMD GPU was measured. The blog's +-7% between runs, of which
# 5% of the variance is assumed to belong to the code object (the simulated device's default),
# gives 7% x sqrt(0.05) = +-1.57% per code object; measure yours with bench/gate_quality.py
# (the A/A' rows) and set --gpuperf-compare-code-spread.
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


# What decided an A/B threshold (results.ComparisonCheck.threshold_basis).
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
