"""The few distribution functions the statistics and the gate need, from `scipy.special`.

`scipy.stats` evaluates its normal, Student-t, F and binomial distributions with these same
special functions, but importing it costs a measuring process far more than they do: about
0.5 s on top of `scipy.special`'s 0.2 s on a CPU machine, inside the device's opening that
took 1.2 s of a 3.7 s run on the H200 machine (2026-11-28), and every pytest-xdist worker
pays it again. So a run that measures and judges imports `scipy.special` only; each function
below says which `scipy.stats` call it equals, and tests/unit/test_distributions.py holds it
to that call over many inputs.

SciPy loads on the first call, not at import: the plugin imports the engine in every process
that uses gpu_bench, also one that only launches a kernel once (no --gpuperf).
"""

from __future__ import annotations

import math


def _special():
    """scipy.special, imported on first use (see the module's docstring)."""
    from scipy import special

    return special


def load_special() -> None:
    """Import scipy.special now: a measuring session calls this when it opens the device,
    so the import is not paid inside the first measurement, which holds the GPU lock."""
    _special()


def norm_ppf(p: float) -> float:
    """The standard normal quantile; equals scipy.stats.norm.ppf(p) (which calls ndtri)."""
    return float(_special().ndtri(p))


def norm_isf(p: float) -> float:
    """The standard normal upper quantile; equals scipy.stats.norm.isf(p) (-ndtri(p))."""
    return -float(_special().ndtri(p))


def t_ppf(p: float, df: float) -> float:
    """Student's t quantile; equals scipy.stats.t.ppf(p, df), which calls stdtrit inside
    (0, 1) and gives the support's ends at 0 and 1 itself (stdtrit(0.5, 0) is +inf)."""
    if p == 0.0 or p == 1.0:
        return math.inf if p else -math.inf
    return float(_special().stdtrit(df, p))


def t_isf(p: float, df: float) -> float:
    """Student's t upper quantile; equals scipy.stats.t.isf(p, df) (-stdtrit(df, p), the
    ends as t_ppf's)."""
    return -t_ppf(p, df)


def f_sf(x: float, dfn: float, dfd: float) -> float:
    """The F distribution's survival function P(F > x); equals scipy.stats.f.sf(x, dfn, dfd)
    (which calls fdtrc inside the support, and is 1 at or below 0)."""
    if x <= 0.0:
        return 1.0
    return float(_special().fdtrc(dfn, dfd, x))


def binom_cdf(k: float, n: int, p: float) -> float:
    """P(B <= k) for B ~ Binomial(n, p); equals scipy.stats.binom.cdf(k, n, p) to a few ulp.

    scipy.stats evaluates it with Boost's complemented incomplete beta function,
    I_{1-p}(n - k, k + 1) as ibetac(k + 1, n - k, p): scipy.special.betaincc is that
    function. (scipy.special.bdtr is the same quantity from Cephes, but strays from it by up
    to 1e-9 relative at large n, enough to move a rank at a tie.)"""
    whole = math.floor(k)
    if whole < 0:
        return 0.0
    if whole >= n:
        return 1.0
    return float(_special().betaincc(whole + 1, n - whole, p))


def binom_ppf(q: float, n: int, p: float) -> float:
    """The smallest k in [0, n] with P(B <= k) >= q for B ~ Binomial(n, p) (-1 at q = 0);
    equals scipy.stats.binom.ppf(q, n, p) wherever that one agrees with its own cdf.

    A bisection over the ranks with `binom_cdf`, so the answer is exact by the definition.
    Boost's discrete quantile, which scipy.stats calls, can step one rank past an exact tie
    (binom.ppf(0.5, 35, 0.5) is 18, though binom.cdf(17, 35, 0.5) is exactly 0.5)."""
    if not 0.0 <= q <= 1.0:
        return math.nan  # as SciPy's, also for a NaN
    if q == 0.0:
        return -1.0
    if q == 1.0:
        return float(n)
    low, high = 0, n  # binom_cdf(n) = 1 >= q, so the answer lies in [low, high]
    while low < high:
        middle = (low + high) // 2
        if binom_cdf(middle, n, p) >= q:
            high = middle
        else:
            low = middle + 1
    return float(low)
