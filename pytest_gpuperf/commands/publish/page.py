"""The dashboard as one HTML file: the summary grid, the regressions, the bisect result, one
plot per measurement and the runs, with its styles, script and data inside it.

Nothing is fetched: the page opens from the file system (a CI artifact) as well as from a web
server. The plots and the tooltips travel as one gzip stream in base64 that the page unpacks
with the browser's own DecompressionStream: a plot of 100 runs is several kilobytes of SVG,
which packs to a fraction (docs/benchmarks.md, "The dashboard"; its figures were taken with
the matplotlib plots these replaced, issue 45 item 16).
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Callable, Mapping, Sequence
from html import escape
from importlib import resources
from typing import Any

from pytest_gpuperf.commands.publish import roofline
from pytest_gpuperf.commands.publish.plots import board_colours, series_plot, sparkline
from pytest_gpuperf.commands.publish.series import STATES, Dashboard, Run, Series, regressions
from pytest_gpuperf.record.history_model import Point
from pytest_gpuperf.record.plural import counted
from pytest_gpuperf.record.verdict import ACCEPTED, FAIL
from pytest_gpuperf.report.band_words import band_text
from pytest_gpuperf.report.text import drift_text


def render(
    dashboard: Dashboard,
    *,
    bisect: Mapping[str, Any] | None = None,
    created: str = "",
    title: str = "pytest-gpuperf dashboard",
    progress: Callable[[str, int, int], None] | None = None,
) -> str:
    """The whole page; `progress(what, done, total)` is told of each plot drawn."""
    colours = board_colours(dashboard.series)
    ids = {series.key: f"m{i}" for i, series in enumerate(dashboard.series)}
    plots: dict[str, str] = {}
    tips: dict[str, list[str]] = {}
    for number, series in enumerate(dashboard.series):
        if progress is not None:
            progress("measurements plotted", number, len(dashboard.series))
        sid = ids[series.key]
        plot = series_plot(series, sid, colours)
        plots[sid] = plot.svg
        for gid, indices in plot.groups.items():
            tips[gid] = [_tip(series.points[i], dashboard.runs) for i in indices]
    packed = _pack({"plots": plots, "tips": tips})
    body = "".join(
        [
            _header(dashboard, colours, created, title),
            _regressions(dashboard, ids),
            _bisect(bisect) if bisect is not None else "",
            _grid(dashboard, ids),
            roofline.section(dashboard.roofline, ids),  # "" where no run declared work
            _plots(dashboard, ids),
            _runs(dashboard.runs),
        ]
    )
    asset = resources.files("pytest_gpuperf.commands.publish")
    style = asset.joinpath("page.css").read_text(encoding="utf-8")
    script = asset.joinpath("page.js").read_text(encoding="utf-8")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f"<title>{escape(title)}</title><style>{style}</style></head>"
        f'<body data-ready="no">{body}'
        '<div id="tip" role="tooltip" hidden></div>'
        f'<script type="application/octet-stream" id="gpuperf-data">{packed}</script>'
        f"<script>{script}</script></body></html>\n"
    )


def _pack(data: Mapping[str, Any]) -> str:
    raw = json.dumps(data, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    return base64.b64encode(gzip.compress(raw, compresslevel=9, mtime=0)).decode("ascii")


def _header(dashboard: Dashboard, colours: Mapping[str, str], created: str, title: str) -> str:
    counts = {state: 0 for state in STATES}
    for series in dashboard.series:
        counts[series.state] += 1
    badges = " ".join(
        f'<span class="state s-{_cls(state)}">{counts[state]} {escape(state)}</span>'
        for state in STATES
        if counts[state]
    )
    boards = " ".join(
        f'<span class="board"><i style="background:{colour}"></i>{escape(_board(board))}</span>'
        for board, colour in colours.items()
    )
    simulated = any(series.simulated for series in dashboard.series)
    warning = (
        '<p class="simulated">Simulated device: the simulated numbers are not measurements.</p>'
        if simulated
        else ""
    )
    inputs = ", ".join(escape(path) for path in dashboard.baseline_files) or "no baseline file"
    return (
        f"<header><h1>{escape(title)}</h1>"
        f'<p class="meta">{counted(len(dashboard.series), "measurement")}, '
        f"{counted(len(dashboard.runs), 'run')}; "
        f"baselines: {inputs}; written {escape(created)}</p>{warning}"
        f'<p class="counts">{badges}</p>'
        f'<p class="boards">boards: {boards or "none recorded"}</p>'
        '<input id="search" type="search" placeholder="filter: test, measurement, device, '
        'state" autocomplete="off" aria-label="filter the measurements">'
        '<p class="note" id="no-match" hidden>No measurement matches the filter.</p>'
        '<p class="note" id="unpack-note">unpacking the plots…</p></header>'
    )


def _grid(dashboard: Dashboard, ids: Mapping[Any, str]) -> str:
    rows = []
    by_file: dict[str, list[Series]] = {}
    for series in dashboard.series:
        by_file.setdefault(series.test_file, []).append(series)
    work = roofline.latest(dashboard.roofline)
    for test_file, members in by_file.items():
        rows.append(
            f'<tbody class="group"><tr class="file"><th colspan="7">{escape(test_file)}</th></tr>'
        )
        for series in members:
            rows.append(_grid_row(series, ids[series.key], work.get(series.key)))
        rows.append("</tbody>")
    return (
        '<section id="summary"><h2>Summary</h2><table class="grid"><thead><tr>'
        "<th>test</th><th>measurement</th><th>device</th><th>latest</th>"
        "<th>band (fails below)</th><th>state</th><th>trend</th></tr></thead>"
        f"{''.join(rows)}</table></section>"
    )


def _grid_row(series: Series, sid: str, work: roofline.RooflinePoint | None = None) -> str:
    latest = series.latest
    latest_text = f"{latest.efficiency:.2%}" if latest else "–"
    latest_text += roofline.grid_cell(work)  # TFLOP/s and the roof, where work was declared
    if series.expected is not None:
        floor = series.expected * (1 - series.allowance)
        band = f"{series.expected:.2%} ±{series.allowance:.2%} ({floor:.2%})"
    else:
        band = "no baseline"
    test = series.test_id.split("::", 1)[-1]
    return (
        f'<tr class="m" data-search="{escape(_search_text(series))}" data-sid="{sid}">'
        f'<td><a href="#plot-{sid}">{escape(test)}</a></td>'
        f"<td>{escape(series.name)} <small>{escape(series.cache)}</small></td>"
        f"<td>{escape(series.device_key)}</td><td class='num'>{latest_text}</td>"
        f"<td class='num'>{band}</td>"
        f'<td><span class="state s-{_cls(series.state)}">{escape(series.state)}</span></td>'
        f"<td>{sparkline(series)}</td></tr>"
    )


def _search_text(series: Series) -> str:
    return " ".join(
        [series.test_id, series.name, series.cache, series.device_key, series.state]
    ).lower()


def _regressions(dashboard: Dashboard, ids: Mapping[Any, str]) -> str:
    found = regressions(dashboard)
    if not found:
        return (
            '<section id="regressions"><h2>Regressions</h2>'
            "<p>No run failed or was accepted, and no entry drifted.</p></section>"
        )
    rows = []
    for episode in found:
        series = episode.series
        sid = ids[series.key]
        # the row's own state too: an older regressed streak of a case now accepted is
        # found by "regressed", which the series' state alone ("accepted") hid
        search = f"{_search_text(series)} {episode.state}"
        head = (
            f'<tr data-search="{escape(search)}">'
            f'<td class="when">{escape(_short(episode.when))}</td>'
            f'<td><span class="state s-{episode.state}">{episode.state}</span></td>'
            f'<td><a href="#plot-{sid}">{escape(series.test_id)}</a><br><small>'
            f"{escape(series.name)}, {escape(series.cache)}, {escape(series.device_key)}"
            "</small></td>"
        )
        point, first = episode.last, episode.first
        if point is None or first is None:
            assert series.drift is not None
            rows.append(
                f"{head}<td class='num'>{series.drift.change:+.2%}</td>"
                f"<td>{escape(drift_text(series.drift))}</td></tr>"
            )
            continue
        delta = f"{point.delta:+.2%}" if point.delta is not None else "–"
        allowed = f"allowed −{point.allowance:.2%}" if point.allowance is not None else ""
        if episode.runs == 1:
            streak = "the latest run" if point is series.latest_run else "one run"
        else:
            streak = (
                f"{episode.runs} runs in a row since {_short(first.when)} "
                f"(commit {first.commit[:12]})"
            )
        checks = ", ".join(point.checks) or point.outcome
        verb = "accepted" if episode.state == "accepted" else "failed"
        what = f"{verb} ({checks}) in {streak}"
        if point.reason:
            what += f": {point.reason}"
        rows.append(
            f"{head}<td class='num'>{delta}<br><small>{allowed}</small></td>"
            f"<td>{escape(what)}; last commit <code>{escape(point.commit[:12])}</code></td></tr>"
        )
    return (
        '<section id="regressions"><h2>Regressions <small>newest first</small></h2>'
        '<table class="list"><thead><tr><th>when</th><th>state</th><th>measurement</th>'
        "<th>change</th><th>what</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></section>"
    )


def _short(when: str) -> str:
    """'2026-11-25 08:15' from '2026-11-25T08:15:23Z'."""
    return when[:16].replace("T", " ") if len(when) >= 16 else when


def _bisect(document: Mapping[str, Any]) -> str:
    culprit = document.get("culprit") or {}
    good, bad = document.get("good") or {}, document.get("bad") or {}
    probes = []
    for probe in document.get("probes", ()):
        ratio = probe.get("ratio")
        ci = probe.get("ratio_ci") or []
        interval = f" ({ci[0]:.4f}–{ci[1]:.4f})" if len(ci) == 2 else ""
        probes.append(
            f"<tr><td><code>{escape(str(probe.get('sha', ''))[:12])}</code></td>"
            f"<td>{escape(str(probe.get('subject', '')))}</td>"
            f"<td class='num'>{f'{ratio:.4f}' if isinstance(ratio, float) else '–'}{interval}</td>"
            f"<td>{escape(str(probe.get('state', '')))}</td></tr>"
        )
    line = str(document.get("culprit_line", ""))
    sha = str(culprit.get("sha", ""))
    return (
        '<section id="bisect"><h2>Bisect</h2>'
        f'<p class="culprit">{escape(line)}</p>'
        f"<p>followed <code>{escape(str(document.get('followed', '')))}</code> from good "
        f"<code>{escape(str(good.get('sha', ''))[:12])}</code> to bad "
        f"<code>{escape(str(bad.get('sha', ''))[:12])}</code>"
        f"{f'; culprit <code>{escape(sha[:12])}</code>' if sha else ''}</p>"
        '<table class="list"><thead><tr><th>commit</th><th>subject</th>'
        "<th>ratio to good (95% CI)</th><th>state</th></tr></thead>"
        f"<tbody>{''.join(probes)}</tbody></table></section>"
    )


def _plots(dashboard: Dashboard, ids: Mapping[Any, str]) -> str:
    sections = []
    episodes: dict[Any, set[str]] = {}
    for episode in regressions(dashboard):  # a row the filter shows keeps its plot shown
        episodes.setdefault(episode.series.key, set()).add(episode.state)
    for series in dashboard.series:
        sid = ids[series.key]
        search = " ".join([_search_text(series), *sorted(episodes.get(series.key, ()))])
        sections.append(
            f'<section class="plot" id="plot-{sid}" data-search="'
            f'{escape(search)}">'
            f"<h3>{escape(series.test_id)} <small>{escape(series.name)}, {escape(series.cache)},"
            f" {escape(series.device_key)}</small> "
            f'<span class="state s-{_cls(series.state)}">{escape(series.state)}</span></h3>'
            f'<div class="svg" data-sid="{sid}"></div>{_caption(series)}</section>'
        )
    legend = (
        '<p class="legend">○ a save of the stored baseline, ● a run (colour: its board), '
        '<b class="failed">✕</b> a failed run, <b class="accepted">◆</b> an accepted slowdown; '
        "grey band: the level ± the allowance the gate computes for the entry (below it a run "
        "fails), dashed: the baselines it replaced. Point at a mark for its commit, date and "
        "run.</p>"
    )
    return f'<section id="plots"><h2>Measurements</h2>{legend}{"".join(sections)}</section>'


def _caption(series: Series) -> str:
    lines = []
    if series.band is not None and series.expected is not None:
        lines.append(
            f"expected {series.expected:.2%}, fails below "
            f"{series.expected * (1 - series.allowance):.2%} (allowance "
            f"{series.allowance:.2%} at a one-sided {series.false_alarm_rate:.2%} false-alarm "
            f"rate, tolerance {series.tolerance:.2%}); noise {series.band.noise:.2%}: "
            f"{band_text(series.band)}"
        )
    else:
        lines.append("no stored baseline for this measurement on this device")
    for level in series.trail:
        lines.append(
            f"replaced level {level.efficiency:.2%} (±{level.run_spread:.2%}, "
            f"{counted(level.saves, 'save')}), commit {level.commit[:12]} {level.when}"
        )
    if series.drift is not None:
        lines.append(drift_text(series.drift))
    unconfirmed = [p for p in series.points if p.kind == "run" and p.unconfirmed]
    if unconfirmed:
        last = unconfirmed[-1]
        lines.append(
            f"{counted(len(unconfirmed), 'run')} below the band in a first round that the "
            f"second round did not confirm (the test passed), the last {_short(last.when)}, "
            f"commit {last.commit[:12]}"
        )
    accepted: dict[str, list[Point]] = {}
    for point in series.points:
        if point.status == ACCEPTED:
            accepted.setdefault(point.reason, []).append(point)
    for reason, points in accepted.items():
        runs = f"{len(points)} run{'s' if len(points) != 1 else ''}"
        span = _short(points[0].when)
        if len(points) > 1:
            span = f"from {span} to {_short(points[-1].when)}"
        lines.append(
            f"accepted slowdown in {runs} ({span}, last commit {points[-1].commit[:12]}): {reason}"
        )
    items = "".join(f"<li>{escape(line)}</li>" for line in lines)
    return f'<ul class="caption">{items}</ul>'


def _runs(runs: Sequence[Run]) -> str:
    rows = "".join(
        f"<tr><td class='num'>{run.index + 1}</td><td>{escape(run.name)}</td>"
        f"<td>{escape(run.created)}</td><td><code>{escape(run.commit[:12])}</code></td>"
        f"<td>{escape(run.branch)}</td><td>{'merged shards' if run.merged else ''}</td></tr>"
        for run in runs
    )
    return (
        '<section id="runs"><h2>Runs</h2><table class="list"><thead><tr><th>#</th>'
        "<th>report</th><th>written</th><th>commit</th><th>branch</th><th></th></tr></thead>"
        f"<tbody>{rows}</tbody></table></section>"
    )


def _tip(point: Point, runs: Sequence[Run]) -> str:
    """The tooltip of one point: what it is, its commit, date and run, the numbers."""
    interval = f"{point.efficiency:.2%} (95% CI {point.low:.2%}–{point.high:.2%})"
    lines = []
    if point.kind == "save":
        lines.append(f"save of the baseline, {point.when}")
    else:
        run = runs[point.run]
        lines.append(f"{run.name} (run {run.index + 1} of {len(runs)}), {point.when}")
    lines.append(f"commit {point.commit[:12] or 'unrecorded'}")
    lines.append(interval)
    if point.kind == "run":
        verdict = point.status
        if point.delta is not None and point.allowance is not None:
            verdict += f"; {point.delta:+.2%} against the baseline, allowed −{point.allowance:.2%}"
        if point.status == FAIL and point.checks:
            verdict += f"; failed: {', '.join(point.checks)}"
        lines.append(verdict)
        if point.unconfirmed:
            second = f" ({point.second_delta:+.2%})" if point.second_delta is not None else ""
            lines.append(
                "below the band in its first round; measured again, its second round"
                f"{second} was not: not confirmed, the test passed"
            )
        if point.reason:
            lines.append(f"accepted: {point.reason}")
    lines.append(f"board {_board(point.board)}")
    return "\n".join(lines)


def _board(board: str) -> str:
    """A board's id short enough for a legend, cut between its parts ('GPU-29abafc0' of an
    NVIDIA UUID), never inside one: `board[:13]` made 'SIM-GPU-0a1b2' of 'SIM-GPU-0a1b2c3d'."""
    if not board:
        return "unrecorded"
    if len(board) <= 20:
        return board
    parts = board.split("-")
    shown = parts[0]
    for part in parts[1:]:
        if len(shown) >= 12:
            break
        shown += f"-{part}"
    return shown if shown == board else f"{shown}…"


def _cls(state: str) -> str:
    return state.replace(" ", "-")
