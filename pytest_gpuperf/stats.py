"""Robust statistics for kernel timings: the median, its confidence interval, spread, outliers.

Kernel times are skewed (a floor set by the hardware, a tail of interrupts, clock dips and
neighbours), so everything here is distribution-free or rank-based: the median and an
order-statistic interval for it rather than a mean and a t-interval; MAD rather than the
standard deviation; Mann-Whitney U and a bootstrap of the ratio of medians for comparisons.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

# Iglewicz & Hoaglin's cut-off for the modified z-score: |x - median| / MAD > 3.5.
OUTLIER_THRESHOLD = 3.5
# sqrt(pi / 2): makes the mean absolute deviation estimate sigma for normal data; used
# only when more than half the samples are identical and the MAD is zero.
_MEANAD_TO_SIGMA = 1.2533141373155003

# Anything numpy reads as a flat run of finite numbers: a list, a tuple, an array.
Samples = npt.ArrayLike


def median_ci_ranks(n: int, confidence: float = 0.95) -> tuple[int, int, float]:
    """Zero-based order-statistic ranks (low, high) bracketing the median, and their coverage.

    The number B of samples below the true median is Binomial(n, 1/2) for any continuous
    distribution, and x_(j) lies above the median exactly when B <= j, so
    [x_(j), x_(n-1-j)] covers the median with probability 1 - 2 * P(B <= j); j is the
    largest rank that keeps that >= `confidence`. With too few samples no pair of ranks
    reaches `confidence` (n < 6 at 95%); then the sample range is returned with its true,
    lower coverage, so callers can tell.
    """
    if n < 1:
        raise ValueError("a confidence interval needs at least one sample")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), not {confidence}")
    return _ranks(n, round(confidence, 12))


@functools.lru_cache(maxsize=4096)
def _ranks(n: int, confidence: float) -> tuple[int, int, float]:
    tail = (1.0 - confidence) / 2.0
    j = int(sps.binom.ppf(tail, n, 0.5))
    if sps.binom.cdf(j, n, 0.5) > tail:
        j -= 1  # ppf gives the first rank whose tail reaches `tail`; we need it not to exceed
    j = max(j, 0)
    coverage = 1.0 - 2.0 * float(sps.binom.cdf(j, n, 0.5))
    return j, n - 1 - j, coverage


def median_ci(samples: Samples, confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median (order statistics, exact binomial).

    Same interval as `scipy.stats.quantile_test(...).confidence_interval()` for p=0.5, but
    with the ranks cached and defined (as the sample range) for tiny samples; see
    `median_ci_ranks` for the coverage actually reached.
    """
    ordered = _sorted(samples)
    low, high, _ = median_ci_ranks(ordered.size, confidence)
    return float(ordered[low]), float(ordered[high])


def mad(samples: Samples) -> float:
    """Median absolute deviation scaled to estimate sigma for normal data (1.4826 x raw MAD)."""
    return float(sps.median_abs_deviation(_array(samples), scale="normal"))


def relative_spread(samples: Samples) -> float:
    """MAD over the median: a robust coefficient of variation (0.01 is ~1% jitter)."""
    values = _array(samples)
    return mad(values) / float(np.median(values))


def outliers(samples: Samples, threshold: float = OUTLIER_THRESHOLD) -> np.ndarray:
    """Boolean mask of outliers by the robust z-score |x - median| / MAD_normal > threshold.

    Robust z (Iglewicz & Hoaglin's modified z-score, cut-off 3.5) rather than Tukey fences:
    it is symmetric and scale-free like the MAD reported next to it. Both sides are flagged:
    slow samples (an interrupt, a clock dip) and fast ones (a launch that did not run fully)
    are equally suspect. When more than half the samples are identical the MAD is zero, and
    the mean absolute deviation (scaled to sigma) stands in for it; identical samples have
    no outliers.
    """
    values = _array(samples)
    centre = float(np.median(values))
    deviation = np.abs(values - centre)
    scale = mad(values)
    if scale == 0.0:
        scale = _MEANAD_TO_SIGMA * float(deviation.mean())
    if scale == 0.0:
        return np.zeros(values.size, dtype=bool)
    return deviation / scale > threshold


