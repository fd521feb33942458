"""Sample as long as the decision needs, no longer: the sequential stopping rule.

A measurement that a gate will judge knows, before it starts, where the verdict changes: the
kernel time at which a stored baseline's allowance is crossed, or at which a floor is met.
`StopTarget` carries those times (`Edge`s, per launch) from the gate to the sampling loop.
After every batch (a *look*; batches double, so the looks are geometric in the sample count)
the loop asks `stop_reason`: it stops as soon as a confidence sequence for this process's own
level of the kernel's time lies wholly on one side of every edge, i.e. when no number of
further samples in this process can (but with probability alpha, over every look at once)
move the median across an edge. A measurement far inside its band stops after a few
milliseconds; one near an edge samples on up to the target's horizon.

The confidence sequence is Robbins' normal mixture (Howard, Ramdas, McAuliffe and Sekhon,
"Time-uniform, nonparametric, nonasymptotic confidence sequences", Ann. Statist. 49(2),
2021): for a sum S_n of n independent sigma-sub-Gaussian deviations,

    P( exists n: |S_n| >= sigma * sqrt(2 (n + rho) * log(sqrt((n + rho) / rho) / alpha)) ) <= alpha

(Ville's inequality on the mixture martingale), so the bound holds however often, and at
whichever sample counts, the loop looks: it is always valid, not a fixed-n interval looked at
repeatedly. It is applied to the median of the log times through its Bahadur representation
(the median moves like a mean of signs), with a per-sample sigma that counts what a process's
samples share: kernel times wander within a process (on an H100 a 40 ms cell's level wandered
1.6% at 7.6 us against its own error of 0.5%, docs/measurement.md), so sigma is the larger of
the independent-sample figure (1.2533 x MAD, the median's asymptotic factor for normal data)
and the batch-medians figure (the median of each of about sqrt(n) consecutive segments, in
time order: their scatter times the segment length is the long-run variance, wander
included).
Where the timer ticks in steps (32 ns on an H100) the median sits on the grid, so half a tick
widens the bound.

A wander slower than the samples taken so far cannot be seen in them at all: after 10 ms a
process's level may still move before the horizon. That part comes from what was measured
between processes, not from this run: `StopTarget.wander_s`, the standard deviation of the
level of a measurement of WANDER_REFERENCE_S about the level the same process reaches by
the horizon (an absolute time: what a process keeps lies outside the kernel's blocks, in the
launch around them). It shrinks as sampling goes on, as (1/T - 1/horizon) for sampling
time T (the mean of a wander over a longer time), and enters the bound as a variance beside
the samples' own, at the same multiplier: radius = z_n sqrt(sigma^2 / n + omega(T)^2) with
z_n = the mixture's bound at n samples in standard errors.

What the rule may decide early is the target's business: an `Edge` whose slow side fails a
test (a stored baseline's regression) is only ever crossed at the horizon, so a REGRESSED
verdict is reached exactly as with a fixed sampling time and the false-alarm rate the gate
promises is held however the looks fall; the early stops are all on the passing side, and
alpha bounds how often one of them is wrong (a regression the horizon would have caught).
Pure NumPy; no device, no SciPy. docs/measurement.md, "How long a measurement samples".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

# What the target serves (Measurement.extra["stop_target"]["kind"]).
PRECISION, STORED, FLOOR = "precision", "stored", "floor"
KINDS = (PRECISION, STORED, FLOOR)
# Measurement.stopped_by when the rule stopped: every edge decided, or the horizon reached.
DECIDED, HORIZON = "decided", "horizon"
# Segments of the batch-medians estimate: about sqrt(n) of about sqrt(n) samples each (the
# usual balance between the segments' number, its degrees of freedom, and their length, how
# slow a wander they see), at least SEGMENTS of at least SEGMENT_SAMPLES: below
# MIN_DECIDE_SAMPLES samples the rule decides nothing (it cannot see a wander yet).
SEGMENTS = 8
MAX_SEGMENTS = 64
SEGMENT_SAMPLES = 3  # so the sampling loop's third look (30 samples) may decide
MIN_DECIDE_SAMPLES = SEGMENTS * SEGMENT_SAMPLES
# The sample count the mixture's bound is tightest at (its rho): where a decision is
# expected; the bound is valid at every count and widens only slowly away from it.
TIGHT_AT_SAMPLES = 256
# sqrt(pi / 2): the asymptotic standard deviation of a median of normal draws, per sample,
# over the draws' own sigma.
MEDIAN_FACTOR = 1.2533141373155003
# MAD to sigma for normal data.
MAD_TO_SIGMA = 1.482602218505602
# A grid is inferred when the samples take at most this share of distinct values.
GRID_SHARE = 0.25
# The most samples a stored target keeps (the minimum sampling time's own cap, policy.py).
STORED_MAX_SAMPLES = 50_000
# The sampling time StopTarget.wander_s is stated at.
WANDER_REFERENCE_S = 0.015
# The horizon of a stored target on the simulated device: its samples are independent draws
# around the run's level (no wander), so a longer one would only cost host time.
SIM_STORED_HORIZON_S = 0.05


@dataclass(frozen=True)
class Edge:
    """A kernel time (per launch, seconds) at which the verdict changes. `slow_early`: the
    rule may stop early with the process's level on the slow side of it (a floor missed);
    False where the slow side fails a test that is held to a false-alarm rate (a stored
    regression), which is then only reached at the horizon."""

    time_s: float
    slow_early: bool = True
    what: str = ""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.time_s) and self.time_s > 0):
            raise ValueError(f"an edge is a positive time in seconds, not {self.time_s!r}")


@dataclass(frozen=True)
class StopTarget:
    """What the measurement serves and how sure its stop must be.

    kind: PRECISION (nothing known: stop at the precision target, as without a target),
      STORED (a stored baseline's allowance) or FLOOR (a min_bw floor).
    edges: the times at which the verdict changes; none for PRECISION.
    alpha: the chance, over every look at once, that the rule stops on the wrong side of an
      edge (the gate's own level for a stored baseline).
    horizon_s: the sampling time of the last planned look (the time the stored band was
      calibrated at); 0: the measurement's budget.
    max_samples: the most samples it keeps; 0: MeasureSettings.max_samples.
    wander_s: how far (a standard deviation, seconds per launch) a process's level after
      WANDER_REFERENCE_S of sampling may still lie from its level at the horizon, beyond
      what its samples show (measured between processes; 0: none assumed).
    horizon_samples: the horizon stops the measurement only once it holds this many samples
      (a host stall can eat the horizon's time; the budget still stops it); 0: any.
    """

    kind: str = PRECISION
    edges: tuple[Edge, ...] = ()
    alpha: float = 0.05
    horizon_s: float = 0.0
    max_samples: int = 0
    wander_s: float = 0.0
    horizon_samples: int = 0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"a stop target's kind is one of {KINDS}, not {self.kind!r}")
        if not 0.0 < self.alpha < 0.5:
            raise ValueError(f"a stop target's alpha is in (0, 0.5), not {self.alpha!r}")
        if not (math.isfinite(self.horizon_s) and self.horizon_s >= 0):
            raise ValueError(f"a stop target's horizon is >= 0 s, not {self.horizon_s!r}")
        if not (math.isfinite(self.wander_s) and self.wander_s >= 0):
            raise ValueError(f"a stop target's wander is >= 0 s, not {self.wander_s!r}")
        if self.horizon_samples < 0:
            raise ValueError(f"a stop target's horizon_samples is >= 0, not {self.horizon_samples}")
        if self.max_samples < 0:
            raise ValueError(f"a stop target's max_samples is >= 0, not {self.max_samples!r}")
        if self.kind == PRECISION and self.edges:
            raise ValueError("a precision target has no edges")

    def describe(self) -> dict[str, object]:
        """The target as Measurement.extra["stop_target"] records it (JSON-safe)."""
        return {
            "kind": self.kind,
            "edges_s": [edge.time_s for edge in self.edges],
            "edges": [edge.what for edge in self.edges],
            "alpha": self.alpha,
            "horizon_s": self.horizon_s,
            "wander_s": self.wander_s,
            "horizon_samples": self.horizon_samples,
        }

    def wander_rel(self, sampling_s: float, level_s: float) -> float:
        """omega(T): the wander still ahead after `sampling_s`, relative to `level_s`."""
        if self.wander_s <= 0 or level_s <= 0:
            return 0.0
        ahead = 1.0 / max(sampling_s, 1e-6)
        if self.horizon_s > 0:
            ahead = max(0.0, ahead - 1.0 / self.horizon_s)
        return self.wander_s / level_s * math.sqrt(WANDER_REFERENCE_S * ahead)


def mixture_radius(
    n: npt.ArrayLike, alpha: float, tight_at: float = TIGHT_AT_SAMPLES
) -> np.ndarray:
    """The normal mixture's bound on |mean - level| after n samples, in units of the
    per-sample sigma: sqrt(2 (n + rho) log(sqrt((n + rho) / rho) / alpha)) / n, valid at every
    n at once with probability 1 - alpha (two-sided). rho is chosen so that the bound is
    tightest near `tight_at` samples (the choice Howard et al. 2021 give for a target count)."""
    count = np.maximum(np.asarray(n, dtype=float), 1.0)
    log_term = 2.0 * math.log(1.0 / alpha)
    rho = tight_at / (log_term + math.log(1.0 + log_term))
    total = count + rho
    return np.sqrt(2.0 * total * np.log(np.sqrt(total / rho) / alpha)) / count


def long_run_sigma(log_samples: npt.ArrayLike) -> np.ndarray:
    """Per-sample sigma of the median of log times, wander included: the larger of
    MEDIAN_FACTOR x the MAD's sigma and the batch-medians figure sqrt(L x var(segment
    medians)), L the segment length, about sqrt(n) segments. Works on the last axis (rows
    are runs); in time order."""
    values = np.asarray(log_samples, dtype=float)
    n = values.shape[-1]
    centre = np.median(values, axis=-1, keepdims=True)
    mad = np.median(np.abs(values - centre), axis=-1) * MAD_TO_SIGMA
    sigma = MEDIAN_FACTOR * mad
    if n >= MIN_DECIDE_SAMPLES:
        count = int(min(MAX_SEGMENTS, max(SEGMENTS, round(math.sqrt(n)))))
        length = n // count
        used = values[..., n - length * count :]  # the latest samples, whole segments
        segments = used.reshape(*values.shape[:-1], count, length)
        medians = np.median(segments, axis=-1)
        batch = np.sqrt(length * np.var(medians, axis=-1, ddof=1))
        sigma = np.maximum(sigma, batch)
    return np.asarray(sigma)


def grid_step(samples_s: npt.ArrayLike) -> float:
    """The timer's step where the samples sit on a grid (at most GRID_SHARE of them
    distinct), else 0: the smallest gap between distinct values."""
    given = np.asarray(samples_s, dtype=float)
    values = np.unique(given)
    if values.size < 2 or values.size > GRID_SHARE * given.size:
        return 0.0
    return float(np.min(np.diff(values)))


@dataclass(frozen=True)
class Look:
    """One look: the median time and the confidence sequence's bounds on the process's own
    level (seconds per launch), after `samples` samples."""

    samples: int
    median_s: float
    low_s: float
    high_s: float


def bounds(
    log_samples: npt.ArrayLike,
    alpha: float,
    step_rel: npt.ArrayLike = 0.0,
    wander_rel: npt.ArrayLike = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """(median, radius) of log time on the last axis: radius = the mixture's multiplier x
    sqrt(long-run sigma^2 / n + wander_rel^2), plus half a grid step (relative) where the
    timer ticks."""
    values = np.asarray(log_samples, dtype=float)
    n = values.shape[-1]
    median = np.median(values, axis=-1)
    z = mixture_radius(n, alpha) * math.sqrt(n)
    spread = np.sqrt(long_run_sigma(values) ** 2 / n + np.asarray(wander_rel) ** 2)
    return median, z * spread + 0.5 * np.asarray(step_rel)


def look(samples_s: Sequence[float], alpha: float, wander_rel: float = 0.0) -> Look:
    """The confidence sequence at this look, for samples in time order (`wander_rel`:
    StopTarget.wander_rel now)."""
    values = np.asarray(samples_s, dtype=float)
    median_s = float(np.median(values))
    step_rel = grid_step(values) / median_s if median_s > 0 else 0.0
    centre, radius = bounds(np.log(values), alpha, step_rel, wander_rel)
    return Look(
        values.size,
        median_s,
        float(np.exp(centre - radius)),
        float(np.exp(centre + radius)),
    )


def decided(found: Look, target: StopTarget) -> bool:
    """Every edge has the confidence sequence wholly on one side (the slow side only where
    the edge allows an early stop there)."""
    for edge in target.edges:
        if found.high_s < edge.time_s:
            continue
        if edge.slow_early and found.low_s > edge.time_s:
            continue
        return False
    return True


def stop_reason(
    target: StopTarget,
    samples_s: Sequence[float],
    *,
    precise: bool,
    sampling_s: float,
    max_samples: int,
) -> str:
    """Why the sampling stops now under `target`, or "" to go on. `precise`: the workloads'
    medians reached the settings' precision (always required before an early stop, so a
    decided measurement is never vaguer than the precision rule makes it). The budget is the
    caller's to check."""
    if precise and not target.edges:
        return "precision"
    if precise and len(samples_s) >= MIN_DECIDE_SAMPLES:
        wander = target.wander_rel(sampling_s, float(np.median(samples_s)))
        if decided(look(samples_s, target.alpha, wander), target):
            return DECIDED
    at_horizon = target.horizon_s > 0 and sampling_s >= target.horizon_s
    if at_horizon and len(samples_s) >= target.horizon_samples:
        return HORIZON
    if len(samples_s) >= (target.max_samples or max_samples):
        return "max_samples"
    return ""


def stored_horizon_s(backend: str, cache: str, budget_s: float, minimum_s: float) -> float:
    """The horizon of a stored target: the minimum sampling time a stored measurement had
    before this rule (`minimum_s`, policy.STORED_MIN_SAMPLING_S: the band's priors were
    measured at it) within the budget; SIM_STORED_HORIZON_S on the simulated device; 0 (the
    budget) in hot mode, which never had one."""
    if cache == "hot":
        return 0.0
    if backend == "sim":
        return min(SIM_STORED_HORIZON_S, budget_s)
    return min(minimum_s, budget_s)
