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

from pytest_gpuperf.merge import main
from pytest_gpuperf.report.json_report import REPORT_SCHEMA, REPORT_SCHEMA_VERSION
from pytest_gpuperf.report.shards import merge_reports, read_shard

REPO = Path(__file__).resolve().parents[2]


def _shard(index: int, count: int = 2, tests=("a",), **changes) -> dict:
    document = {
        "schema": REPORT_SCHEMA,
        "schema_version": REPORT_SCHEMA_VERSION,
        "commit": {"id": "c0ffee", "dirty": False},
        "suite": {"target": 0.01, "checks": 2},
        "problems": [],
        "interrupted": False,
        "timing": {"wall_s": 1.0},
        "results": [],
        "shard": {
            "index": index,
            "count": count,
            "tests": list(tests),
            "measuring": list(tests),
            "suite_tests": 2,
            "digest": "d1",
            "device_key": "mi300x-sim",
            "tests_failed": 0,
            "exitstatus": 0,
        },
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
        ("{not json", ":1: not a JSON report"),
        ('{"schema": "something-else"}', ": not a pytest-gpuperf report"),
        (
            json.dumps({"schema": REPORT_SCHEMA, "schema_version": 3, "results": []}),
            ": the report of an unsharded run",
        ),
        (
            json.dumps({"schema": REPORT_SCHEMA, "schema_version": 1, "results": []}),
            ": a pytest-gpuperf report of schema version 1; this plugin reads versions 2 to 3",
        ),
    ],
)
def test_a_file_that_is_not_a_shards_report_is_one_line_and_exit_2(
    tmp_path, capsys, content, words
):
    good = _write(tmp_path, "1.json", _shard(1))
    bad = _write(tmp_path, "bad.json", content)
    assert main([good, bad, "--json", str(tmp_path / "out.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{bad}{words}" in err
    assert not (tmp_path / "out.json").exists()


def test_an_unwritable_output_is_one_line_and_exit_2(tmp_path, capsys):
    paths = [
        _write(tmp_path, "1.json", _shard(1)),
        _write(tmp_path, "2.json", _shard(2, tests=("b",))),
    ]
    (tmp_path / "file").write_text("")
    assert main([*paths, "--markdown", str(tmp_path / "file" / "summary.md")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "summary.md: cannot be written" in err


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