@dataclass(frozen=True)
class Summary:
    """The robust summary of one set of samples (times in seconds, in practice).

    `relative_ci` is the interval's half-width over the median, (high - low) / 2 / median,
    the same definition as `Measurement.relative_ci`. `coverage` is the exact coverage of
    the order statistics used, >= `confidence` unless there were too few samples.
    """

    median: float
    ci_low: float
    ci_high: float
    relative_ci: float
    mad: float
    n: int
    outliers: int
    confidence: float
    coverage: float

    @property
    def relative_spread(self) -> float:
        return self.mad / self.median


def summarize(samples: Samples, confidence: float = 0.95) -> Summary:
    """Median, its distribution-free interval, MAD and outlier count of `samples`."""
    ordered = _sorted(samples)
    low, high, coverage = median_ci_ranks(ordered.size, confidence)
    median = float(np.median(ordered))
    ci_low, ci_high = float(ordered[low]), float(ordered[high])
    return Summary(
        median=median,
        ci_low=ci_low,
        ci_high=ci_high,
        relative_ci=(ci_high - ci_low) / 2.0 / median,
        mad=mad(ordered),
        n=int(ordered.size),
        outliers=int(outliers(ordered).sum()),
        confidence=confidence,
        coverage=coverage,
    )


def precision_reached(
    samples: Samples,
    target_rel_ci: float,
    min_samples: int,
    confidence: float = 0.95,
) -> bool:
    """The measurement engine's stopping rule.

    True once at least `min_samples` were taken, there are enough of them for the interval
    to reach `confidence` at all, and the interval's half-width relative to the median is
    within `target_rel_ci` (0.005 is +-0.5%).
    """
    values = np.asarray(samples, dtype=float).ravel()
    if values.size == 0 or values.size < min_samples:
        return False
    ordered = _sorted(values)
    low, high, coverage = median_ci_ranks(ordered.size, confidence)
    if coverage < confidence:
        return False
    median = float(np.median(ordered))
    return (float(ordered[high]) - float(ordered[low])) / 2.0 <= target_rel_ci * median


@dataclass(frozen=True)
class Comparison:
    """Whether `b` differs from `a`, and by how much (as a ratio of medians, b over a).

    `p_value` is Mann-Whitney U's, two-sided; `significant` is p_value < 1 - confidence.
    `ratio_ci` is a seeded percentile bootstrap interval of median(b) / median(a): the size
    of the difference, where the p-value only says whether there is one.
    """

    median_a: float
    median_b: float
    ratio: float
    ratio_ci: tuple[float, float]
    p_value: float
    confidence: float

    @property
    def significant(self) -> bool:
        return self.p_value < 1.0 - self.confidence

    @property
    def relative_change(self) -> float:
        """median(b) / median(a) - 1: +0.05 means b is 5% larger (for times: slower)."""
        return self.ratio - 1.0


def compare(
    a: Samples,
    b: Samples,
    confidence: float = 0.95,
    *,
    n_resamples: int = 4999,
    seed: int = 0,
) -> Comparison:
    """Two-sample comparison of `b` against `a` (e.g. times now against times before).

    Rank-based (Mann-Whitney U) so a few outliers cannot make or break the answer; the
    bootstrap is percentile rather than BCa because the median's jackknife, which BCa needs,
    is degenerate for tied or small samples. Seeded, so the same data give the same interval.
    """
    first, second = _array(a), _array(b)
    if first.size < 2 or second.size < 2:
        raise ValueError("compare needs at least two samples on each side")
    p_value = float(sps.mannwhitneyu(first, second, alternative="two-sided").pvalue)

    def ratio_of_medians(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.median(y, axis=axis) / np.median(x, axis=axis)

    interval = sps.bootstrap(
        (first, second),
        ratio_of_medians,
        n_resamples=n_resamples,
        vectorized=True,
        paired=False,
        confidence_level=confidence,
        method="percentile",
        rng=np.random.default_rng(seed),
    ).confidence_interval
    median_a, median_b = float(np.median(first)), float(np.median(second))
    return Comparison(
        median_a=median_a,
        median_b=median_b,
        ratio=median_b / median_a,
        ratio_ci=(float(interval.low), float(interval.high)),
        p_value=p_value,
        confidence=confidence,
    )


def _array(samples: Samples) -> np.ndarray:
    values = np.asarray(samples, dtype=float).ravel()
    if values.size == 0:
        raise ValueError("no samples")
    if not np.all(np.isfinite(values)):
        raise ValueError("samples must be finite numbers (got NaN or infinity)")
    return values


def _sorted(samples: Samples) -> np.ndarray:
    return np.sort(_array(samples))
