"""The dashboard's words and its cost at scale (issue 45 items 15 and 16): board ids cut
between their parts, a "no matches" line for a filter, an older regressed streak of a case now
accepted found by "regressed", a time axis that ends at the last run, plots drawn without
matplotlib, and progress on stderr while a long publish runs. The page in a real browser:
tests/browser/test_dashboard_in_chromium.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import datetime, timedelta
from html import unescape
from pathlib import Path

import pytest

from pytest_gpuperf.commands.publish import __main__ as publish_cli
from pytest_gpuperf.commands.publish.page import _board
from pytest_gpuperf.commands.publish.plots import LEFT_PX, RIGHT_PX, WIDTH_PX
from tests.dashboard_history import make_history

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> tuple[Path, list[Path]]:
    """6 measurements over 20 runs; k003's run 18 failed (no acceptance) before its run 19
    was accepted: an older regressed streak of a case whose state is now "accepted"."""
    baseline, reports = make_history(tmp_path_factory.mktemp("h"), measurements=6, runs=20)
    document = json.loads(reports[18].read_text())
    for result in document["results"]:
        if result["measurement"]["name"] == "k003":
            result["verdict"]["status"] = "fail"
            result["verdict"]["acceptance"] = None
    reports[18].write_text(json.dumps(document))
    return baseline, reports


@pytest.fixture(scope="module")
def page(history, tmp_path_factory) -> str:
    baseline, reports = history
    out = tmp_path_factory.mktemp("page") / "dashboard.html"
    assert publish_cli.main([str(baseline), *map(str, reports), "-o", str(out)]) == 0
    return out.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("board", "shown"),
    [
        ("SIM-GPU-0a1b2c3d", "SIM-GPU-0a1b2c3d"),  # was "SIM-GPU-0a1b2"
        ("GPU-29abafc0-1f2e-4d5c-9b8a-7f6e5d4c3b2a", "GPU-29abafc0…"),
        ("", "unrecorded"),
    ],
)
def test_a_board_id_is_cut_between_its_parts(board, shown):
    assert _board(board) == shown


def test_the_page_has_a_no_matches_line_for_the_filter(page):
    assert '<p class="note" id="no-match" hidden>No measurement matches the filter.</p>' in page
    script = (REPO / "pytest_gpuperf" / "commands" / "publish" / "page.js").read_text()
    assert 'getElementById("no-match").hidden' in script


def test_an_older_regressed_streak_of_an_accepted_case_is_found_by_regressed(page):
    rows = re.findall(r'<tr data-search="([^"]*)"><td class="when">[^<]*</td><td><span '
                      r'class="state s-(\w+)">', page)  # fmt: skip
    k003 = [(unescape(search), state) for search, state in rows if "k003" in search]
    assert sorted(state for _, state in k003) == ["accepted", "regressed"], k003
    regressed = next(search for search, state in k003 if state == "regressed")
    assert "regressed" in regressed.split()  # the filter "regressed" shows the row
    section = re.search(r'<section class="plot" id="plot-m3" data-search="([^"]*)"', page)
    assert section is not None and "regressed" in unescape(section.group(1)).split()


def test_the_time_axis_ends_at_the_last_run(history, tmp_path):
    """The axis ran 4% past the last point (matplotlib's limits); it ends a marker's room
    after it, and no time tick lies beyond the last run."""
    from pytest_gpuperf.commands.publish.plots import series_plot
    from pytest_gpuperf.commands.publish.series import gather
    from pytest_gpuperf.record.report_reader import read_report

    baseline, reports = history
    dashboard = gather([baseline], [read_report(p) for p in reports])
    colours = {p.board: "#000" for p in dashboard.series[0].points}
    plot = series_plot(dashboard.series[0], "m0", colours)
    xs = [float(x) for x in re.findall(r'<use href="#m0-\w+" x="([\d.]+)"', plot.svg)]
    right = WIDTH_PX - RIGHT_PX
    assert len(xs) == 23 and max(xs) <= right
    assert right - max(xs) < 0.025 * (right - LEFT_PX), (max(xs), right)
    ticks = [float(x) for x in re.findall(r'<text x="([\d.]+)"[^>]*class="xtick"', plot.svg)]
    assert ticks and max(ticks) <= max(xs) + 1


def test_the_page_is_drawn_without_matplotlib(history, tmp_path):
    baseline, reports = history
    out = tmp_path / "page.html"
    code = (
        "import sys; from pytest_gpuperf.commands.publish.__main__ import main; "
        f"assert main([{str(baseline)!r}, *{[str(p) for p in reports]!r}, '-o', {str(out)!r}])"
        " == 0; print('matplotlib' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert done.stdout.splitlines()[-1] == "False"


def test_a_long_publish_says_how_far_it_got(history, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(publish_cli, "PROGRESS_EVERY_S", 0.0)
    baseline, reports = history
    assert (
        publish_cli.main([str(baseline), *map(str, reports), "-o", str(tmp_path / "p.html")]) == 0
    )
    err = capsys.readouterr().err.splitlines()
    assert f"{publish_cli.PROG}: 5 of 20 reports read" in err
    assert f"{publish_cli.PROG}: 3 of 6 measurements plotted" in err


def test_a_replaced_level_of_one_save_says_one_save(history):
    """Issue 45 item 15: "1 saves"."""
    from dataclasses import replace

    from pytest_gpuperf.baseline.ref import TrailPoint
    from pytest_gpuperf.commands.publish.page import _caption
    from pytest_gpuperf.commands.publish.series import gather
    from pytest_gpuperf.record.report_reader import read_report

    baseline, reports = history
    series = gather([baseline], [read_report(reports[0])]).series[0]
    one = replace(series, trail=(TrailPoint(0.8, 0.01, 1, "c" * 40, "2026-01-01T00:00:00Z"),))
    assert "(±1.00%, 1 save), commit cccccccccccc" in _caption(one)


@pytest.mark.parametrize(
    ("span", "labels"),
    [
        (timedelta(hours=2), ["10:30", "11:00", "11:30", "12:00"]),  # 30-minute steps
        # 12-hour steps
        (timedelta(days=2), ["03-01 12:00", "03-02 00:00", "03-02 12:00", "03-03 00:00"]),
        (timedelta(days=10), ["03-03", "03-05", "03-07", "03-09", "03-11"]),  # 2-day steps
        # 91-day steps
        (
            timedelta(days=400),
            ["2024-04-01", "2024-07-01", "2024-09-30", "2024-12-30", "2025-03-31"],
        ),
    ],
)
def test_time_ticks_step_by_the_span_and_are_labelled_for_their_step(span, labels):
    """At most about six round ticks: the shortest step that gives them, labelled by the time
    of day (hourly and shorter), day and time (up to 12 hours) or the date."""
    from pytest_gpuperf.commands.publish.plots import _Frame, _x_axis

    start = datetime(2024, 3, 1, 10, 20)
    ticks = [
        unescape(found)
        for found in re.findall(
            r'class="xtick"[^>]*>([^<]*)<', "".join(_x_axis(_Frame(start, start + span, 0.0, 1.0)))
        )
    ]
    assert ticks == labels


def test_a_run_below_the_band_that_its_second_round_did_not_confirm_is_not_ok(history, tmp_path):
    """The newest run of k001 fell below its "fails below" line in its first round and its
    second round did not confirm it (the test passed): the grid said "ok" under a plot whose
    last point lay below the line."""
    from pytest_gpuperf.commands.publish.series import gather
    from pytest_gpuperf.record.report_reader import read_report

    baseline, reports = history
    document = json.loads(reports[-1].read_text())
    (result,) = [r for r in document["results"] if r["measurement"]["name"] == "k001"]
    check = result["verdict"]["baseline"]
    second = dict(check, delta=-0.004, outcome="within-noise")
    check.update(
        outcome="within-noise",
        first_outcome="regressed",
        delta=-(check["allowance"] + 0.02),
        confirmation=second,
    )
    changed = tmp_path / "newest.json"
    changed.write_text(json.dumps(document))
    inputs = [*reports[:-1], changed]
    dashboard = gather([baseline], [read_report(p) for p in inputs])
    k001 = next(s for s in dashboard.series if s.name == "k001")
    assert k001.state == "not confirmed"
    out = tmp_path / "page.html"
    assert publish_cli.main([str(baseline), *map(str, inputs), "-o", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert '<span class="state s-not-confirmed">not confirmed</span>' in page
    assert "1 run below the band in a first round that the second round did not confirm" in page
