"""One SVG plot per measurement, drawn by matplotlib (the `plot` extra), and the sparkline of
the summary grid.

Each group of points (the saves or the runs of one board, the failed runs, the accepted ones)
is one scatter collection whose SVG group gets an id (`set_gid`): matplotlib writes its points
in order as `<use>` elements, so the page's script finds point k of group g and shows its
tooltip from the page's data, without an SVG element per point. The SVG is trimmed (no
metadata, coordinates to 0.1 pt, no indentation) before it goes into the page.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from pytest_gpuperf.publish.series import Series
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


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as missing:
        from pytest_gpuperf.errors import ConfigError

        raise ConfigError(
            f"the dashboard's plots need matplotlib ({missing}): pip install 'pytest-gpuperf[plot]'"
        ) from None
    return plt


def series_plot(series: Series, sid: str, colours: dict[str, str]) -> Plot:
    """The plot of one measurement over time: its saves and runs (one colour per board),
    the gate's band around the stored level, the replaced levels, failures and accepted
    slowdowns marked."""
    plt = _pyplot()
    timed = [(i, p, parse_when(p.when)) for i, p in enumerate(series.points)]
    placed = [(i, p, x) for i, p, x in timed if x is not None]
    with plt.rc_context(_STYLE):
        figure, axis = plt.subplots(figsize=(7.4, 2.35))
        groups: dict[str, list[int]] = {}
        xs = [x for _, _, x in placed]
        levels = [parse_when(level.when) for level in series.trail]
        limits = _x_limits(xs + [x for x in levels if x is not None])
        if limits is not None:
            axis.set_xlim(*limits)
            _draw_levels(axis, series, limits[1])
            _date_axis(axis)
        else:  # a reported figure, never saved or run here
            axis.set_xticks([])
            if series.expected is not None:
                axis.axhline(series.expected * 100, color="#616161", linewidth=0.9)
            axis.text(
                0.5,
                0.5,
                "no save and no run of it yet",
                transform=axis.transAxes,
                ha="center",
                color="#5f6b7a",
            )
        for kind, marker in (("save", "o"), ("run", ".")):
            for board, colour in colours.items():
                chosen = [(i, p, x) for i, p, x in placed if p.kind == kind and p.board == board]
                if chosen:
                    gid = f"{sid}-{len(groups)}"
                    _scatter(axis, chosen, gid, marker, colour, kind == "save")
                    groups[gid] = [i for i, _, _ in chosen]
        for status, marker, colour in (
            (FAIL, "X", FAILED_COLOUR),
            (ACCEPTED, "D", ACCEPTED_COLOUR),
        ):
            chosen = [(i, p, x) for i, p, x in placed if p.kind == "run" and p.status == status]
            if chosen:
                gid = f"{sid}-{len(groups)}"
                _scatter(axis, chosen, gid, marker, colour, False, size=34)
                groups[gid] = [i for i, _, _ in chosen]
        axis.set_ylabel("efficiency (% of peak)")
        axis.grid(axis="y", color="#e6e6e6", linewidth=0.6)
        axis.spines[["top", "right"]].set_visible(False)
        figure.tight_layout(pad=0.9)  # room for a browser font wider than matplotlib's
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
        plt.close(figure)
    return Plot(trim_svg(buffer.getvalue()), groups)


_STYLE = {
    "svg.fonttype": "none",  # text as text: a tenth of the size of glyphs as paths
    "svg.hashsalt": "gpuperf",  # the same ids from the same input: reproducible pages
    "font.size": 7.5,
    "font.family": "sans-serif",
    "axes.edgecolor": "#888888",
    "xtick.color": "#555555",
    "ytick.color": "#555555",
}


def _scatter(axis, chosen, gid: str, marker: str, colour: str, hollow: bool, size: float = 16):
    xs = [x for _, _, x in chosen]
    ys = [p.efficiency * 100 for _, p, _ in chosen]
    if hollow:
        collection = axis.scatter(
            xs,
            ys,
            s=size,
            marker=marker,
            facecolors="white",
            edgecolors=colour,
            linewidths=1.0,
            zorder=3,
        )
    else:
        collection = axis.scatter(
            xs, ys, s=size, marker=marker, color=colour, linewidths=0, zorder=4
        )
    collection.set_gid(gid)


def _draw_levels(axis, series: Series, end: datetime) -> None:
    """The band around the stored level from its first kept save to the right edge (`end`),
    and each replaced level as a dashed step up to the next level."""
    if series.expected is None:
        return
    expected = series.expected * 100
    levels = [(parse_when(t.when), t.efficiency * 100) for t in series.trail]
    since = parse_when(series.entry_since) or end
    starts = [x for x, _ in levels if x is not None]
    for (start, level), stop in zip(levels, [*starts[1:], since], strict=False):
        if start is not None:
            axis.hlines(
                level,
                start,
                max(stop, start),
                colors="#777777",
                linestyles="--",
                linewidth=0.9,
                zorder=2,
            )
    low, high = expected * (1 - series.allowance), expected * (1 + series.allowance)
    right = max(end, since)
    axis.fill_between(
        [since, right], low, high, color=BAND_COLOUR, alpha=0.22, linewidth=0, zorder=1
    )
    axis.hlines(expected, since, right, colors="#616161", linewidth=0.9, zorder=2)
    if series.drift is not None:
        axis.annotate(
            f"drift {series.drift.change:+.2%}",
            (right, expected),
            fontsize=7,
            color=FAILED_COLOUR,
            ha="right",
            va="bottom",
        )


def _x_limits(xs: Sequence[datetime]) -> tuple[datetime, datetime] | None:
    """The time axis, padded so that saves seconds apart (a first baseline saved three times
    in a row) still get a readable axis, and the band shows right of the last point."""
    if not xs:
        return None
    pad = max((max(xs) - min(xs)) * 0.04, timedelta(minutes=20))
    return min(xs) - pad, max(xs) + pad


def _date_axis(axis) -> None:
    import matplotlib.dates as mdates

    locator = mdates.AutoDateLocator(minticks=3, maxticks=7)
    axis.xaxis.set_major_locator(locator)
    axis.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))


_LONG_NUMBER = re.compile(r"(-?\d+\.\d)\d+")
_ATTRIBUTE = re.compile(r'(?<=[ \n])(d|x|y|x1|x2|y1|y2|width|height|transform|viewBox)="([^"]*)"')
_BETWEEN_TAGS = re.compile(r">\s+<")
_METADATA = re.compile(r"<metadata>.*?</metadata>", re.S)
_PROLOGUE = re.compile(r"^<\?xml[^>]*>\s*<!DOCTYPE[^>]*>\s*", re.S)


def _rounded(match: re.Match[str]) -> str:
    value = _LONG_NUMBER.sub(r"\1", match.group(2))
    return f'{match.group(1)}="{value}"'


def trim_svg(svg: str) -> str:
    """matplotlib's SVG without what an inlined figure does not need: the XML prologue and
    doctype, the metadata, six decimals (0.1 pt is below a screen pixel) and indentation."""
    svg = _PROLOGUE.sub("", svg)
    svg = _METADATA.sub("", svg)
    # numbers in the geometry only: a tick label's text ("80.75") is shown as written
    svg = _ATTRIBUTE.sub(_rounded, svg)
    svg = re.sub(r"\s*\n\s*", " ", svg)
    return _BETWEEN_TAGS.sub("><", svg).strip()


def sparkline(series: Series, width_px: int = 110, height_px: int = 22, last: int = 40) -> str:
    """A small SVG of the latest `last` points over the band, for the summary grid (matplotlib
    too: 1.6 KB a row once trimmed)."""
    points = [p.efficiency * 100 for p in series.points[-last:]]
    if not points:
        return ""
    plt = _pyplot()
    dpi = 72  # one point a pixel: the SVG's size in points is the cell's in pixels
    with plt.rc_context(_STYLE):
        figure = plt.figure(figsize=(width_px / dpi, height_px / dpi), dpi=dpi)
        axis = figure.add_axes((0.02, 0.1, 0.96, 0.8))
        axis.axis("off")
        if series.expected is not None:
            expected = series.expected * 100
            axis.axhspan(
                expected * (1 - series.allowance),
                expected * (1 + series.allowance),
                color=BAND_COLOUR,
                alpha=0.3,
                linewidth=0,
            )
        axis.plot(range(len(points)), points, color="#1f77b4", linewidth=1.1)
        last_colour = FAILED_COLOUR if series.points[-1].status == FAIL else "#1f77b4"
        axis.plot([len(points) - 1], [points[-1]], "o", color=last_colour, markersize=3)
        axis.set_xlim(-0.5, max(len(points) - 0.5, 0.5))
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
        plt.close(figure)
    return trim_svg(buffer.getvalue()).replace("<svg ", '<svg class="spark" ', 1)
