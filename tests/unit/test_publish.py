"""`gpuperf publish`: the page from the shipped H100 baselines and from a
generated history made by the plugin's own code (tests/dashboard_history.py), the states and the
band as the gate computes them, and every bad input as one line, exit 2, nothing written.
The page in a real browser: tests/browser/test_dashboard_in_chromium.py."""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gpuperf.baseline import BaselineStore
from pytest_gpuperf.commands.publish.__main__ import main
from pytest_gpuperf.commands.publish.series import gather, regressions
from pytest_gpuperf.gate.noise import stored_band
from pytest_gpuperf.record.report_reader import read_report
from pytest_gpuperf.simulate.device_model import DEFAULT_GPU_SPREAD
from tests.dashboard_history import BOARDS, DEVICE_KEY, make_history

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "baselines" / "h100-sxm.toml"
PROG = "gpuperf publish: error: "


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> tuple[Path, list[Path]]:
    """12 measurements over 20 nightly runs: two regress 5% in the last two runs (one of them
    accepted), one drifts across replaced baselines."""
    return make_history(tmp_path_factory.mktemp("history"), measurements=12, runs=20)


def unpacked(page: Path) -> dict:
    """The plots and tooltips the page carries packed."""
    text = page.read_text(encoding="utf-8")
    blob = re.search(r'id="gpuperf-data">([^<]*)<', text)
    assert blob is not None
    return json.loads(gzip.decompress(base64.b64decode(blob.group(1))))


def one_line_exit_2(capsys, code: int, *words: str) -> str:
    out = capsys.readouterr()
    assert code == 2, out
    lines = out.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(PROG), out.err
    assert "Traceback" not in out.err and out.out == ""
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def test_the_page_of_the_shipped_h100_baselines(tmp_path, capsys):
    page = tmp_path / "h100.html"

    assert main([str(SHIPPED), "-o", str(page)]) == 0

    assert f"written: {page}" in capsys.readouterr().out
    text = page.read_text(encoding="utf-8")
    store = BaselineStore(SHIPPED.parent)
    entries = store.load("h100-sxm").entries
    assert text.count('<section class="plot"') == len(entries) == 19
    assert text.count('class="m"') == len(entries)  # one grid row each
    assert text.startswith("<!DOCTYPE html>") and text.endswith("</html>\n")
    # nothing to fetch: no external script, style, image or font
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text)
    assert "@import" not in text and "url(http" not in text
    data = unpacked(page)
    assert len(data["plots"]) == 19
    assert all(svg.startswith("<svg") for svg in data["plots"].values())
    assert [name for name in os.listdir(tmp_path)] == ["h100.html"]  # no temporary left


def test_the_band_is_the_gates_own_at_the_level_the_latest_run_was_judged(history, tmp_path):
    baseline, reports = history
    dashboard = gather([baseline], [read_report(p) for p in reports])
    store = BaselineStore(baseline.parent)
    for series in dashboard.series:
        latest = series.latest_run
        assert latest is not None and latest.false_alarm_rate == 0.01
        # the newest run was on the second board, which made no save: the boards' spread adds
        assert latest.board == BOARDS[1]
        ref = store.lookup(DEVICE_KEY, series.test_id, series.name, series.cache, board=BOARDS[1])
        assert ref is not None and series.band is not None
        band = stored_band(
            ref,
            0.0,
            false_alarm_rate=latest.false_alarm_rate,
            simulated_board_spread=DEFAULT_GPU_SPREAD,
        )
        assert series.band == band and band.board_status == "unseen" and band.between_sigma > 0
        # what the gate allowed that run, less the run's own interval (narrower than sigma)
        assert latest.allowance == pytest.approx(series.allowance, rel=1e-9)
        assert series.allowance == max(latest.tolerance, band.noise)
        assert series.expected == ref.efficiency


def test_the_states_and_the_regressions_newest_first(history, tmp_path):
    baseline, reports = history
    dashboard = gather([baseline], [read_report(p) for p in reports])
    states = {series.name: series.state for series in dashboard.series}
    # tests/dashboard_history.py: k003 regresses and is accepted, k007 drifts; the rest are ok
    assert states["k003"] == "accepted"
    assert states["k007"] == "drift"
    assert {state for name, state in states.items() if name not in ("k003", "k007")} == {"ok"}
    found = regressions(dashboard)
    whens = [episode.when for episode in found]
    assert whens == sorted(whens, reverse=True)
    accepted = next(e for e in found if e.state == "accepted")
    assert accepted.runs == 2 and accepted.last is not None
    assert "trades 5%" in accepted.last.reason


