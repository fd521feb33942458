"""`gpuperf history` checks every argument: bad input ends with one line on stderr and exit 2,
never a traceback, and a missing file or a directory is not "no entry matches". Run as a user
runs it: a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gpuperf import history
from pytest_gpuperf.baseline import BaselineStore
from pytest_gpuperf.config import ranges

REPO = Path(__file__).resolve().parents[2]
BASELINE = REPO / "baselines" / "h100-sxm.toml"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The CLI in a real process, as a user runs it."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest_gpuperf.commands", "history", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def run(capsys, monkeypatch):
    """The CLI in this process (main(), what `python -m` calls): fast enough for every case."""

    def call(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        monkeypatch.chdir(cwd)
        try:
            code = history.main(list(args))
        except SystemExit as stop:
            code = int(stop.code or 0)
        out = capsys.readouterr()
        return subprocess.CompletedProcess(list(args), code, out.out, out.err)

    return call


def one_line_exit_2(result: subprocess.CompletedProcess[str], *words: str) -> str:
    assert result.returncode == 2, result
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert lines[0].startswith("gpuperf history: error: "), lines
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def test_the_committed_file_prints_and_bad_input_is_one_line_in_a_real_process(tmp_path):
    shown = cli(
        str(BASELINE),
        "--tolerance=0.5",
        f"--false-alarm-rate={ranges.CHECK_RATE.low}",
        cwd=tmp_path,
    )
    assert shown.returncode == 0, shown.stderr
    assert "fails below" in shown.stdout and "-" not in shown.stdout.split("fails below ")[1][:2]
    # and bad input, in a real process: one line, exit 2
    one_line_exit_2(cli(str(BASELINE), "--reports", "/nonexistent.json", cwd=tmp_path), "exist")


@pytest.mark.parametrize("value", ["0", "1", "nan", "0.5", "1e-9", "-0.01", "lots"])
def test_a_false_alarm_rate_outside_its_range(run, tmp_path, value):
    one_line_exit_2(
        run(str(BASELINE), f"--false-alarm-rate={value}", cwd=tmp_path),
        "--false-alarm-rate",
        ranges.CHECK_RATE.text,
        repr(value),
    )


@pytest.mark.parametrize("value", ["5", "nan", "-1", "0.51", "inf"])
def test_a_tolerance_outside_its_range(run, tmp_path, value):
    """--tolerance=5 printed "fails below -320.00%", nan printed "nan%"."""
    one_line_exit_2(
        run(str(BASELINE), f"--tolerance={value}", cwd=tmp_path),
        "--tolerance",
        ranges.TOLERANCE.text,
    )


def test_a_missing_file_or_a_directory_is_not_no_entry_matches(run, tmp_path):
    one_line_exit_2(run("nowhere/h100-sxm.toml", cwd=tmp_path), "does not exist")
    (tmp_path / "dir.toml").mkdir()
    one_line_exit_2(run("dir.toml", cwd=tmp_path), "is a directory")
    (tmp_path / "bad name!.toml").write_text("")
    one_line_exit_2(run("bad name!.toml", cwd=tmp_path), "cannot name a baseline file")


def test_a_broken_or_non_utf8_baseline_file(run, tmp_path):
    broken = tmp_path / "h100-sxm.toml"
    broken.write_text('schema = 2\ndevice = "h100-sxm"\n[[entry]\n')
    one_line_exit_2(run(str(broken), cwd=tmp_path), "h100-sxm.toml:3: not valid TOML")
    broken.write_bytes(b'schema = 2\ndevice = "h100-sxm"\n# caf\xe9\n')
    one_line_exit_2(run(str(broken), cwd=tmp_path), "h100-sxm.toml:3: not UTF-8 text")
    broken.unlink()
    os.mkfifo(broken)
    one_line_exit_2(run(str(broken), cwd=tmp_path), "is a FIFO")


def test_a_dotted_key_or_a_huge_number_is_one_line(run, tmp_path):
    """Before: 10,000 dotted parts took 0.4 GB (100,000 were killed for memory), a
    5,000-digit integer a traceback."""
    broken = tmp_path / "h100-sxm.toml"
    broken.write_text('schema = 2\ndevice = "h100-sxm"\n' + "a" + ".a" * 10_000 + " = 1\n")
    one_line_exit_2(run(str(broken), cwd=tmp_path), "h100-sxm.toml:3: a dotted key of more")
    broken.write_text('schema = 2\ndevice = "h100-sxm"\nx = ' + "9" * 5000 + "\n")
    one_line_exit_2(run(str(broken), cwd=tmp_path), "h100-sxm.toml:3: a number of more than")


def test_reports_that_are_missing_broken_or_not_reports(run, tmp_path):
    one_line_exit_2(
        run(str(BASELINE), "--reports", "/nonexistent.json", cwd=tmp_path),
        "/nonexistent.json: the report does not exist",
    )
    (tmp_path / "broken.json").write_text('{"results": [\n')
    one_line_exit_2(
        run(str(BASELINE), "--reports", "broken.json", cwd=tmp_path),
        "broken.json:2: not a JSON report",
    )
    (tmp_path / "other.json").write_text(json.dumps({"benchmarks": []}))
    one_line_exit_2(
        run(str(BASELINE), "--reports", "other.json", cwd=tmp_path),
        "not a pytest-gpuperf report",
    )
    (tmp_path / "latin1.json").write_bytes(b'{"x": "caf\xe9"}')
    one_line_exit_2(run(str(BASELINE), "--reports", "latin1.json", cwd=tmp_path), "not UTF-8")


def test_a_file_that_is_not_a_baseline_file_says_so(run, tmp_path):
    """A JSON report given where the baseline file goes was read as an empty store of the
    same name (report.toml, absent): "no entry matches", the wrong way out."""
    (tmp_path / "report.json").write_text(json.dumps({"schema_version": 3, "results": []}))
    one_line_exit_2(
        run("report.json", cwd=tmp_path), "report.json is not a baseline file (baselines/"
    )


def test_a_baseline_file_with_no_entries_says_so_not_that_nothing_matches(run, tmp_path):
    (tmp_path / "baselines").mkdir()
    (tmp_path / "baselines" / "h100-sxm.toml").write_text('schema = 2\ndevice = "h100-sxm"\n')
    result = run("baselines/h100-sxm.toml", cwd=tmp_path)
    assert result.returncode == 1
    assert "holds no entries yet (--gpuperf-save records them)" in result.stderr
    assert "matches" not in result.stderr


def test_no_entry_matching_the_filters_is_still_exit_1(run, tmp_path):
    result = run(str(BASELINE), "--test", "no-such-test", cwd=tmp_path)
    assert result.returncode == 1 and "no entry in" in result.stderr


def test_a_plot_path_that_is_no_plot_is_one_line_and_nothing_is_written(run, tmp_path):
    """Before: `--out plot.toml` (or the baseline file itself) was a traceback out of
    matplotlib, after the whole history was read."""
    copy = tmp_path / "h100-sxm.toml"
    copy.write_bytes(BASELINE.read_bytes())
    one_line_exit_2(run(str(copy), "--out", "plot.toml", cwd=tmp_path), "--out plot.toml: the")
    assert not (tmp_path / "plot.toml").exists()
    one_line_exit_2(run(str(copy), "--out", str(copy), cwd=tmp_path), "one of .png, .svg, .pdf")
    assert copy.read_bytes() == BASELINE.read_bytes()
    os.mkfifo(tmp_path / "pipe.png")
    one_line_exit_2(run(str(copy), "--out", "pipe.png", cwd=tmp_path), "is a FIFO")


def test_the_baseline_is_never_written(run, tmp_path):
    store = BaselineStore(REPO / "baselines")
    before = store.path_for("h100-sxm").read_bytes()
    run(str(BASELINE), "--tolerance=5", cwd=tmp_path)
    assert store.path_for("h100-sxm").read_bytes() == before


def test_the_merge_cli_refuses_strange_reports_in_one_line(tmp_path, capsys):
    """Another command (gpuperf merge): a report that is not UTF-8 ended in a traceback, a
    FIFO hung it."""
    from pytest_gpuperf.commands.merge import __main__ as merge

    (tmp_path / "latin1.json").write_bytes(b'{"schema": "caf\xe9"}')
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "dir.json").mkdir()
    for name, words in [
        ("latin1.json", "latin1.json:1: not UTF-8 text"),
        ("fifo.json", "is a FIFO (named pipe), not a JSON report; it was not opened"),
        ("dir.json", "is a directory"),
    ]:
        assert merge.main([str(tmp_path / name)]) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and words in err[0], err


def test_test_ids_and_boards_from_the_file_are_printed_escaped(tmp_path, run):
    """The history CLI printed a baseline file's test ids and boards raw: ESC]0;...BEL
    retitled the terminal, ESC[2J cleared it, a carriage return overwrote the line."""
    text = BASELINE.read_text()
    first_id = text.split('id = "', 1)[1].split('"', 1)[0]
    evil = "\\u001b]0;owned\\u0007\\u001b[2J\\r"
    text = text.replace(f'id = "{first_id}"', f'id = "{first_id}{evil}"', 1)
    if 'board = "' in text:  # the shipped saves record their board: the first one's, forged
        text = text.replace('board = "', f'board = "GPU-1{evil}', 1)
    else:
        text = text.replace("[[entry.save]]\n", f'[[entry.save]]\nboard = "GPU-1{evil}"\n', 1)
    (tmp_path / "h100-sxm.toml").write_text(text)
    result = run(str(tmp_path / "h100-sxm.toml"), "--test", first_id, cwd=tmp_path)
    assert result.returncode == 0, result
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "\r" not in result.stdout
    assert f"{first_id}\\x1b]0;owned\\x07\\x1b[2J\\r [" in result.stdout
    assert "\\x1b]0;owned" in result.stdout.split("saved on", 1)[1]  # the board too


def test_a_replaced_level_of_one_save_says_one_save(tmp_path, run):
    """Issue 45 item 15: a replaced baseline of one save printed "1 saves"."""
    from tests.dashboard_history import make_history

    baseline, _ = make_history(tmp_path, measurements=8, runs=1)
    text = baseline.read_text().replace(
        "run_spread = 0.004\nsaves = 3\n", "run_spread = 0.004\nsaves = 1\n", 1
    )
    baseline.write_text(text)
    result = run(str(baseline), "--name", "k007", cwd=tmp_path)
    assert result.returncode == 0, result
    assert "(+-0.40%, 1 save) commit" in result.stdout, result.stdout
    assert "1 saves" not in result.stdout
