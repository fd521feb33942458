"""engine/distributions.py and stats.py's NumPy statistics against the scipy.stats calls they
stand in for (a measuring run imports scipy.special only, issue 46): the same numbers over
random inputs and edge cases, exactly where SciPy computes them the same way, else within
1e-12 relative. These tests import scipy.stats freely; the plugin must not."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats as sps

from pytest_gpuperf.engine import distributions as dist
from pytest_gpuperf.engine import stats

RNG_SEED = 46
EDGE_P = [0.0, 5e-324, 1e-300, 1e-100, 1e-16, 1e-9, 1e-3, 0.01, 0.025, 0.5, 0.975, 0.99]
EDGE_P += [1 - 1e-9, 1 - 1e-16, float(np.nextafter(1.0, 0.0)), 1.0]
DFS = [0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 8.0, 11.5, 30.0, 1e3, 1e6, 1e12, math.inf]


def probabilities(count: int = 300) -> list[float]:
    rng = np.random.default_rng(RNG_SEED)
    logs = 10.0 ** rng.uniform(-300, 0, count // 3)  # deep into both tails
    return [*EDGE_P, *rng.random(count // 3), *logs, *(1.0 - logs)]


def same(found: float, expected: float) -> bool:
    """Bit for bit, NaN and infinities included."""
    return np.array_equal(np.float64(found), np.float64(expected), equal_nan=True)


def test_norm_quantiles_are_scipy_stats_norm_exactly():
    for p in probabilities():
        assert same(dist.norm_ppf(p), sps.norm.ppf(p)), p
        assert same(dist.norm_isf(p), sps.norm.isf(p)), p


def test_student_t_quantiles_are_scipy_stats_t_exactly():
    rng = np.random.default_rng(RNG_SEED)
    dfs = [*DFS, *rng.uniform(1.0, 200.0, 10), *(10.0 ** rng.uniform(-1, 8, 10))]
    for df in dfs:
        for p in probabilities(60):
            assert same(dist.t_ppf(p, df), sps.t.ppf(p, df)), (p, df)
            assert same(dist.t_isf(p, df), sps.t.isf(p, df)), (p, df)


def test_the_student_t_interval_uses_scipy_stats_t():
    from pytest_gpuperf.engine.student_t import t_interval

    for df in [0.2, *DFS]:
        for confidence in (0.5, 0.9, 0.95, 0.99, 0.999999):
            half = sps.t.ppf(0.5 + confidence / 2.0, max(df, 1.0)) * 0.01
            assert t_interval(1.0, 0.01, df, confidence) == (1.0 - half, 1.0 + half)


def test_f_survival_is_scipy_stats_f_exactly():
    rng = np.random.default_rng(RNG_SEED)
    xs = [-1.0, 0.0, 5e-324, 1e-12, 0.5, 1.0, 1.0 + 1e-12, 1.3, 2.0, 10.0, 1e3, 1e12, math.inf]
    xs += list(10.0 ** rng.uniform(-3, 3, 20))
    dfs = [1.0, 2.0, 3.0, 5.5, 8.0, 30.0, 1e4, 1e8, *rng.uniform(1.0, 60.0, 4)]
    for dfn in dfs:
        for dfd in dfs:
            for x in xs:
                assert same(dist.f_sf(x, dfn, dfd), sps.f.sf(x, dfn, dfd)), (x, dfn, dfd)


# Twice the most samples a measurement keeps (engine/policy.py MIN_SAMPLING_MAX_SAMPLES).
MOST_SAMPLES = 100_000


def binomial_cases(largest: int = MOST_SAMPLES) -> list[tuple[int, float]]:
    rng = np.random.default_rng(RNG_SEED)
    sizes = [*range(1, 41), 99, 100, 101, 1000, 1001, *rng.integers(41, largest, 40)]
    ps = [0.5, 0.0, 1.0, 1e-12, 1e-3, 0.1, 0.3, 0.7, 0.999, 1 - 1e-12]
    return [(int(n), p) for n in sizes for p in [*ps, float(rng.random())]]


def test_binomial_cdf_is_scipy_stats_binom_within_1e_11():
    """Within 1e-11 relative for as many samples as a measurement takes, wherever the cdf is
    at least 1e-30 (the median's interval asks for tails of 0.05% and more). Both are
    Boost's incomplete beta, computed at different internal precision, and they drift apart
    where its arguments make it ill-conditioned: deeper in a tail and at larger n (2e-12 at
    1e-155, 1e-11 near underflow, 1.4e-12 at 1e-12 for n near two million). SciPy 1.17 agrees
    within 1e-12 here; 1.15.0, the oldest pyproject.toml allows, within 3.7e-12 (at
    k = 8431, n = 90564, p = 0.1: 1.6e-12)."""
    rng = np.random.default_rng(RNG_SEED)
    for n, p in [*binomial_cases(), *binomial_cases(2_000_000)[-200:]]:
        ks = {-5, -1, 0, 1, n // 2, n - 1, n, n + 1, n + 10, *rng.integers(0, n + 1, 10).tolist()}
        for k in sorted(ks):
            found, expected = dist.binom_cdf(k, n, p), float(sps.binom.cdf(k, n, p))
            if p in (0.0, 1.0) or k < 0 or k >= n:
                assert found == expected, (k, n, p)  # the ends of the support, exactly
            elif expected >= 1e-30 and n <= MOST_SAMPLES:
                assert math.isclose(found, expected, rel_tol=1e-11, abs_tol=0.0), (k, n, p)
            elif expected >= 1e-300:
                assert math.isclose(found, expected, rel_tol=1e-10), (k, n, p)
            else:
                assert found == pytest.approx(expected, rel=1e-6, abs=1e-310), (k, n, p)
        assert dist.binom_cdf(n / 3 + 0.5, n, p) == dist.binom_cdf(math.floor(n / 3 + 0.5), n, p)


def test_binomial_quantile_is_scipy_stats_binom_but_at_exact_ties():
    """Equal to binom.ppf everywhere SciPy's quantile agrees with SciPy's own cdf. Boost's
    discrete quantile (binom.ppf) can step one rank past an exact tie, where cdf(k) equals
    q to the last bit (binom.ppf(0.5, 35, 0.5) is 18, binom.cdf(17, 35, 0.5) is 0.5): there
    ours is the rank the definition names, checked against binom.cdf itself."""
    rng = np.random.default_rng(RNG_SEED)
    qs = [0.0, 1e-12, 1e-6, 0.005, 0.025, 0.05, 0.5, 0.95, 0.975, 1 - 1e-12, 1.0]
    compared = ties = 0
    for n, p in binomial_cases():
        for q in [*qs, *rng.random(3)]:
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # Boost gives up in a far tail: nothing to match
                try:
                    expected = float(sps.binom.ppf(q, n, p))
                except RuntimeWarning:
                    continue
            found = dist.binom_ppf(q, n, p)
            compared += 1
            if found == expected:
                continue
            ties += 1  # then ours must be the definition's answer, by scipy's own cdf
            assert found == expected - 1, (q, n, p, found, expected)
            assert math.isclose(sps.binom.cdf(found, n, p), q, rel_tol=1e-12), (q, n, p)
    assert compared > 10_000 and ties < compared / 200


def old_ranks(n: int, confidence: float) -> tuple[int, int, float]:
    """stats._ranks as it was written on scipy.stats."""
    tail = (1.0 - confidence) / 2.0
    j = int(sps.binom.ppf(tail, n, 0.5))
    if sps.binom.cdf(j, n, 0.5) > tail:
        j -= 1
    j = max(j, 0)
    return j, n - 1 - j, 1.0 - 2.0 * float(sps.binom.cdf(j, n, 0.5))


def test_median_ranks_are_those_scipy_stats_gave():
    rng = np.random.default_rng(RNG_SEED)
    sizes = [*range(1, 400), *rng.integers(400, 2_000_000, 60).tolist()]
    levels = [0.5, 0.8, 0.9, 0.95, 0.99, 0.999, 0.999999, float(rng.uniform(0.5, 1.0))]
    for n in sizes:
        for confidence in levels:
            low, high, coverage = stats.median_ci_ranks(n, confidence)
            old_low, old_high, old_coverage = old_ranks(n, round(confidence, 12))
            assert (low, high) == (old_low, old_high), (n, confidence)
            assert math.isclose(coverage, old_coverage, rel_tol=1e-12), (n, confidence)


def sample_sets() -> list[np.ndarray]:
    """Random sets of every small size and some large ones, with ties and without, and
    all-equal sets: what the MAD and the trimming see from a timer that ticks in steps."""
    rng = np.random.default_rng(RNG_SEED)
    sets = []
    for n in [*range(2, 41), 64, 99, 100, 257, 1000, 4001]:
        times = 1e-5 * (1 + 0.02 * rng.standard_t(3, n))
        sets += [times, np.round(times / 3.2e-8) * 3.2e-8, np.full(n, 7.5e-6)]
        sets.append(np.log(rng.choice([0.98, 1.0, 1.0, 1.01, 1.3], n)))  # ratios, mostly ties
    return sets


def test_mad_is_scipy_stats_median_abs_deviation_exactly():
    for values in [np.array([3.0]), *sample_sets()]:
        expected = sps.median_abs_deviation(values, scale="normal")
        assert same(stats.mad(values), expected), values.size
        assert same(stats.mad(values[::-1]), expected), values.size


TRIMS = [0.0, 0.02, 0.05, 0.1, 0.125, 0.2, 0.25, 0.3, 1 / 3, 0.45, 0.49, 0.4999]


def test_trim_mean_is_scipy_stats_trim_mean_exactly():
    for values in sample_sets():
        for trim in TRIMS:
            assert same(stats.trim_mean(values, trim), sps.trim_mean(values, trim)), trim


def test_winsorize_is_scipy_stats_mstats_winsorize_exactly():
    """Every set and share, also where trim x n ends in .5 or more (as many clipped as
    trim_mean leaves out: 0.1 x 25 clips 2, 0.1 x 66 clips 6) and where a tiny n makes the
    cut-offs cross."""
    for values in sample_sets():
        for trim in [*TRIMS, 2.5 / values.size, 1.5 / values.size]:
            if trim >= 0.5:
                continue
            expected = sps.mstats.winsorize(values, limits=(trim, trim), inclusive=(True, True))
            found = stats.winsorize(values, trim)
            assert np.array_equal(found, np.asarray(expected, dtype=float)), (values.size, trim)


def test_the_trimmed_mean_and_its_error_are_those_scipy_stats_gave():
    for values in sample_sets():
        for trim in (0.1, 0.2, 0.3):
            clipped = sps.mstats.winsorize(values, limits=(trim, trim), inclusive=(True, True))
            found = stats.trimmed_mean(values, trim)
            assert same(found.mean, sps.trim_mean(values, trim))
            spread = float(np.std(np.asarray(clipped, dtype=float), ddof=1))
            assert same(found.se, spread / ((1.0 - 2.0 * trim) * math.sqrt(values.size)))


@pytest.mark.parametrize("p", [-0.1, 1.1, math.nan])
def test_outside_zero_to_one_the_quantiles_are_nan_as_in_scipy_stats(p):
    assert same(dist.norm_ppf(p), sps.norm.ppf(p))
    assert same(dist.t_isf(p, 5.0), sps.t.isf(p, 5.0))
