"""The Student-t interval, on its own: the values (results.py) recompute an A/B ratio's
interval at a suite's confidence, and the statistics (stats.py) build theirs with it. Here,
neither imports the other for it. Its quantile is scipy.special's (engine/distributions.py),
loaded on the first call, as the values stay light."""

from __future__ import annotations

from pytest_gpuperf.engine.distributions import t_ppf


def t_interval(
    estimate: float, se: float, df: float, confidence: float = 0.95
) -> tuple[float, float]:
    """estimate +- t(df) se, two-sided at `confidence`."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), not {confidence}")
    half = t_ppf(0.5 + confidence / 2.0, max(df, 1.0)) * se
    return estimate - half, estimate + half
