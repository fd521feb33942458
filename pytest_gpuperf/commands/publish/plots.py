"""One SVG plot per measurement and the sparkline of the summary grid, written by hand.

They were matplotlib's: 0.3 to 1.9 s a plot (tick layout, tight_layout, the SVG writer), so a
page of 1,000 measurements took 8 min 26 s (issue 45 item 16). An SVG of a few shapes is a
few string joins: axes, a grid, the gate's band, the replaced levels and one `<use>` of a
marker per point. Each group of points (the saves or the runs of one board, the failed runs,
the accepted ones) is one `<g id=...>` whose `<use>` elements are its points in order, so the
page's script finds point k of group g and shows its tooltip from the page's data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from html import escape

from pytest_gpuperf.commands.publish.series import Series
from pytest_gpuperf.record.verdict import ACCEPTED, FAIL

# Colour per board: matplotlib's default cycle (tab10), then grey for the rest.
BOARD_COLOURS = (
    "#1f77b4",
    "#2ca02c",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#7f7f7f",
)
FAILED_COLOUR, ACCEPTED_COLOUR, BAND_COLOUR = "#d62728", "#ff7f0e", "#9e9e9e"


@dataclass(frozen=True)
class Plot:
    """A series' SVG and its point groups: group id -> indices into `Series.points`."""

    svg: str
    groups: dict[str, list[int]]


def board_colours(series: Sequence[Series]) -> dict[str, str]:
    """One colour per board over the whole page, in the order boards first appear."""
    boards: list[str] = []
    for one in series:
        for point in one.points:
            if point.board not in boards:
                boards.append(point.board)
    last = len(BOARD_COLOURS) - 1
    return {board: BOARD_COLOURS[min(i, last)] for i, board in enumerate(boards)}


def parse_when(when: str) -> datetime | None:
    """An ISO 8601 time as the reports and baselines write it ('2026-11-25T08:15:23Z'), naive
    UTC; None when it is not one."""
    try:
        moment = datetime.fromisoformat(when.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
    return moment


# The plot's size in CSS pixels, and the room its axes' labels take
WIDTH_PX, HEIGHT_PX = 740, 235
LEFT_PX, RIGHT_PX, TOP_PX, BOTTOM_PX = 58, 14, 10, 26
_FONT = 'font-family="sans-serif" font-size="10" fill="#555555"'
# Marker shapes (per plot: ids are unique in the page); the group's colour fills or strokes
_MARKERS = {
    "save": '<circle id="{sid}-save" r="3.2" fill="white" stroke-width="1.2"/>',
    "run": '<circle id="{sid}-run" r="2.4"/>',
    "fail": '<path id="{sid}-fail" d="M-3.5 -3.5L3.5 3.5M-3.5 3.5L3.5 -3.5" stroke-width="2"/>',
    "accepted": '<path id="{sid}-accepted" d="M0 -4.2L4.2 0L0 4.2L-4.2 0Z"/>',
}
# Time-axis tick steps to choose from, shortest first, by how a tick at that step is labelled
_TICK_LABELS = (
    ("%H:%M", [timedelta(minutes=m) for m in (10, 30, 60)]),
    ("%m-%d %H:%M", [timedelta(hours=h) for h in (3, 6, 12)]),
    ("%m-%d", [timedelta(days=d) for d in (1, 2, 7, 14)]),
    ("%Y-%m-%d", [timedelta(days=d) for d in (30, 91, 365)]),
)
_TIME_STEPS = tuple((step, label) for label, steps in _TICK_LABELS for step in steps)


def _x_limits(xs: Sequence[datetime]) -> tuple[datetime, datetime] | None:
    """The time axis: from a little before the first point to just past the last (room for
    its marker), so it never runs on past the last run; saves seconds apart (a first
    baseline saved three times in a row) still get a readable axis."""
    if not xs:
        return None
    pad = max((max(xs) - min(xs)) * 0.02, timedelta(minutes=10))
    return min(xs) - pad, max(xs) + pad


def _nice_step(span: float, ticks: int = 5) -> float:
    raw = span / ticks if span > 0 else 1.0
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)


class _Frame:
    """Data to pixels for one plot: time on x, efficiency (%) on y."""

    def __init__(self, x0: datetime, x1: datetime, y0: float, y1: float) -> None:
        self.x0, self.x1, self.y0, self.y1 = x0, x1, y0, y1
        self.span_s = max((x1 - x0).total_seconds(), 1.0)

    def x(self, moment: datetime) -> float:
        share = (moment - self.x0).total_seconds() / self.span_s
        return LEFT_PX + share * (WIDTH_PX - LEFT_PX - RIGHT_PX)

    def y(self, value: float) -> float:
        share = (value - self.y0) / (self.y1 - self.y0)
        return HEIGHT_PX - BOTTOM_PX - share * (HEIGHT_PX - TOP_PX - BOTTOM_PX)


