"""Reading and checking the shards' JSON reports (report/shards.py) and the merge command's
bad input: every mistake is one line and exit 2, never a traceback or a stray file."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gpuperf.engine.results import NO_BASELINE, BaselineCheck, Measurement, Row
from pytest_gpuperf.gate.decide import decide
from pytest_gpuperf.gate.floor import check_floor
from pytest_gpuperf.merge import main
from pytest_gpuperf.report.json_report import REPORT_SCHEMA, to_json
from pytest_gpuperf.report.shards import merge_reports, read_shard
from pytest_gpuperf.report.text import ReportMeta

REPO = Path(__file__).resolve().parents[2]


# The suite's collection order: the shards' tests take their places from it
ORDER = ("a", "p", "b", "q", "c")


def _measurement(time_s: float = 1e-4, name: str = "k") -> Measurement:
    return Measurement(
        name=name,
        kernel="k",
        cache="cold",
        bytes_moved=400_000_000,
        time_s=time_s,
        time_ci_s=(time_s * 0.99, time_s * 1.01),
        samples_s=(time_s,) * 10,
        peak_bps=5.3e12,
        device_key="mi300x",
        device_name="simulated MI300X",
        backend="sim",
        simulated=True,
        queue_method="flush",
    )


def _row(test_id: str, *, time_s: float = 1e-4, floor: float | None = None) -> Row:
    """A measurement as the gate judged it (efficiency 400 MB / time / 5.3 TB/s: 75% at
    100 us)."""
    m = _measurement(time_s)
    verdict = decide(
        baseline=BaselineCheck(outcome=NO_BASELINE),
        floor=check_floor(m, floor) if floor is not None else None,
    )
    return Row(test_id, m, verdict, "passed")


def _shard(
    index: int,
    count: int = 2,
    tests=("a",),
    *,
    measuring=None,
    rows=None,
    outcomes=None,
    **changes,
) -> dict:
    measuring = tuple(tests) if measuring is None else tuple(measuring)
    rows = [_row(test) for test in measuring] if rows is None else rows
    document = to_json(rows, ReportMeta(commit="c0ffee", suite_target=0.01, suite_checks=2))
    document["shard"] = {
        "index": index,
        "count": count,
        "tests": list(tests),
        "measuring": list(measuring),
        "suite_tests": 2,
        "digest": "d1",
        "device_key": "mi300x-sim",
        "positions": [ORDER.index(test) for test in tests],
        "outcomes": {test: {"outcome": "passed", "message": ""} for test in tests}
        | (outcomes or {}),
        "tests_failed": 0,
        "exitstatus": 0,
    }
    for key, value in changes.items():
        document["shard"][key] = value
    return document


def _write(tmp_path: Path, name: str, document) -> str:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return str(path)


def test_shards_of_one_run_merge_and_pass(tmp_path):
    paths = [
        _write(tmp_path, "1.json", _shard(1)),
        _write(tmp_path, "2.json", _shard(2, tests=("b",))),
    ]
    merged = merge_reports([read_shard(p) for p in reversed(paths)])
    assert merged.verdict == "passed" and merged.reasons == ()
    assert [s["index"] for s in merged.meta.merge["shards"]] == [1, 2]


def test_a_test_in_two_shards_and_a_bad_exit_fail(tmp_path):
    one = read_shard(_write(tmp_path, "1.json", _shard(1)))
    two = read_shard(_write(tmp_path, "2.json", _shard(2, exitstatus=3)))
    merged = merge_reports([one, two])
    assert merged.verdict == "failed"
    assert "1 test(s) ran in more than one shard: a (1/2, 2/2)" in merged.reasons
    assert any("pytest exited with status 3" in reason for reason in merged.reasons)


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("{not json", "not a JSON report"),
        ('{"schema": "something-else"}', "not a pytest-gpuperf report"),
        (json.dumps({"schema": REPORT_SCHEMA, "results": []}), "the report of an unsharded run"),
    ],
)
def test_a_file_that_is_not_a_shards_report_is_one_line_and_exit_2(
    tmp_path, capsys, content, words
):
    good = _write(tmp_path, "1.json", _shard(1))
    bad = _write(tmp_path, "bad.json", content)
    assert main([good, bad, "--json", str(tmp_path / "out.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{bad}: {words}" in err
    assert not (tmp_path / "out.json").exists()


def test_an_unwritable_output_is_one_line_and_exit_2(tmp_path, capsys):
    paths = [
        _write(tmp_path, "1.json", _shard(1)),
        _write(tmp_path, "2.json", _shard(2, tests=("b",))),
    ]
    (tmp_path / "file").write_text("")
    assert main([*paths, "--markdown", str(tmp_path / "file" / "summary.md")]) == 2
    err = capsys.readouterr().err
    # asked before any shard is read, by the pytest run's report-path rules
    assert err.count("\n") == 1 and "summary.md: " in err and "file is not a directory" in err


@pytest.mark.parametrize("option", ["--json", "--markdown", "--junit"])
def test_an_output_that_is_not_a_regular_file_is_refused_and_left_alone(tmp_path, capsys, option):
    """A merged report replaces its file: never a FIFO, a folder or a device (checked by
    report/files.py, as the pytest run's reports are)."""
    paths = [
        _write(tmp_path, "1.json", _shard(1)),
        _write(tmp_path, "2.json", _shard(2, tests=("b",))),
    ]
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert main([*paths, option, str(fifo)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pipe: is a FIFO (named pipe), not a regular file" in err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    (tmp_path / "folder").mkdir()
    assert main([*paths, option, str(tmp_path / "folder")]) == 2
    assert "folder: is a directory, not a regular file" in capsys.readouterr().err


def test_the_command_never_shows_a_traceback(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "pytest_gpuperf.merge", str(tmp_path / "none.json"), "--nope"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "unrecognized arguments: --nope" in done.stderr
    missing = subprocess.run(
        [sys.executable, "-m", "pytest_gpuperf.merge", str(tmp_path / "none.json")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 2 and "none.json: cannot be read" in missing.stderr
    assert "Traceback" not in missing.stderr