def test_a_regressed_latest_run_is_regressed_and_its_failure_is_marked(history, tmp_path):
    baseline, reports = history
    page = tmp_path / "page.html"
    # without the accept rule: the newest report's k003 failed
    document = json.loads(reports[-1].read_text())
    for result in document["results"]:
        if result["measurement"]["name"] == "k003":
            result["verdict"]["status"] = "fail"
            result["verdict"]["acceptance"] = None
    changed = tmp_path / "newest.json"
    changed.write_text(json.dumps(document))
    dashboard = gather([baseline], [read_report(p) for p in [*reports[:-1], changed]])
    k003 = next(s for s in dashboard.series if s.name == "k003")
    assert k003.state == "regressed"

    assert main([str(baseline), *map(str, reports[:-1]), str(changed), "-o", str(page)]) == 0
    tips = unpacked(page)["tips"]
    commit = document["commit"]["id"][:12]
    failed = [t for texts in tips.values() for t in texts if "failed: regression" in t]
    assert any(commit in tip and "newest.json" in tip for tip in failed)


def test_the_bisect_result_is_shown(history, tmp_path):
    baseline, reports = history
    bisect = tmp_path / "bisect.json"
    bisect.write_text(json.dumps(BISECT))
    page = tmp_path / "page.html"

    assert main([str(baseline), *map(str, reports), "--bisect", str(bisect), "-o", str(page)]) == 0

    text = page.read_text(encoding="utf-8")
    assert 'id="bisect"' in text and "culprit: 2222222222aa" in text and "unroll by 8" in text


BISECT = {
    "schema": "pytest-gpuperf-bisect",
    "schema_version": 1,
    "good": {"sha": "1" * 40, "subject": "good"},
    "bad": {"sha": "3" * 40, "subject": "bad"},
    "followed": "tests/perf/test_kernels_00.py::test_kernel[003-8M]::k003",
    "probes": [
        {
            "sha": "2222222222aa" + "2" * 28,
            "subject": "unroll by 8",
            "state": "regressed",
            "ratio": 1.052,
            "ratio_ci": [1.048, 1.057],
        },
    ],
    "culprit": {"sha": "2222222222aa" + "2" * 28, "subject": "unroll by 8"},
    "culprit_line": "culprit: 2222222222aa unroll by 8",
}


def _truncated(folder: Path, reports: list[Path]) -> Path:
    cut = folder / "cut.json"
    text = reports[0].read_text()
    cut.write_text(text[: len(text) // 2])
    return cut


def _foreign(folder: Path, reports: list[Path]) -> Path:
    path = folder / "other.json"
    path.write_text(json.dumps({"schema": "pytest-benchmark", "results": []}))
    return path


def _old_version(folder: Path, reports: list[Path]) -> Path:
    path = folder / "v1.json"
    document = json.loads(reports[0].read_text())
    document["schema_version"] = 1
    path.write_text(json.dumps(document))
    return path


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (_truncated, ("cut.json:", "not a JSON report", "truncated")),
        (_foreign, ("other.json: not a pytest-gpuperf report",)),
        (_old_version, ("v1.json: schema_version: a pytest-gpuperf report of schema version 1",)),
        (lambda folder, _: folder / "absent.json", ("absent.json: does not exist",)),
        (lambda folder, _: folder / "notes.txt", ("neither a baseline file",)),
    ],
    ids=["truncated", "another-schema", "schema-version-1", "missing", "unknown-suffix"],
)
def test_a_bad_report_is_one_line_and_nothing_is_written(history, tmp_path, capsys, make, words):
    baseline, reports = history
    bad = make(tmp_path, reports)
    if bad.suffix == ".txt":
        bad.write_text("hello")
    page = tmp_path / "page.html"

    code = main([str(baseline), str(reports[0]), str(bad), "-o", str(page)])

    one_line_exit_2(capsys, code, *words)
    assert not page.exists()


