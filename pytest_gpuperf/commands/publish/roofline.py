"""The dashboard's roofline: arithmetic intensity against FLOP/s, one point per measurement
that declared its work (the newest run's), under its device's two roofs (the memory roof,
intensity x peak bandwidth, up to the ridge point; the compute roof, the declared type's
dense peak, beyond it). One plot per device and math type, an SVG written by hand on log
axes as the other plots are (plots.py); each point names itself on hover (an SVG <title>).
Absent from a page none of whose runs declared work.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from pytest_gpuperf.engine.roofline import COMPUTE_BOUND, Roofline
from pytest_gpuperf.record.verdict import FAIL, Row
from pytest_gpuperf.report.roofline_words import roof_name

# (device key, test id, measurement name, cache mode): series.py's Key, a tuple of these
Key = tuple[str, str, str, str]

WIDTH, HEIGHT = 620, 360
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 18, 44
ROOF_COLOUR, POINT_COLOUR, FAILED_COLOUR = "#444444", "#1f77b4", "#d62728"


@dataclass(frozen=True)
class RooflinePoint:
    """One measurement of one run on its device's roofline: the measurement's own Roofline
    (its intensity, FLOP/s, peaks, bound), where it stands and whether the run failed."""

    key: Key
    run: int
    roofline: Roofline
    failed: bool = False


def roofline_points(key: Key, row: Row, run: int) -> list[RooflinePoint]:
    """The row's point on the roofline ([] when its test declared no work)."""
    roofline = row.measurement.roofline
    if roofline is None:
        return []
    return [RooflinePoint(key, run, roofline, failed=row.verdict.status == FAIL)]


def latest(points: Iterable[RooflinePoint]) -> dict[Key, RooflinePoint]:
    """Each measurement's point from its newest run."""
    found: dict[Key, RooflinePoint] = {}
    for point in points:
        if point.key not in found or point.run >= found[point.key].run:
            found[point.key] = point
    return found


def section(points: Sequence[RooflinePoint], ids: Mapping[Any, str]) -> str:
    """The page's roofline section: one plot per (device, math type, peaks); "" for none."""
    newest = latest(points)
    if not newest:
        return ""
    groups: dict[tuple[str, str, float, float], list[RooflinePoint]] = {}
    for point in newest.values():
        measured = point.roofline
        roof = (point.key[0], measured.math, measured.peak_flops_per_s, measured.peak_bps)
        groups.setdefault(roof, []).append(point)
    figures = []
    for (device, math_type, peak_flops, peak_bps), members in sorted(groups.items()):
        title = (
            f"{device}, {math_type}: compute roof {peak_flops / 1e12:,.1f} TFLOP/s, memory "
            f"roof {peak_bps / 1e12:.2f} TB/s, ridge {peak_flops / peak_bps:,.1f} FLOP/B"
        )
        figures.append(
            f'<figure class="roofline"><figcaption>{escape(title)}</figcaption>'
            f"{svg(members, peak_flops, peak_bps, ids)}</figure>"
        )
    legend = (
        '<p class="legend">One point per measurement that declared its FLOPs (its newest '
        "run): arithmetic intensity (declared FLOPs per declared byte) against achieved FLOP/s, "
        'under the device\'s roofs; <b class="failed">●</b> a failed run. Point at one for '
        "its numbers.</p>"
    )
    return f'<section id="roofline"><h2>Roofline</h2>{legend}{"".join(figures)}</section>'


