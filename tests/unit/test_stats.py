"""stats.py against known distributions: interval coverage, spread, outliers, comparisons.

Simulations are seeded and vectorised (one sorted matrix per case), so the file runs in a
few seconds; the sample counts are chosen so Monte Carlo error cannot decide an assertion.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from pytest_gpuperf.engine import stats

CONFIDENCE = 0.95
TRIALS = 4000


@pytest.mark.parametrize("n", [6, 7, 10, 11, 50, 51, 200, 1001])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_ranks_match_scipy_quantile_test(n, confidence):
    values = np.arange(float(n)) * 1.5 + 3.0
    expected = sps.quantile_test(values, q=float(np.median(values))).confidence_interval(confidence)
    low, high, coverage = stats.median_ci_ranks(n, confidence)
    assert low + high == n - 1  # symmetric ranks
    if coverage < confidence:  # too few samples for any interval (n <= 7 at 99%)
        assert math.isnan(expected.low) and math.isnan(expected.high)
        assert (low, high) == (0, n - 1)
        return
    assert stats.median_ci(values[::-1], confidence) == (expected.low, expected.high)


def test_too_few_samples_give_the_range_with_its_true_coverage():
    low, high, coverage = stats.median_ci_ranks(5, 0.95)
    assert (low, high) == (0, 4)
    assert coverage == pytest.approx(1 - 2 * 0.5**5)  # 0.9375 < 0.95: callers can tell
    assert stats.median_ci([3.0, 1.0, 2.0, 5.0, 4.0]) == (1.0, 5.0)
    assert stats.median_ci([7.0]) == (7.0, 7.0)


def _exponential_with_outliers(rng, shape):
    """Exp(1) where 5% of samples are replaced by interrupts 20-50x longer."""
    values = rng.exponential(1.0, shape)
    hit = rng.random(shape) < 0.05
    values[hit] = rng.uniform(20.0, 50.0, int(hit.sum()))
    return values


# Each case: a sampler and the true median of what it draws.
DISTRIBUTIONS = {
    "normal": (lambda rng, shape: rng.normal(10.0, 2.0, shape), 10.0),
    "lognormal": (lambda rng, shape: rng.lognormal(0.0, 0.8, shape), 1.0),
    # 0.95 * (1 - exp(-m)) = 0.5 (the outliers all lie above the median)
    "exponential+outliers": (_exponential_with_outliers, -math.log(1 - 0.5 / 0.95)),
    # a timer with a coarse tick: ties; rounding is monotone, so the median rounds too
    "quantised lognormal": (lambda rng, shape: np.round(rng.lognormal(0.0, 0.3, shape), 1), 1.0),
}


@pytest.mark.parametrize("n", [12, 50, 100])
@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
def test_median_ci_coverage(name, n):
    sampler, true_median = DISTRIBUTIONS[name]
    rng = np.random.default_rng([n, list(DISTRIBUTIONS).index(name)])
    ordered = np.sort(sampler(rng, (TRIALS, n)), axis=1)
    low, high, exact = stats.median_ci_ranks(n, CONFIDENCE)
    covered = (ordered[:, low] <= true_median) & (true_median <= ordered[:, high])
    empirical = covered.mean()
    standard_error = math.sqrt(exact * (1 - exact) / TRIALS)
    # For these n the exact coverage is >= 3.5 standard errors above the nominal level.
    assert exact - CONFIDENCE >= 3.5 * standard_error
    assert empirical >= CONFIDENCE
    # Not absurdly conservative: what the binomial promises, no more (ties may add a little).
    assert exact <= 0.975
    upper = 1.0 if name.startswith("quantised") else exact + 4 * standard_error
    assert exact - 4 * standard_error <= empirical <= upper


def test_median_ci_of_one_sample_matches_the_vectorised_ranks():
    rng = np.random.default_rng(3)
    samples = rng.lognormal(0.0, 0.5, 37)
    low, high, _ = stats.median_ci_ranks(37, 0.95)
    ordered = np.sort(samples)
    assert stats.median_ci(samples) == (ordered[low], ordered[high])


def test_mad_of_a_normal_estimates_sigma():
    rng = np.random.default_rng(4)
    samples = rng.normal(5.0, 0.25, 20_000)
    assert stats.mad(samples) == pytest.approx(0.25, rel=0.03)
    assert stats.relative_spread(samples) == pytest.approx(0.05, rel=0.03)


def test_mad_ignores_a_few_huge_outliers():
    rng = np.random.default_rng(5)
    samples = rng.normal(1.0, 0.01, 1000)
    samples[:20] = 100.0
    assert stats.mad(samples) == pytest.approx(0.01, rel=0.1)
    assert np.std(samples) > 10  # what a non-robust spread would have said


def test_outliers_catch_planted_ones_on_both_sides():
    rng = np.random.default_rng(6)
    samples = rng.normal(1.0, 0.01, 1000)
    planted = [3, 100, 500, 998, 42]
    samples[planted[:3]] = 1.0 + 0.2 * np.array([1, 2, 3])  # slow: 20-60 sigma
    samples[planted[3:]] = 1.0 - 0.1 * np.array([1, 2])  # fast
    flagged = stats.outliers(samples)
    assert flagged.dtype == bool and flagged.shape == samples.shape
    assert flagged[planted].all()
    # Clean normal samples beyond 3.5 sigma: about 0.05%, so a handful at most.
    assert flagged.sum() - len(planted) <= 3


def test_outliers_threshold_is_the_robust_z():
    samples = np.array([0.0] * 50 + [1.0] * 50 + [4.0])
    z = np.abs(samples - np.median(samples)) / stats.mad(samples)
    assert (stats.outliers(samples, threshold=2.0) == (z > 2.0)).all()


def test_outliers_when_most_samples_are_identical():
    # MAD is zero; the mean absolute deviation stands in, so the real outlier still shows
    samples = [1.0] * 8 + [1.1, 9.0]
    assert stats.mad(samples) == 0.0
    assert stats.outliers(samples).tolist() == [False] * 9 + [True]
    assert not stats.outliers([2.0] * 10).any()


def test_summary():
    rng = np.random.default_rng(7)
    samples = rng.normal(1e-3, 1e-5, 301)
    samples[0] = 5e-3
    summary = stats.summarize(samples, 0.95)
    assert summary.n == 301
    assert summary.median == float(np.median(samples))
    assert (summary.ci_low, summary.ci_high) == stats.median_ci(samples, 0.95)
    assert summary.ci_low < summary.median < summary.ci_high
    assert summary.relative_ci == pytest.approx(
        (summary.ci_high - summary.ci_low) / 2 / summary.median
    )
    assert summary.mad == pytest.approx(1e-5, rel=0.15)
    assert summary.relative_spread == pytest.approx(0.01, rel=0.15)
    assert summary.outliers >= 1
    assert summary.confidence == 0.95
    assert summary.coverage == stats.median_ci_ranks(301, 0.95)[2]


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [float("inf"), 1.0]])
def test_bad_samples_are_refused(bad):
    with pytest.raises(ValueError):
        stats.summarize(bad)


def test_bad_confidence_is_refused():
    with pytest.raises(ValueError, match="confidence"):
        stats.median_ci([1.0, 2.0, 3.0], confidence=95)


def test_precision_reached():
    rng = np.random.default_rng(8)
    quiet = rng.normal(1.0, 0.002, 400)  # CI of the median ~ +-0.025%
    noisy = rng.normal(1.0, 0.2, 400)  # ~ +-2.5%
    assert stats.precision_reached(quiet, 0.005, 100, 0.95)
    assert not stats.precision_reached(quiet, 0.005, 401, 0.95)  # too few samples
    assert not stats.precision_reached(noisy, 0.005, 100, 0.95)
    assert stats.precision_reached(noisy, 0.05, 100, 0.95)
    # identical samples, but too few for any 95% interval to exist
    assert not stats.precision_reached([1.0] * 5, 0.005, 1, 0.95)
    assert stats.precision_reached([1.0] * 6, 0.005, 1, 0.95)
    assert not stats.precision_reached([], 0.005, 0, 0.95)


def test_precision_rule_matches_the_summary():
    rng = np.random.default_rng(9)
    samples = rng.lognormal(0.0, 0.05, 500)
    relative_ci = stats.summarize(samples).relative_ci
    assert stats.precision_reached(samples, relative_ci * 1.0001, 10)
    assert not stats.precision_reached(samples, relative_ci * 0.9999, 10)


def test_compare_detects_a_five_percent_shift():
    rng = np.random.default_rng(10)
    before = rng.normal(1.0, 0.01, 50)
    after = rng.normal(1.05, 0.01, 50)
    result = stats.compare(before, after)
    assert result.significant
    assert result.p_value < 1e-10
    assert result.ratio == pytest.approx(1.05, abs=0.01)
    assert result.relative_change == pytest.approx(0.05, abs=0.01)
    low, high = result.ratio_ci
    assert 1.0 < low < 1.05 < high < 1.1
    assert stats.compare(before, after) == result  # seeded: same data, same interval


def test_compare_of_identical_distributions_rarely_flags():
    rng = np.random.default_rng(11)
    repeats = 300
    flagged = sum(
        stats.compare(
            rng.lognormal(0.0, 0.02, 50), rng.lognormal(0.0, 0.02, 50), n_resamples=199, seed=i
        ).significant
        for i in range(repeats)
    )
    alpha = 0.05
    # false-positive rate ~ alpha: allow 3 standard errors of 300 trials
    assert flagged / repeats <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / repeats)


def test_compare_needs_two_samples_a_side():
    with pytest.raises(ValueError, match="two samples"):
        stats.compare([1.0], [1.0, 2.0])


# -- the A/B statistic: trimmed mean of log ratios, nested over module loads -------------

QUANTUM_S = 32e-9  # the H100 event timer's step


def _quantised_pairs(
    rng: np.random.Generator, n: int, effect: float = 1.002, jitter: float = 0.003
) -> tuple[np.ndarray, np.ndarray]:
    """Head and base times of a 7.8 us cold kernel as an H100 event timer reports them:
    log-normal jitter of about one timer step, 5% of launches slowed by an exponential tail
    (an interrupt, a clock dip), rounded to the 32 ns grid; head `effect` times slower."""

    def side(scale: float) -> np.ndarray:
        time_s = 7.8e-6 * scale * np.exp(rng.normal(0.0, jitter, n))
        slowed = rng.random(n) < 0.05
        time_s = time_s + slowed * rng.exponential(1.5e-6, n)
        return np.round(time_s / QUANTUM_S) * QUANTUM_S

    return side(effect), side(1.0)


def test_trimmed_mean_is_scipys_tukey_mclaughlin_interval():
    values = np.random.default_rng(3).standard_t(3, 52)  # 5.2 values cut at each end: 5
    found = stats.trimmed_mean(values, 0.1)
    expected = sps.mstats.trimmed_mean_ci(values, limits=(0.1, 0.1), alpha=0.05)
    assert found.interval(0.95) == pytest.approx(tuple(expected))
    assert found.mean == pytest.approx(sps.trim_mean(values, 0.1))
    assert found.df == 52 - 2 * 5 - 1
    wider = found.interval(0.99)
    assert wider[0] < found.interval(0.95)[0] and wider[1] > found.interval(0.95)[1]


def test_trimmed_mean_refuses_what_it_cannot_summarise():
    with pytest.raises(ValueError, match="at least two"):
        stats.trimmed_mean([1.0])
    with pytest.raises(ValueError, match="trim"):
        stats.trimmed_mean([1.0, 2.0], trim=0.5)
    with pytest.raises(ValueError, match="finite"):
        stats.trimmed_mean([1.0, float("nan")])
    with pytest.raises(ValueError, match="confidence"):
        stats.trimmed_mean([1.0, 2.0, 3.0]).interval(1.0)


def test_quantised_pairs_stall_the_median_but_not_the_trimmed_mean():
    """The issue's finding in miniature: kernel times on a 32 ns grid give pair ratios of a
    few tied values; the median sits on one (1.0 for a true +0.2%) and its interval stays
    +-0.2% however many pairs are taken, where the trimmed mean of log ratios finds +0.2%
    and its interval shrinks as 1/sqrt(n)."""
    rng = np.random.default_rng(5)
    widths = {}
    for n in (2000, 20000):
        head, base = _quantised_pairs(rng, n)
        ratios = head / base
        _, counts = np.unique(np.round(ratios, 6), return_counts=True)
        assert np.sort(counts)[-5:].sum() > 0.6 * n  # most pairs on five tied values
        median = stats.summarize(ratios)
        assert median.median == 1.0 and median.relative_ci > 0.0015  # stalled, and off
        found = stats.trimmed_mean(np.log(ratios))
        low, high = np.exp(found.interval())
        assert low < 1.002 < high
        widths[n] = (high - low) / 2
    assert widths[20000] < 0.0001 < widths[2000] < 0.0004
    assert widths[2000] / widths[20000] == pytest.approx(math.sqrt(10), rel=0.2)


def test_trimmed_mean_interval_covers_under_quantisation_skew_and_outliers():
    rng = np.random.default_rng(11)
    trials, covered = 400, 0
    for _ in range(trials):
        head, base = _quantised_pairs(rng, 600)
        low, high = stats.trimmed_mean(np.log(head / base)).interval(0.95)
        covered += low <= math.log(1.002) <= high
    assert 0.92 <= covered / trials <= 0.99


def test_nested_estimate_carries_the_drift_of_module_loads():
    """Pairs spread over 8 loads, each load drifting by sigma_b = 0.5%: an interval from the
    pairs alone (as if one load) misses the truth most of the time; the nested one covers."""
    rng = np.random.default_rng(2)
    loads = np.arange(4000) % 8
    trials, nested_cover, naive_cover = 300, 0, 0
    for _ in range(trials):
        drift = rng.normal(0.0, 0.005, 8)
        logs = drift[loads] + rng.normal(0.0, 0.02, loads.size)
        found = stats.nested_trimmed_mean(logs, loads)
        assert found.basis == stats.DRIFT_MEASURED and found.loads == 8
        low, high = found.interval(0.95)
        nested_cover += low <= 0.0 <= high
        low, high = stats.trimmed_mean(logs).interval(0.95)
        naive_cover += low <= 0.0 <= high
    assert nested_cover / trials >= 0.92
    assert naive_cover / trials < 0.7
    found = stats.nested_trimmed_mean(logs, loads)
    assert found.df == 7 and found.between_sd == pytest.approx(0.005, rel=0.7)


def test_nested_estimate_without_drift_keeps_the_pairs_precision():
    rng = np.random.default_rng(4)
    loads = np.arange(4000) % 8
    logs = rng.normal(0.001, 0.02, loads.size)
    found = stats.nested_trimmed_mean(logs, loads)
    if found.between_sd == 0.0:  # the per-load means vary no more than their errors say
        assert found.se == found.within_se and found.df > 1000
    assert found.se < 1.5 * stats.trimmed_mean(logs).se
    assert found.load_pairs == (500,) * 8


def test_nested_estimate_with_too_few_loads_uses_the_assumed_drift():
    rng = np.random.default_rng(6)
    logs = rng.normal(0.0, 0.02, 1000)
    one = stats.nested_trimmed_mean(logs, np.zeros(1000, int))
    assert (one.basis, one.between_sd, one.loads) == (stats.DRIFT_NONE, 0.0, 1)
    assumed = stats.nested_trimmed_mean(logs, np.arange(1000) % 2, assumed_between_sd=0.01)
    assert assumed.basis == stats.DRIFT_ASSUMED and assumed.between_sd == 0.01
    assert assumed.se == pytest.approx(math.hypot(assumed.within_se, 0.01 / math.sqrt(2)))
    with pytest.raises(ValueError, match="load indices"):
        stats.nested_trimmed_mean(logs, [0, 1])