def test_a_baseline_of_another_device_is_one_line(history, tmp_path, capsys):
    _, reports = history
    page = tmp_path / "page.html"
    mi300x = REPO / "baselines" / "mi300x.toml"

    code = main([str(mi300x), *map(str, reports[:2]), "-o", str(page)])

    one_line_exit_2(capsys, code, "mi300x.toml: the baselines of device 'mi300x'", DEVICE_KEY)
    assert not page.exists()


def test_a_baseline_file_whose_device_is_not_its_name_is_one_line(tmp_path, capsys):
    wrong = tmp_path / "baselines" / "mi300x.toml"
    wrong.parent.mkdir()
    shutil.copy(SHIPPED, wrong)  # device = "h100-sxm" inside a file named mi300x.toml
    page = tmp_path / "page.html"

    code = main([str(wrong), "-o", str(page)])

    one_line_exit_2(capsys, code, "mi300x.toml")
    assert not page.exists()


def test_the_output_never_replaces_a_baseline_or_an_input(history, tmp_path, capsys):
    baseline, reports = history
    before = {p: p.read_bytes() for p in (baseline, reports[0])}
    for target, words in (
        (baseline, "is a baseline file"),
        (reports[0], "is one of the inputs"),
        (baseline.parent / "new.toml", "is a baseline file"),
    ):
        code = main([str(baseline), str(reports[0]), "-o", str(target)])
        one_line_exit_2(capsys, code, f"-o {target}:", words)
    assert {p: p.read_bytes() for p in before} == before
    assert not (baseline.parent / "new.toml").exists()
    assert sorted(os.listdir(baseline.parent)) == [baseline.name]


def test_the_output_is_never_a_device_a_fifo_or_a_folder(history, tmp_path, capsys):
    baseline, _ = history
    fifo = tmp_path / "fifo.html"
    os.mkfifo(fifo)
    for target, words in (
        (Path("/dev/full"), "names a device"),
        (fifo, "is a FIFO (named pipe)"),
        (tmp_path, "is a directory"),
    ):
        code = main([str(baseline), "-o", str(target)])
        one_line_exit_2(capsys, code, words)
    assert fifo.exists() and not fifo.is_file()  # the FIFO is still a FIFO
    assert sorted(os.listdir(tmp_path)) == ["fifo.html"]


def test_a_full_disk_leaves_no_page_and_no_temporary(history, tmp_path, capsys, monkeypatch):
    baseline, reports = history
    page = tmp_path / "page.html"
    real_fdopen = os.fdopen

    class Full:
        def __init__(self, handle):
            self.handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def write(self, data):
            raise OSError(28, "No space left on device")

    def fdopen(fd, mode="r", *args, **kwargs):
        handle = real_fdopen(fd, mode, *args, **kwargs)
        return Full(handle) if "w" in mode else handle  # the writer's temporary fills the disk

    monkeypatch.setattr(os, "fdopen", fdopen)

    code = main([str(baseline), str(reports[0]), "-o", str(page)])

    one_line_exit_2(capsys, code, "cannot be written: No space left on device")
    assert os.listdir(tmp_path) == []


def test_the_command_runs_as_a_user_runs_it(history, tmp_path):
    baseline, reports = history
    page = tmp_path / "page.html"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_gpuperf.commands",
            "publish",
            str(baseline),
            *map(str, reports[:3]),
            "-o",
            str(page),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_gpuperf.commands",
            "publish",
            str(baseline),
            "-o",
            str(baseline),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert done.returncode == 0, done.stderr
    assert page.stat().st_size > 0
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1, bad.stderr
    assert "Traceback" not in bad.stderr


def test_a_hundred_runs_stay_within_the_size_budget(tmp_path):
    """2 MB for 100 measurements x 100 runs is 20 KB a measurement of 100 runs: 20 of them
    must fit 0.4 MB (docs/benchmarks.md measures the whole 100 x 100: 0.61 MB)."""
    baseline, reports = make_history(tmp_path, measurements=20, runs=100)
    page = tmp_path / "page.html"

    assert main([str(baseline), *map(str, reports), "-o", str(page)]) == 0

    assert page.stat().st_size <= 2_000_000 * 20 // 100
    data = unpacked(page)
    assert len(data["plots"]) == 20
    assert sum(len(tips) for tips in data["tips"].values()) >= 20 * 103  # every run and save
