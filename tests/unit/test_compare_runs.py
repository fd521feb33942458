"""`gpuperf compare OLD.json NEW.json`: per measurement the change and whether
it is beyond the gate's own band with OLD as its centre, the Markdown table, the exit status
under --fail-on-regression, and every bad input as one line, exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_gpuperf.commands.compare import SLOWER, SLOWER_ACCEPTED, WITHIN, compare, main
from pytest_gpuperf.gate.noise import stored_band
from pytest_gpuperf.record.report_reader import read_report
from pytest_gpuperf.simulate.device_model import DEFAULT_GPU_SPREAD
from tests.dashboard_history import make_history

REPO = Path(__file__).resolve().parents[2]
PROG = "gpuperf compare: error: "


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list[Path]:
    """20 runs of 20 measurements: k003 regresses 5% in the last two runs (accepted)."""
    _, reports = make_history(tmp_path_factory.mktemp("runs"), measurements=20, runs=20)
    return reports


def without_acceptance(source: Path, target: Path) -> Path:
    """The report with its accepted slowdowns failed instead (no accept rule given)."""
    document = json.loads(source.read_text())
    for result in document["results"]:
        if result["verdict"]["status"] == "accepted":
            result["verdict"]["status"] = "fail"
            result["verdict"]["acceptance"] = None
    target.write_text(json.dumps(document))
    return target


def test_a_slowdown_beyond_the_gates_band_and_the_rest_within_it(runs, tmp_path, capsys):
    old, new = runs[0], without_acceptance(runs[-1], tmp_path / "new.json")
    markdown = tmp_path / "compare.md"

    assert main([str(old), str(new), "--markdown", str(markdown)]) == 0
    assert main([str(old), str(new), "--fail-on-regression"]) == 1

    out = capsys.readouterr().out
    slower = [line for line in out.splitlines() if line.endswith(f"  {SLOWER}")]
    assert len(slower) == 2 and all("[k003]" in line for line in slower)  # one per call
    assert "20 measurements: 1 slower, 19 within noise" in out
    text = markdown.read_text()
    assert text.count("**slower**") == 1 and "| measurement | cache |" in text


def test_the_allowance_is_the_gates_band_centred_on_the_old_run(runs):
    old, new = read_report(runs[0]), read_report(runs[-1])

    changes = compare(old.rows, new.rows)

    for change in changes:
        assert change.old is not None and change.new is not None and change.band is not None
        entry = change.new.verdict.baseline.baseline
        assert entry is not None  # each run was judged against the stored entry
        measurement = change.old.measurement
        centre = replace(
            entry,
            efficiency=measurement.efficiency,
            efficiency_ci=measurement.efficiency_ci,
            saves=1,
            board_status="unseen",  # run 1 and run 20 ran on the two different boards
            boards=1,
        )
        band = stored_band(
            centre,
            change.new.measurement.relative_ci,
            false_alarm_rate=change.new.verdict.baseline.false_alarm_rate or 0.01,
            simulated_board_spread=DEFAULT_GPU_SPREAD,
        )
        assert change.band == band
        assert change.allowance == max(0.01, band.noise)
        assert change.band.between_sigma > 0  # two boards: the between-board spread added
    states = {change.key[2]: change.state for change in changes}
    assert states.pop("k003") == SLOWER_ACCEPTED
    assert set(states.values()) == {WITHIN}


def test_an_accepted_slowdown_does_not_fail_the_comparison(runs, capsys):
    assert main([str(runs[0]), str(runs[-1]), "--fail-on-regression"]) == 0
    out = capsys.readouterr().out
    assert "slower, accepted (the fused path trades 5% for one launch fewer)" in out


def _truncated(folder: Path, runs: list[Path]) -> Path:
    path = folder / "cut.json"
    text = runs[1].read_text()
    path.write_text(text[: len(text) // 3])
    return path


def _foreign(folder: Path, runs: list[Path]) -> Path:
    path = folder / "bench.json"
    path.write_text(json.dumps({"machine_info": {}, "benchmarks": []}))
    return path


def _other_device(folder: Path, runs: list[Path]) -> Path:
    document = json.loads(runs[1].read_text())
    for result in document["results"]:
        result["measurement"]["device_key"] = "mi300x"
    path = folder / "mi300x.json"
    path.write_text(json.dumps(document))
    return path


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (_truncated, ("cut.json:", "truncated")),
        (_foreign, ("bench.json: not a pytest-gpuperf report",)),
        (_other_device, ("no measurement in common", "OLD measured h100-sxm-sim, NEW mi300x-sim")),
        (lambda folder, _: folder / "absent.json", ("absent.json", "cannot be read")),
    ],
    ids=["truncated", "another-schema", "another-device", "missing"],
)
def test_a_bad_report_is_one_line_and_exit_2(runs, tmp_path, capsys, make, words):
    markdown = tmp_path / "out.md"

    code = main([str(runs[0]), str(make(tmp_path, runs)), "--markdown", str(markdown)])

    out = capsys.readouterr()
    assert code == 2 and out.out == "" and "Traceback" not in out.err
    lines = out.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(PROG)
    for word in words:
        assert word in lines[0], lines[0]
    assert not markdown.exists()


def test_the_markdown_never_replaces_an_input_a_baseline_or_a_device(runs, tmp_path, capsys):
    before = runs[1].read_bytes()
    fifo = tmp_path / "fifo.md"
    os.mkfifo(fifo)
    baseline = runs[0].parent.parent / "baselines" / "h100-sxm-sim.toml"
    for target, words in (
        (runs[1], "is one of the inputs"),
        (Path("/dev/full"), "names a device"),
        (fifo, "is a FIFO"),
        (REPO / "baselines" / "h100-sxm.toml", "is a baseline file"),
    ):
        code = main([str(runs[0]), str(runs[1]), "--markdown", str(target)])
        out = capsys.readouterr()
        assert code == 2 and len(out.err.splitlines()) == 1 and words in out.err, out.err
    assert runs[1].read_bytes() == before and baseline.exists()
    assert sorted(os.listdir(tmp_path)) == ["fifo.md"]


def test_the_command_runs_as_a_user_runs_it(runs, tmp_path):
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest_gpuperf.commands", "compare", str(runs[0]), str(runs[1])],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "20 measurements: 20 within noise" in done.stdout


def test_simulated_runs_say_so_and_each_state_is_named_once(runs, capsys):
    """Issue 45 item 15: compare never said SIMULATED, and an accepted slowdown beside a
    regression read "1 slower, 1 slower, accepted"."""
    from pytest_gpuperf.commands.compare import Change, summary_line

    assert main([str(runs[0]), str(runs[-1])]) == 0
    out = capsys.readouterr().out
    head = [line for line in out.splitlines() if line.startswith(("OLD:", "NEW:"))]
    assert len(head) == 2 and all("SIMULATED device" in line for line in head), head
    key = ("mi300x-sim", "t.py::t", "m", "cold")
    changes = [
        Change(key, None, None, SLOWER),
        Change(key, None, None, SLOWER_ACCEPTED),
        Change(key, None, None, SLOWER_ACCEPTED),
        Change(key, None, None, WITHIN),
    ]
    assert summary_line(changes) == (
        "4 measurements: 1 slower, 2 accepted slowdowns, 1 within noise"
    )
    assert summary_line(changes[1:2]) == "1 measurement: 1 accepted slowdown"


def test_a_file_that_is_not_json_is_not_called_truncated(runs, tmp_path, capsys):
    """Issue 45 item 15: a file holding `hello` was "the file ends early: truncated?"."""
    hello = tmp_path / "hello.json"
    hello.write_text("hello\n")
    assert main([str(hello), str(runs[0])]) == 2
    err = capsys.readouterr().err
    assert err == f"{PROG}{hello}:1: not a JSON report (Expecting value)\n"
