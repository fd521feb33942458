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
# AMD: the +-7% between runs of one kernel reported for MI300X (blog above). NVIDIA: 2%, above
# the +-0.27% measured between processes on the project's H100 (docs/measurement.md), because
# other boards, drivers and clock policies vary more. The simulated device: its own setting.
DEFAULT_RUN_SPREAD = {"hip": 0.07, "cuda": 0.02, "sim": 0.07}
# A launch's fixed cost moves between machines and runs by more than a share of a long kernel:
# on the project's H100s (2026-11-23) cold kernels of 4.5-8 us took up to 0.35 us longer on one
# machine than on others, where kernels of 20 us and more agreed within 1.5%. A first save of
# a real GPU in cold or rotate mode therefore adds this much, as a standard deviation.
LAUNCH_JITTER_S = 0.2e-6

# Saves kept per baseline entry, and how many of the same code it takes before the file's
# `run_spread` is written from them instead of from the prior (the gate itself combines every
# save with the prior: gate/noise.py).
HISTORY_LENGTH = 5
MIN_HISTORY = 3
# What the backend's figure for a first save (prior_run_spread) is worth, in degrees of
# freedom, when the gate combines it with an entry's saves: a guess as good as a history of 9
# saves. It is a guess (2% for CUDA against 0.16-0.9% measured between processes on the
# project's H100), so saves soon outweigh it, yet a first save is judged with Student's t at
# 8 degrees of freedom (2.90 at 99%, against the normal 2.33 were the figure exact). The
# file's pooled spread replaces it once the pool holds at least as many degrees of freedom,
# so that switching to the file never widens the band of entries that scatter as the figure
# says (docs/baselines.md, "How the gate's band is made").
PRIOR_DF = 8.0

# An entry whose saves scatter more than its file's pool at this significance (a one-sided F
# test) is judged without the pool: a kernel noisier than its neighbours is not theirs to judge.
POOL_CONFLICT_P = 0.01


def prior_df_for(backend: str) -> float:
    """What the backend's figure is worth (PRIOR_DF); the simulated device's spread is its own
    setting, known exactly, so no history can improve on it (infinite)."""
    return math.inf if backend == "sim" else PRIOR_DF


# The smallest relative drop the stored-baseline gate reports (a floor under the noise
# allowance): drops below it are trivia. 1%: twice the widest A/A spread seen between
# processes on the H100 (+-0.5% for 7 us kernels, docs/benchmarks.md).
DEFAULT_TOLERANCE = 0.01
# The smallest A/B difference (head time / base time - 1) that counts as a regression or an
# improvement: 0.5% for long kernels on the H100, where A/A ratios stay within +-0.1%.
DEFAULT_COMPARE_THRESHOLD = 0.005
# An A/B pair loads each side this many times (one module per load: the same code object
# loaded again, nothing recompiled) and spreads its pairs over the loads, so the run measures
# what belongs to a load and not to the code (where it landed, how it meets the instruction
# caches) instead of assuming it: 8 loads give the between-load variance 7 degrees of freedom
# (t = 2.36 at 95%, where 4 loads would give 3.18) for a few milliseconds of module loads.
DEFAULT_COMPARE_LOADS = 8
# Below this kernel time the threshold grows to this much absolute time: a launch's own
# jitter (+-20-40 ns between two kernels in one run on the H100) would otherwise decide.
COMPARE_JITTER_S = 0.04e-6


def prior_run_spread(
    backend: str, time_s: float, cache: str = "cold", simulated_spread: float | None = None
) -> float:
    """The +-95% run-to-run spread a first save records.

    The backend's relative figure, combined with LAUNCH_JITTER_S for real GPUs where every
    timed launch starts on a device that has just run a flush (cold) or other buffers
    (rotate); it dominates for kernels of a few us. Hot launches follow each other. The
    simulated device records the spread it was configured with.
    """
    if backend == "sim":
        return simulated_spread if simulated_spread is not None else DEFAULT_RUN_SPREAD["sim"]
    relative = DEFAULT_RUN_SPREAD.get(backend, 0.07)
    if cache == "hot" or time_s <= 0:
        return relative
    return round(math.hypot(relative, Z_95 * LAUNCH_JITTER_S / time_s), 4)


# How much one code object's time may differ from another's of the same speed for the whole
# of a run, as a +-95% range per code object, ASSUMED where the run cannot measure it: an A/B
# pair loads each side several times and measures the drift between loads itself
# (measure.DEFAULT_PAIR_LOADS); this applies only to a pair of fewer than
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