def svg(
    points: Sequence[RooflinePoint],
    peak_flops_per_s: float,
    peak_bps: float,
    ids: Mapping[Any, str] | None = None,
) -> str:
    """One roofline plot: log-log axes, the two roofs and the points."""
    ridge = peak_flops_per_s / peak_bps
    low_x = _decade_below(min([ridge, *(p.roofline.intensity for p in points)]) / 4)
    high_x = _decade_above(max([ridge, *(p.roofline.intensity for p in points)]) * 4)
    low_y = _decade_below(min([low_x * peak_bps, *(p.roofline.flops_per_s for p in points)]) / 2)
    high_y = _decade_above(peak_flops_per_s * 1.5)

    def x(value: float) -> float:
        span = math.log10(high_x) - math.log10(low_x)
        return LEFT + (math.log10(value) - math.log10(low_x)) / span * (WIDTH - LEFT - RIGHT)

    def y(value: float) -> float:
        span = math.log10(high_y) - math.log10(low_y)
        fraction = (math.log10(value) - math.log10(low_y)) / span
        return HEIGHT - BOTTOM - fraction * (HEIGHT - TOP - BOTTOM)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="roofline">',
        f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" '
        f'height="{HEIGHT - TOP - BOTTOM}" fill="none" stroke="#ccc"/>',
    ]
    for value in _decades(low_x, high_x):
        at = x(value)
        bottom = HEIGHT - BOTTOM
        parts.append(_gridline((at, TOP), (at, bottom), (at, bottom + 14), "middle", _tick(value)))
    for value in _decades(low_y, high_y):
        at = y(value)
        label = _tick(value / 1e12)
        parts.append(_gridline((LEFT, at), (WIDTH - RIGHT, at), (LEFT - 4, at + 3), "end", label))
    parts.append(
        f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 8}" font-size="11" '
        'text-anchor="middle">arithmetic intensity (FLOP/byte)</text>'
        f'<text x="14" y="{(TOP + HEIGHT - BOTTOM) / 2}" font-size="11" text-anchor="middle" '
        f'transform="rotate(-90 14 {(TOP + HEIGHT - BOTTOM) / 2})">TFLOP/s</text>'
    )
    roof = [(low_x, low_x * peak_bps), (ridge, peak_flops_per_s), (high_x, peak_flops_per_s)]
    path = " ".join(f"{x(a):.1f},{y(b):.1f}" for a, b in roof)
    parts.append(
        f'<polyline class="roof" points="{path}" fill="none" stroke="{ROOF_COLOUR}" '
        'stroke-width="2"/>'
    )
    for point in sorted(points, key=lambda p: p.roofline.intensity):
        measured = point.roofline
        colour = FAILED_COLOUR if point.failed else POINT_COLOUR
        sid = (ids or {}).get(point.key, "")
        _, test_id, name, cache = point.key
        tip = (
            f"{test_id} [{name}, {cache}]: "
            f"{measured.tflops:,.1f} TFLOP/s at {measured.intensity:,.1f} FLOP/B, "
            f"{measured.roofline_efficiency:.1%} of {roof_name(measured)}"
            + (" (failed)" if point.failed else "")
        )
        parts.append(
            f'<circle class="point" data-sid="{sid}" cx="{x(measured.intensity):.1f}" '
            f'cy="{y(measured.flops_per_s):.1f}" r="4" fill="{colour}">'
            f"<title>{escape(tip)}</title></circle>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _decades(low: float, high: float) -> list[float]:
    """The powers of ten from `low` to `high` (both powers of ten themselves)."""
    return [10.0**e for e in range(round(math.log10(low)), round(math.log10(high)) + 1)]


def _gridline(
    start: tuple[float, float],
    end: tuple[float, float],
    label_at: tuple[float, float],
    anchor: str,
    label: str,
) -> str:
    """A faint grid line across the plot at one decade, and the decade's label."""
    return (
        f'<line x1="{start[0]:.1f}" y1="{start[1]:.1f}" x2="{end[0]:.1f}" y2="{end[1]:.1f}" '
        f'stroke="#eee"/><text x="{label_at[0]:.1f}" y="{label_at[1]:.1f}" font-size="10" '
        f'text-anchor="{anchor}">{label}</text>'
    )


def _decade_below(value: float) -> float:
    return 10.0 ** math.floor(math.log10(value))


def _decade_above(value: float) -> float:
    return 10.0 ** math.ceil(math.log10(value))


def _tick(value: float) -> str:
    """'0.01', '1', '1,000', '1e+06'."""
    if value >= 1e6 or value < 1e-3:
        return f"{value:.0e}"
    return f"{value:,.0f}" if value >= 1 else f"{value:g}"


def grid_cell(point: RooflinePoint | None) -> str:
    """The summary grid's addition to a measurement's latest value: ' · 612.3 TFLOP/s, 78.1% of
    the bf16 roof' ("" without declared work)."""
    if point is None:
        return ""
    measured = point.roofline
    which = measured.math if measured.bound == COMPUTE_BOUND else "memory"
    return (
        f" · {measured.tflops:,.1f} TFLOP/s, {measured.roofline_efficiency:.1%} of the {which} roof"
    )


__all__ = ["RooflinePoint", "grid_cell", "latest", "roofline_points", "section", "svg"]
