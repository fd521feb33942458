"""Whether a measured efficiency is one the device can reach at all.

Efficiency is declared bytes / median time / peak bandwidth, so a test that declares more
bytes than its kernel moves (or a kernel that skips its work) reads as a fast kernel: on the
simulated MI300X `bytes=8 * N * 8` for a vector add measured 312% of peak and passed, and
`bytes=10**30` passed at 4.6e24%. The memory system bounds what can be true:

- cold and rotate: every declared byte comes from HBM (the caches were evicted, or each
  launch uses buffers no cache holds), so the efficiency is at most 1.0 of the HBM peak;
- hot: a working set the caches hold (declared bytes <= L2 + last-level cache) may
  legitimately beat the HBM peak, and the device table knows no cache bandwidth to bound it;
  a larger one still has at least `bytes - cache_bytes` to fetch from HBM each launch, so
  its efficiency is at most `bytes / (bytes - cache_bytes)`.

A measurement fails only when even the slow end of its interval (the efficiency at the upper
bound of the time's interval) is above the limit: noise alone never fails a test here.
"""

from __future__ import annotations

import math

from pytest_gpuperf.engine.results import Measurement
from pytest_gpuperf.record.verdict import BeyondPeak

HBM_BOUND_MODES = ("cold", "rotate")


def efficiency_limit(cache: str, bytes_moved: int, cache_bytes: int) -> float:
    """The most efficiency (of the HBM peak) a measurement in `cache` mode can reach;
    math.inf where nothing bounds it (a hot working set the caches hold)."""
    if cache in HBM_BOUND_MODES:
        return 1.0
    if cache_bytes <= 0 or bytes_moved <= cache_bytes:  # held by the caches (or unknown)
        return math.inf
    return bytes_moved / (bytes_moved - cache_bytes)


def check_peak(
    measurement: Measurement, cache_bytes: int, device_peak_bps: float = 0.0
) -> BeyondPeak | None:
    """A BeyondPeak when the measurement's efficiency is impossible, else None.

    Judged against the device's own peak (`device_peak_bps`; the measurement's when not
    given): a test's `peak_gbps` may name a lower figure to be judged against, which the
    device can beat."""
    peak_bps = device_peak_bps if device_peak_bps > 0 else measurement.peak_bps
    limit = efficiency_limit(measurement.cache, measurement.bytes_moved, cache_bytes)
    scale = measurement.peak_bps / peak_bps
    low, high = (e * scale for e in measurement.efficiency_ci)
    if not low > limit:  # NaN and inf compare false: no claim without a finite low end
        return None
    return BeyondPeak(
        efficiency_ci=(low, high),
        limit=limit,
        cache=measurement.cache,
        bytes_moved=measurement.bytes_moved,
        cache_bytes=cache_bytes,
        bandwidth_bps=measurement.bandwidth_bps,
        peak_bps=peak_bps,
    )


__all__ = ["HBM_BOUND_MODES", "check_peak", "efficiency_limit"]