def _y_range(values: Sequence[float]) -> tuple[float, float]:
    low, high = min(values), max(values)
    pad = max((high - low) * 0.08, abs(high) * 0.002, 0.05)
    return low - pad, high + pad


def _y_axis(frame: _Frame) -> list[str]:
    step = _nice_step(frame.y1 - frame.y0)
    decimals = max(0, -math.floor(math.log10(step))) if step < 1 else 0
    if step * 10**decimals % 1:
        decimals += 1
    parts = []
    value = math.ceil(frame.y0 / step) * step
    while value <= frame.y1:
        y = frame.y(value)
        parts.append(
            f'<line x1="{LEFT_PX}" x2="{WIDTH_PX - RIGHT_PX}" y1="{y:.1f}" y2="{y:.1f}" '
            'stroke="#e6e6e6" stroke-width="0.7"/>'
            f'<text x="{LEFT_PX - 4}" y="{y + 3:.1f}" text-anchor="end" {_FONT}>'
            f"{value:.{decimals}f}</text>"
        )
        value += step
    middle = (TOP_PX + HEIGHT_PX - BOTTOM_PX) / 2
    parts.append(
        f'<text transform="translate(11 {middle:.0f}) rotate(-90)" text-anchor="middle" '
        f"{_FONT}>efficiency (% of peak)</text>"
    )
    return parts


def _x_axis(frame: _Frame) -> list[str]:
    """Ticks at round times inside the axis, at most about six of them."""
    span = frame.x1 - frame.x0
    step, form = next(((s, f) for s, f in _TIME_STEPS if span / s <= 6), (span / 5, "%Y-%m-%d"))
    origin = datetime(frame.x0.year, 1, 1)
    tick = origin + math.ceil((frame.x0 - origin) / step) * step
    parts = []
    base = HEIGHT_PX - BOTTOM_PX
    while tick <= frame.x1:
        x = frame.x(tick)
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{base}" y2="{base + 4}" stroke="#888888"/>'
            f'<text x="{x:.1f}" y="{base + 15}" text-anchor="middle" class="xtick" {_FONT}>'
            f"{tick.strftime(form)}</text>"
        )
        tick += step
    return parts


def series_plot(series: Series, sid: str, colours: dict[str, str]) -> Plot:
    """The plot of one measurement over time: its saves and runs (one colour per board),
    the gate's band around the stored level, the replaced levels, failures and accepted
    slowdowns marked."""
    timed = [(i, p, parse_when(p.when)) for i, p in enumerate(series.points)]
    placed = [(i, p, x) for i, p, x in timed if x is not None]
    xs = [x for _, _, x in placed]
    levels = [(parse_when(t.when), t.efficiency * 100) for t in series.trail]
    limits = _x_limits(xs + [x for x, _ in levels if x is not None])
    open_tag = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH_PX}" height="{HEIGHT_PX}" '
        f'viewBox="0 0 {WIDTH_PX} {HEIGHT_PX}">'
    )
    base = HEIGHT_PX - BOTTOM_PX
    axes = (
        f'<path d="M{LEFT_PX} {TOP_PX}V{base}H{WIDTH_PX - RIGHT_PX}" fill="none" '
        'stroke="#888888" stroke-width="0.8"/>'
    )
    if limits is None:  # a reported figure, never saved or run here
        middle = (LEFT_PX + WIDTH_PX - RIGHT_PX) / 2
        text = (
            f'<text x="{middle:.0f}" y="{HEIGHT_PX / 2:.0f}" text-anchor="middle" {_FONT}>'
            "no save and no run of it yet</text>"
        )
        return Plot(f"{open_tag}{axes}{text}</svg>", {})
    values = [p.efficiency * 100 for _, p, _ in placed] + [v for _, v in levels]
    if series.expected is not None:
        expected = series.expected * 100
        values += [expected * (1 - series.allowance), expected * (1 + series.allowance)]
    frame = _Frame(*limits, *_y_range(values))
    parts = [open_tag, "<defs>"]
    parts += [shape.format(sid=sid) for shape in _MARKERS.values()]
    parts += ["</defs>", *_y_axis(frame), axes, *_x_axis(frame)]
    parts += _levels(series, frame, levels)
    groups: dict[str, list[int]] = {}

    def group(chosen: list, marker: str, colour: str) -> None:
        gid = f"{sid}-{len(groups)}"
        paint = f'stroke="{colour}"' if marker in ("save", "fail") else f'fill="{colour}"'
        uses = "".join(
            f'<use href="#{sid}-{marker}" x="{frame.x(x):.1f}" '
            f'y="{frame.y(p.efficiency * 100):.1f}"/>'
            for _, p, x in chosen
        )
        parts.append(f'<g id="{gid}" {paint}>{uses}</g>')
        groups[gid] = [i for i, _, _ in chosen]

    for kind in ("save", "run"):
        for board, colour in colours.items():
            chosen = [(i, p, x) for i, p, x in placed if p.kind == kind and p.board == board]
            if chosen:
                group(chosen, kind, colour)
    for status, marker, colour in ((FAIL, "fail", FAILED_COLOUR), (ACCEPTED, "accepted",
                                                                    ACCEPTED_COLOUR)):  # fmt: skip
        chosen = [(i, p, x) for i, p, x in placed if p.kind == "run" and p.status == status]
        if chosen:
            group(chosen, marker, colour)
    parts.append("</svg>")
    return Plot("".join(parts), groups)


