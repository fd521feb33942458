"""The roofline's floors: `min_flops` (compute efficiency: achieved FLOP/s over the declared
type's dense peak) and `min_roofline` (achieved over the roof that binds at the kernel's
arithmetic intensity, min(peak FLOP/s, intensity x peak bandwidth): engine/roofline.py).

Each is decided by the floor's one rule (gate/floor.py `floor_status`): the interval at or
above the floor passes, wholly below fails, straddling is decided on the median (marginal or
failed). `min_bw` keeps its meaning and the stored and A/B gates stay on time: a kernel's
declared FLOPs are the same on both sides of a comparison, so a change of time is the whole
change. A measurement without declared work cannot be given these floors: the fixture refuses
that at setup (session/fixture.py), so a FloorCheck here always has its numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_gpuperf.engine.results import Measurement
from pytest_gpuperf.gate.floor import floor_status
from pytest_gpuperf.record.checks import FloorCheck
from pytest_gpuperf.record.verdict import FAIL

MIN_FLOPS, MIN_ROOFLINE = "min_flops", "min_roofline"


@dataclass(frozen=True)
class WorkFloors:
    """The roofline floors that apply to one measurement (None: no such floor) and where each
    was written (`min_flops`, `min_flops(name='gemm')`), as the fixture found them."""

    flops: float | None = None
    flops_origin: str = MIN_FLOPS
    roofline: float | None = None
    roofline_origin: str = MIN_ROOFLINE

    @property
    def any(self) -> bool:
        return self.flops is not None or self.roofline is not None


def check_flops_floor(m: Measurement, floor: float, origin: str = MIN_FLOPS) -> FloorCheck:
    """`min_flops`: the compute efficiency (achieved FLOP/s over the type's peak) must reach
    `floor`."""
    roofline = m.roofline
    if roofline is None:
        raise ValueError(f"{m.name}: a compute floor needs declared work (flops=, math=)")
    interval, median = roofline.compute_efficiency_ci, roofline.compute_efficiency
    return _check(interval, median, floor, origin)


def check_roofline_floor(m: Measurement, floor: float, origin: str = MIN_ROOFLINE) -> FloorCheck:
    """`min_roofline`: the achieved FLOP/s over the roof that binds at the measurement's
    intensity (compute or memory) must reach `floor`."""
    roofline = m.roofline
    if roofline is None:
        raise ValueError(f"{m.name}: a roofline floor needs declared work (flops=, math=)")
    interval, median = roofline.roofline_efficiency_ci, roofline.roofline_efficiency
    return _check(interval, median, floor, origin)


def _check(interval: tuple[float, float], median: float, floor: float, origin: str) -> FloorCheck:
    status, straddles = floor_status(interval, median, floor)
    return FloorCheck(
        floor=floor,
        status=status,
        efficiency=median,
        efficiency_ci=interval,
        straddles=straddles,
        origin=origin,
    )


def check_work_floors(
    m: Measurement, floors: WorkFloors
) -> tuple[FloorCheck | None, FloorCheck | None]:
    """(the min_flops check, the min_roofline check) of one measurement, None where the floor
    does not apply (or the measurement declared no work: nothing to judge)."""
    if m.work is None:
        return None, None
    flops = roofline = None
    if floors.flops is not None:
        flops = check_flops_floor(m, floors.flops, floors.flops_origin)
    if floors.roofline is not None:
        roofline = check_roofline_floor(m, floors.roofline, floors.roofline_origin)
    return flops, roofline


def failed_floor(*checks: FloorCheck | None) -> FloorCheck | None:
    """The first floor that failed (what keeps a measurement from being saved), else the
    first floor given: `plan_save` reads one."""
    failed = next((c for c in checks if c is not None and c.status == FAIL), None)
    return failed or next((c for c in checks if c is not None), None)


__all__ = [
    "MIN_FLOPS",
    "MIN_ROOFLINE",
    "WorkFloors",
    "check_flops_floor",
    "check_roofline_floor",
    "check_work_floors",
    "failed_floor",
]
