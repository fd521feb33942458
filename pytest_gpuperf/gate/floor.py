"""The floor check: must the efficiency reach `min_bw`'s fraction of the peak?"""

from __future__ import annotations

from pytest_gpuperf.engine.results import Measurement
from pytest_gpuperf.record.checks import FloorCheck
from pytest_gpuperf.record.verdict import FAIL, MARGINAL, PASS


def check_floor(
    measurement: Measurement, floor: float, *, origin: str = "min_bw", cache_bytes: int = 0
) -> FloorCheck:
    """PASS when the efficiency interval lies at or above the floor, FAIL when it lies below.

    When the interval straddles the floor (the engine already sampled to its budget), the
    median decides: reaching it is MARGINAL (the test passes, with a warning), missing it
    FAILs. A median below the floor is the best estimate of a kernel that misses it; letting
    it pass would let a slow kernel through whenever it is noisy enough.
    """
    if not floor > 0.0:
        raise ValueError(f"floor is an efficiency fraction > 0, not {floor}")
    low, high = measurement.efficiency_ci
    median = measurement.efficiency
    if low >= floor:
        status, straddles = PASS, False
    elif high < floor:
        status, straddles = FAIL, False
    else:
        status, straddles = (MARGINAL if median >= floor else FAIL), True
    return FloorCheck(
        floor=floor,
        status=status,
        efficiency=median,
        efficiency_ci=(low, high),
        straddles=straddles,
        origin=origin,
        # Hot runs of a working set the caches can hold are measured against the HBM peak
        # they do not use: such a floor says nothing (a hot 12 MiB run reads 200% of peak).
        hot_floor=measurement.cache == "hot"
        and (not cache_bytes or measurement.bytes_moved < 2 * cache_bytes),
    )
