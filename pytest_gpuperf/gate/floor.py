"""The floor check: must the efficiency reach `min_bw`'s fraction of the peak? (The roofline's
floors, `min_flops` and `min_roofline`, are decided by the same rule: gate/roofline.py.)"""

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
    low, high = measurement.efficiency_ci
    median = measurement.efficiency
    status, straddles = floor_status((low, high), median, floor)
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


def floor_status(interval: tuple[float, float], median: float, floor: float) -> tuple[str, bool]:
    """(status, whether the interval straddles the floor) of a fraction against a floor: the
    one rule every floor is decided by (see `check_floor`)."""
    if not floor > 0.0:
        raise ValueError(f"floor is an efficiency fraction > 0, not {floor}")
    low, high = interval
    if low >= floor:
        return PASS, False
    if high < floor:
        return FAIL, False
    return (MARGINAL if median >= floor else FAIL), True
