"""How many extra bytes does each slower head read? The plan inverts the time each probe's
extra bytes cost (the calibration) at the slowdown a point is named for."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lab.kernels import MAX_PERMILLE, extra_floats

from .points import POINTS, SIZES, SLOWER, Point

# Used only when the calibration fails: on the H100 (2026-11-23, the previous version of this
# script and tests/gpu/test_gate_on_gpu.py) 10% and 20% more bytes, read by the first threads,
# cost 6.4% and 13.0% more time: 1.56 x the bytes per unit of time.
FALLBACK_BYTES_PER_TIME = 1.56


@dataclass(frozen=True)
class Plan:
    sizes: dict[str, int]  # size -> fp32 elements
    permille: dict[str, int]  # point name -> HEAD's EXTRA_PERMILLE (0 for the controls)
    calibration: dict[str, Any] = field(default_factory=dict)

    def elements(self, size: str) -> int:
        return self.sizes[size]

    @property
    def points(self) -> tuple[Point, ...]:
        """The points of this plan (a plan read from an older file has fewer sizes)."""
        return tuple(p for p in POINTS if p.size in self.sizes and p.name in self.permille)

    @property
    def extra_floats(self) -> int:
        """Size of the `extra` buffer every test allocates: what the hungriest head reads."""
        needed = [
            extra_floats(self.elements(point.size), self.permille.get(point.name, 0))
            for point in self.points
        ]
        return max(1, *needed)


def permille_for(
    slowdown: float, slope_per_permille: float | None, probes: Sequence[Sequence[float]] = ()
) -> int:
    """EXTRA_PERMILLE that slows the kernel by `slowdown`: interpolated between measured
    probes ((permille, time ratio) pairs) where there are any, else from the time slope (None
    or not positive: the H100's fallback figure). The probes matter for short kernels, whose
    first extra loads cost more than their bytes: on the H100 1 per mille more bytes cost a
    7.8 us kernel +0.26% and 21 per mille +1.83%, where a line through 0 put +1% at 4."""
    if probes:
        value = interpolate_permille(slowdown, probes)
    elif slope_per_permille is None or not slope_per_permille > 0:
        value = 1000.0 * slowdown * FALLBACK_BYTES_PER_TIME
    else:
        value = slowdown / slope_per_permille
    return int(min(MAX_PERMILLE, max(1, round(value))))


def interpolate_permille(slowdown: float, probes: Sequence[Sequence[float]]) -> float:
    """The permille at which the piecewise-linear curve through (0, 0) and the probes'
    (permille, ratio - 1) reaches `slowdown`; past the last probe, its last segment goes on.
    Noise can make a larger probe read a smaller ratio: the curve keeps the running maximum."""
    points = [(0.0, 0.0)]
    for permille, ratio in sorted((float(p), float(r)) for p, r in probes):
        if permille > points[-1][0]:
            points.append((permille, max(ratio - 1.0, points[-1][1])))
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if slowdown <= y1 and y1 > y0:
            return x0 + (slowdown - y0) * (x1 - x0) / (y1 - y0)
    (x0, y0), (x1, y1) = points[-2], points[-1]
    slope = (y1 - y0) / (x1 - x0)
    return x1 + (slowdown - y1) / slope if slope > 0 else float(MAX_PERMILLE)


def plan_from(sizes: Mapping[str, int], calibration: Mapping[str, Any] | None) -> Plan:
    """The plan for `sizes` ({size: elements}) from a calibration ({size:
    {"slope_per_permille": ...}, "source": ...}); a size without a positive slope takes the
    fallback, and the plan's source says so."""
    calibration = dict(calibration or {})
    slopes = {size: calibration.get(size, {}).get("slope_per_permille") for size in sizes}
    probes = {size: calibration.get(size, {}).get("probes", ()) for size in sizes}
    permille = {
        point.name: (
            permille_for(point.slowdown, slopes[point.size], probes[point.size])
            if point.kind == SLOWER
            else 0
        )
        for point in POINTS
        if point.size in sizes
    }
    unusable = [size for size, slope in slopes.items() if slope is None or not slope > 0]
    source = calibration.get("source", "")
    if unusable and "FALLBACK" not in source:
        fallback = f"{FALLBACK_BYTES_PER_TIME} x the slowdown in bytes"
        source = f"{source}; FALLBACK for {', '.join(unusable)}: {fallback}".lstrip("; ")
    calibration["source"] = source
    return Plan(dict(sizes), permille, calibration)


def plan_line(plan: Plan) -> str:
    slowed = ", ".join(
        f"{name} {permille / 10:g}% more bytes"
        for name, permille in plan.permille.items()
        if permille
    )
    sizes = ", ".join(f"{size} {elements} elements" for size, elements in plan.sizes.items())
    return f"{sizes}; {slowed} ({plan.calibration.get('source', '')})"


def plan_json(plan: Plan) -> dict[str, Any]:
    return {
        "sizes": plan.sizes,
        **{f"{size}_elements": elements for size, elements in plan.sizes.items()},
        "permille": plan.permille,
        "calibration": plan.calibration,
    }


def plan_from_json(plan: Mapping[str, Any]) -> Plan:
    sizes = plan.get("sizes") or {
        size: plan[f"{size}_elements"] for size in SIZES if f"{size}_elements" in plan
    }
    return Plan(dict(sizes), dict(plan["permille"]), dict(plan["calibration"]))