def _levels(
    series: Series, frame: _Frame, levels: Sequence[tuple[datetime | None, float]]
) -> list[str]:
    """The band around the stored level from its first kept save to the axis' end, and each
    replaced level as a dashed step up to the next level."""
    if series.expected is None:
        return []
    parts = []
    expected = series.expected * 100
    since = parse_when(series.entry_since) or frame.x1
    since = min(max(since, frame.x0), frame.x1)
    starts = [x for x, _ in levels if x is not None]
    for (start, level), stop in zip(levels, [*starts[1:], since], strict=False):
        if start is not None:
            y = frame.y(level)
            parts.append(
                f'<line x1="{frame.x(start):.1f}" x2="{frame.x(max(stop, start)):.1f}" '
                f'y1="{y:.1f}" y2="{y:.1f}" stroke="#777777" stroke-dasharray="4 3" '
                'stroke-width="0.9"/>'
            )
    low, high = (
        frame.y(expected * (1 - series.allowance)),
        frame.y(expected * (1 + series.allowance)),
    )
    left, right = frame.x(since), frame.x(frame.x1)
    parts.append(
        f'<rect x="{left:.1f}" y="{high:.1f}" width="{right - left:.1f}" '
        f'height="{low - high:.1f}" fill="{BAND_COLOUR}" fill-opacity="0.22"/>'
        f'<line x1="{left:.1f}" x2="{right:.1f}" y1="{frame.y(expected):.1f}" '
        f'y2="{frame.y(expected):.1f}" stroke="#616161" stroke-width="0.9"/>'
    )
    if series.drift is not None:
        parts.append(
            f'<text x="{right - 2:.1f}" y="{frame.y(expected) - 3:.1f}" text-anchor="end" '
            f'font-family="sans-serif" font-size="9" fill="{FAILED_COLOUR}">'
            f"{escape(f'drift {series.drift.change:+.2%}')}</text>"
        )
    return parts


def sparkline(series: Series, width_px: int = 110, height_px: int = 22, last: int = 40) -> str:
    """A small SVG of the latest `last` points over the band, for the summary grid."""
    points = [p.efficiency * 100 for p in series.points[-last:]]
    if not points:
        return ""
    values = list(points)
    if series.expected is not None:
        expected = series.expected * 100
        values += [expected * (1 - series.allowance), expected * (1 + series.allowance)]
    low, high = min(values), max(values)
    if high - low < 1e-9:
        low, high = low - 0.5, high + 0.5

    def y(value: float) -> float:
        return 2 + (high - value) / (high - low) * (height_px - 4)

    def x(k: int) -> float:
        return 3 + k * (width_px - 6) / max(len(points) - 1, 1)

    parts = [
        f'<svg class="spark" xmlns="http://www.w3.org/2000/svg" width="{width_px}" '
        f'height="{height_px}" viewBox="0 0 {width_px} {height_px}">'
    ]
    if series.expected is not None:
        top = y(series.expected * 100 * (1 + series.allowance))
        bottom = y(series.expected * 100 * (1 - series.allowance))
        parts.append(
            f'<rect x="0" y="{top:.1f}" width="{width_px}" height="{bottom - top:.1f}" '
            f'fill="{BAND_COLOUR}" fill-opacity="0.3"/>'
        )
    line = " ".join(f"{x(k):.1f},{y(v):.1f}" for k, v in enumerate(points))
    parts.append(f'<polyline points="{line}" fill="none" stroke="#1f77b4" stroke-width="1.1"/>')
    last_colour = FAILED_COLOUR if series.points[-1].status == FAIL else "#1f77b4"
    parts.append(
        f'<circle cx="{x(len(points) - 1):.1f}" cy="{y(points[-1]):.1f}" r="2" '
        f'fill="{last_colour}"/></svg>'
    )
    return "".join(parts)
