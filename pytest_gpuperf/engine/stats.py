"""Robust statistics for kernel timings: the median, its confidence interval, spread, outliers.

Kernel times are skewed (a floor set by the hardware, a tail of interrupts, clock dips and
neighbours), so everything here is distribution-free or rank-based: the median and an
order-statistic interval for it rather than a mean and a t-interval; MAD rather than the
standard deviation; Mann-Whitney U and a bootstrap of the ratio of medians for comparisons.

Paired A/B ratios are the exception (`trimmed_mean`, `nested_trimmed_mean`): event timers
tick in steps (32 ns on an H100), so the ratios of a short kernel take a handful of tied
values and an order statistic cannot resolve between them, however many pairs are taken. A
trimmed mean averages across the step (docs/measurement.md, "The A/B statistic").
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pytest_gpuperf.engine.distributions import binom_cdf, binom_ppf
from pytest_gpuperf.engine.results import DRIFT_ASSUMED, DRIFT_MEASURED, DRIFT_NONE
from pytest_gpuperf.engine.student_t import t_interval


def _scipy_stats():
    """scipy.stats, imported on first use and only by `compare` (Mann-Whitney U and the
    bootstrap), which no measuring or judging run calls: its import costs a process about
    0.5 s more than the scipy.special the rest of this module uses (engine/distributions.py),
    and the plugin loads this module in every process that uses gpu_bench."""
    from scipy import stats

    return stats


# Iglewicz & Hoaglin's cut-off for the modified z-score: |x - median| / MAD > 3.5.
OUTLIER_THRESHOLD = 3.5
# The MAD of normal data over sigma, scipy.special.ndtri(0.75): scipy.stats'
# median_abs_deviation(scale="normal") divides by this same constant.
_MAD_OF_SIGMA = 0.6744897501960817
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
    j = int(binom_ppf(tail, n, 0.5))
    if binom_cdf(j, n, 0.5) > tail:
        j -= 1  # ppf gives the first rank whose tail reaches `tail`; we need it not to exceed
    j = max(j, 0)
    coverage = 1.0 - 2.0 * binom_cdf(j, n, 0.5)
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
    """Median absolute deviation scaled to estimate sigma for normal data (1.4826 x raw MAD);
    equals scipy.stats.median_abs_deviation(samples, scale="normal"), computed as it does."""
    values = _array(samples)
    return float(np.median(np.abs(values - np.median(values)))) / _MAD_OF_SIGMA


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
    p_value = float(_scipy_stats().mannwhitneyu(first, second, alternative="two-sided").pvalue)

    def ratio_of_medians(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.median(y, axis=axis) / np.median(x, axis=axis)

    interval = (
        _scipy_stats()
        .bootstrap(
            (first, second),
            ratio_of_medians,
            n_resamples=n_resamples,
            vectorized=True,
            paired=False,
            confidence_level=confidence,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
        .confidence_interval
    )
    median_a, median_b = float(np.median(first)), float(np.median(second))
    return Comparison(
        median_a=median_a,
        median_b=median_b,
        ratio=median_b / median_a,
        ratio_ci=(float(interval.low), float(interval.high)),
        p_value=p_value,
        confidence=confidence,
    )


# The share trimmed from each end of the per-pair log ratios: 10%, as Wilcox recommends for
# heavy tails at little cost in efficiency when the data are normal ("Introduction to Robust
# Estimation and Hypothesis Testing", ch. 3; 20% is his default for small samples).
TRIM = 0.10


@dataclass(frozen=True)
class TrimmedMean:
    """A trimmed mean with its Tukey-McLaughlin standard error.

    `se` is the winsorised standard deviation over (1 - 2 trim) sqrt(n), `df` = h - 1 where
    h = n - 2 floor(trim n) values survive the trimming (Tukey & McLaughlin 1963; the same
    as scipy.stats.mstats.trimmed_mean_ci).
    """

    mean: float
    se: float
    df: float
    n: int
    trim: float = TRIM

    def interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """The two-sided `confidence` interval mean +- t(df) se."""
        return t_interval(self.mean, self.se, self.df, confidence)


def trimmed_mean(values: Samples, trim: float = TRIM) -> TrimmedMean:
    """The `trim`-trimmed mean of `values` and its Tukey-McLaughlin standard error.

    Unbiased under quantisation where a median is not: a timer that rounds to a grid moves
    each value by at most half a step, and over many values the rounding averages out (the
    jitter dithers it), so the mean of rounded values resolves far below the step, while a
    median stays on one of the few grid values. Robust: the `trim` share of values at each
    end, where interrupts, clock dips and launches that did not run fully land, cannot move
    it. Needs at least 2 values.
    """
    data = _array(values)
    if data.size < 2:
        raise ValueError("a trimmed mean's interval needs at least two values")
    if not 0.0 <= trim < 0.5:
        raise ValueError(f"trim must be in [0, 0.5), not {trim}")
    cut = int(trim * data.size)
    kept = data.size - 2 * cut
    spread = float(np.std(winsorize(data, trim), ddof=1))
    return TrimmedMean(
        mean=trim_mean(data, trim),
        se=spread / ((1.0 - 2.0 * trim) * math.sqrt(data.size)),
        df=float(max(kept - 1, 1)),
        n=int(data.size),
        trim=trim,
    )


def trim_mean(values: np.ndarray, trim: float) -> float:
    """The mean of `values` without the int(trim n) smallest and largest; equals
    scipy.stats.trim_mean(values, trim), computed as it does (the same partition, so the same
    order of summation and the same last bit)."""
    cut = int(trim * values.size)
    kept = np.partition(values, (cut, values.size - cut - 1))[cut : values.size - cut]
    return float(np.mean(kept))


def winsorize(values: np.ndarray, trim: float) -> np.ndarray:
    """`values` (in their order) with the int(trim n) smallest set to the next value up and
    as many largest to the next one down: as many as trim_mean leaves out, as Tukey and
    McLaughlin's standard error asks (Wilcox, "Introduction to Robust Estimation and
    Hypothesis Testing", ch. 3). Equals scipy.stats.mstats.winsorize(values, limits=(trim,
    trim), inclusive=(True, True)) as a plain array. (Until 2026-11-28 it rounded trim n, as
    inclusive=(False, False) does: where trim n ends in .5 or more, say 66 pairs at 10%, one
    more value a side was clipped than trimmed, and the error came out too small.) Where the
    two cut-offs cross (a tiny n), SciPy's upper step copies a value its lower step already
    raised, so every value becomes the lower one: `high` below is never below `low`."""
    n = values.size
    ordered = np.sort(values)
    low_index = int(trim * n)
    high_index = n - int(trim * n) - 1
    low = ordered[low_index]
    high = ordered[max(high_index, low_index)]
    return np.clip(values, low, high)


# Fewer loads than this per side, and the spread between loads is not estimated: the
# variance of a variance from 1 degree of freedom is too wide to gate on.
MIN_LOADS_TO_ESTIMATE = 3


@dataclass(frozen=True)
class NestedEstimate:
    """The mean log ratio over pairs spread across k separately loaded modules per side.

    One-way random effects: pair i of load j has log ratio mu + b_j + e_ij, where b_j (the
    loads' own drift: where each code object landed) is shared by every pair of load j, and
    e_ij is launch jitter. `estimate` is the mean of the loads' trimmed means m_j; its
    variance is sigma_w^2 / N + sigma_b^2 / k. `between_sd` is sigma_b as estimated from the
    spread of the m_j (0 when they vary no more than their own errors say), `within_se` the
    standard error the pairs alone give, and `se`, `df` what the interval uses (`basis`:
    "measured" with k >= MIN_LOADS_TO_ESTIMATE, "assumed" when an assumed sigma_b stood in,
    "none" for a single load without one).
    """

    estimate: float
    se: float
    df: float
    loads: int
    pairs: int
    within_se: float
    between_sd: float
    basis: str
    load_means: tuple[float, ...] = ()
    load_pairs: tuple[int, ...] = ()

    def interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """The two-sided `confidence` interval of the mean log ratio."""
        return t_interval(self.estimate, self.se, self.df, confidence)

    def ratio_interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """The interval as a ratio (head time / base time)."""
        low, high = self.interval(confidence)
        return math.exp(low), math.exp(high)

    @property
    def ratio(self) -> float:
        return math.exp(self.estimate)


def nested_trimmed_mean(
    log_ratios: Samples,
    loads: Sequence[int] | npt.NDArray[np.integer],
    *,
    trim: float = TRIM,
    assumed_between_sd: float | None = None,
) -> NestedEstimate:
    """The mean of per-load trimmed means of `log_ratios` (pair i ran on load `loads[i]`),
    with the loads' drift estimated from the run (one-way random effects, nested ANOVA on
    the per-load means) and carried into the interval.

    With k >= MIN_LOADS_TO_ESTIMATE loads, sigma_b^2 = max(0, S_m^2 - mean(se_j^2)), where
    S_m^2 is the variance of the per-load means and se_j their Tukey-McLaughlin errors. When
    it is positive the variance of the estimate is S_m^2 / k with k - 1 degrees of freedom
    (Satterthwaite's approximation reduces to exactly this): the number of loads bounds what
    the run can say about drift, however many pairs each load had. Otherwise the pairs'
    own error decides, with their degrees of freedom. With fewer loads `assumed_between_sd`
    (None: 0) stands in for sigma_b.
    """
    values = _array(log_ratios)
    groups = np.asarray(loads, dtype=int).ravel()
    if groups.size != values.size:
        raise ValueError(f"{values.size} log ratios but {groups.size} load indices")
    parts = [trimmed_mean(values[groups == g], trim) for g in np.unique(groups)]
    k = len(parts)
    means = np.array([p.mean for p in parts])
    errors = np.array([p.se for p in parts])
    within_var = float(np.sum(errors**2)) / k**2
    # Welch-Satterthwaite degrees of freedom of the sum of the loads' squared errors.
    terms = np.array([p.se**4 / p.df for p in parts])
    within_df = float(np.sum(errors**2) ** 2 / np.sum(terms)) if np.sum(terms) > 0 else 1.0
    within_df = max(within_df, 1.0)
    if k >= MIN_LOADS_TO_ESTIMATE:
        spread_var = float(np.var(means, ddof=1))
        between_var = max(0.0, spread_var - float(np.mean(errors**2)))
        if between_var > 0:
            variance, df = spread_var / k, float(k - 1)
        else:
            variance, df = within_var, within_df
        basis = DRIFT_MEASURED
    else:
        between_var = (assumed_between_sd or 0.0) ** 2
        variance, df = within_var + between_var / k, within_df
        basis = DRIFT_ASSUMED if assumed_between_sd else DRIFT_NONE
    return NestedEstimate(
        estimate=float(np.mean(means)),
        se=math.sqrt(variance),
        df=df,
        loads=k,
        pairs=int(values.size),
        within_se=math.sqrt(within_var),
        between_sd=math.sqrt(between_var),
        basis=basis,
        load_means=tuple(float(m) for m in means),
        load_pairs=tuple(p.n for p in parts),
    )


Z_95 = 1.959963984540054


def per_side_drift(between_sd: float) -> float:
    """A per-load spread of log ratios as the +-95% drift of one side's load: a ratio of
    two loads (head's and base's) drifts by sqrt(2) times one load's sigma."""
    return Z_95 * between_sd / math.sqrt(2.0)


def _array(samples: Samples) -> np.ndarray:
    values = np.asarray(samples, dtype=float).ravel()
    if values.size == 0:
        raise ValueError("no samples")
    if not np.all(np.isfinite(values)):
        raise ValueError("samples must be finite numbers (got NaN or infinity)")
    return values


def _sorted(samples: Samples) -> np.ndarray:
    return np.sort(_array(samples))
