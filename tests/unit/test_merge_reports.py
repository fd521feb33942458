"""Reading and checking the shards' JSON reports (merge/shards.py) and the merge command's
bad input: every mistake is one line and exit 2, never a traceback or a stray file."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from pytest_gpuperf.commands.merge.__main__ import main
from pytest_gpuperf.commands.merge.shards import merge_reports, read_shard
from pytest_gpuperf.engine.plain import to_plain
from pytest_gpuperf.gate.decide import decide
from pytest_gpuperf.gate.floor import check_floor
from pytest_gpuperf.record.checks import NO_BASELINE, BaselineCheck
from pytest_gpuperf.record.json_report import REPORT_SCHEMA
from pytest_gpuperf.record.meta import ReportMeta
from pytest_gpuperf.record.verdict import Row
from pytest_gpuperf.report.json_document import to_json
from tests.unit.test_baseline import make_measurement

REPO = Path(__file__).resolve().parents[2]


# The suite's collection order: the shards' tests take their places from it
ORDER = ("a", "p", "b", "q", "c")


def _row(test_id: str, *, time_s: float = 1e-4, floor: float | None = None) -> Row:
    """A measurement as the gate judged it (efficiency 400 MB / time / 5.3 TB/s: 75% at
    100 us)."""
    m = make_measurement("k", time_s, bytes_moved=400_000_000, simulated=True, backend="sim")
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
        "positions": [
            ORDER.index(test) if test in ORDER else len(ORDER) + n for n, test in enumerate(tests)
        ],
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
        ("{not json", "1: not a JSON report"),
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
    assert err.count("\n") == 1 and (f"{bad}: {words}" in err or f"{bad}:{words}" in err)
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
    record/files.py, as the pytest run's reports are)."""
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
        [
            sys.executable,
            "-m",
            "pytest_gpuperf.commands",
            "merge",
            str(tmp_path / "none.json"),
            "--nope",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "unrecognized arguments: --nope" in done.stderr
    missing = subprocess.run(
        [sys.executable, "-m", "pytest_gpuperf.commands", "merge", str(tmp_path / "none.json")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 2 and "none.json: cannot be read" in missing.stderr
    assert "Traceback" not in missing.stderr


# -- outputs: the report-path rules, checked before any shard is read (issue 38, item 2) -----


def _two(tmp_path: Path) -> list[str]:
    return [
        _write(tmp_path, "1.json", _shard(1)),
        _write(tmp_path, "2.json", _shard(2, tests=("b",))),
    ]


@pytest.mark.parametrize(
    ("option", "target", "words"),
    [
        ("--json", "baselines/mi300x-sim.toml", "is a baseline file of this run"),
        # a baseline of another folder, known by its content (before: by its .toml name)
        ("--json", "elsewhere/baselines/mi300x-sim.toml", "is a baseline file (by its content)"),
        ("--json", "elsewhere/new.toml", "is a .toml path, where baselines live"),
        ("--markdown", "1.json", "1.json); the output would replace it"),
        ("--junit", "linked-to-2.json", "is one of the inputs"),
    ],
)
def test_an_output_onto_a_baseline_or_an_input_is_refused_and_nothing_changes(
    tmp_path, capsys, monkeypatch, option, target, words
):
    """`merge ... --json <repo>/baselines/mi300x-sim.toml` replaced the baseline; `--json
    r1.json` overwrote an input. Refused with one line, exit 2, every file as it was."""
    monkeypatch.chdir(tmp_path)
    paths = _two(tmp_path)
    for folder in ("baselines", "elsewhere/baselines"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "mi300x-sim.toml").write_text('schema = 2\ndevice = "mi300x-sim"\n')
    os.link(tmp_path / "2.json", tmp_path / "linked-to-2.json")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert main([*paths, option, target]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{option}={target}: " in err and words in err
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("kind", ["baseline", "input", "fifo"])
def test_github_step_summary_onto_a_baseline_an_input_or_a_fifo_is_refused(
    tmp_path, capsys, monkeypatch, kind
):
    """`GITHUB_STEP_SUMMARY=<baseline file> merge ... --markdown m.md` appended Markdown to
    the TOML (every later run: not valid TOML); a FIFO there hung the merge."""
    monkeypatch.chdir(tmp_path)
    paths = _two(tmp_path)
    (tmp_path / "baselines").mkdir()
    baseline = tmp_path / "baselines" / "mi300x-sim.toml"
    baseline.write_text('schema = 2\ndevice = "mi300x-sim"\n')
    target = {"baseline": baseline, "input": tmp_path / "1.json", "fifo": tmp_path / "pipe"}[kind]
    if kind == "fifo":
        os.mkfifo(target)
    else:
        before = target.read_bytes()
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    assert main([*paths, "--markdown", str(tmp_path / "m.md")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"$GITHUB_STEP_SUMMARY={target}: " in err
    assert not (tmp_path / "m.md").exists()  # checked before anything was written
    if kind == "fifo":
        assert "is a FIFO (named pipe)" in err and stat.S_ISFIFO(os.lstat(target).st_mode)
    else:
        assert target.read_bytes() == before


def test_the_summary_writer_refuses_a_fifo_without_waiting(tmp_path):
    """The plugin's own appender (and the merge's, after its check): a FIFO swapped in is
    refused, never opened to wait for a reader."""
    from pytest_gpuperf.record.files import ReportPathError
    from pytest_gpuperf.report.markdown_summary import append_github_step_summary

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ReportPathError, match="is a FIFO"):
        append_github_step_summary("# x\n", {"GITHUB_STEP_SUMMARY": str(fifo)})
    regular = tmp_path / "summary.md"
    regular.write_text("before\n")
    assert append_github_step_summary("# x", {"GITHUB_STEP_SUMMARY": str(regular)}) == regular
    assert regular.read_text() == "before\n# x\n"


# -- forged shard reports (issue 38, item 3) --------------------------------------------------


def test_a_shard_whose_results_were_emptied_fails_the_merge(tmp_path, capsys):
    """Shard 2 edited to `results: []`: its measuring test passed without a measurement."""
    one = _write(tmp_path, "1.json", _shard(1))
    two = _write(tmp_path, "2.json", _shard(2, tests=("b",)) | {"results": []})
    assert main([one, two, "--json", str(tmp_path / "m.json")]) == 1
    out = capsys.readouterr().out
    assert "1 measuring test passed with no measurement in the report: b" in out
    assert json.loads((tmp_path / "m.json").read_text())["merge"]["verdict"] == "failed"


def test_a_status_that_its_numbers_contradict_is_decided_again(tmp_path, capsys):
    """An efficiency of 5% under a 30% floor, edited to status `pass`, merged as PASSED."""
    slow = _row("b", time_s=1.5e-3, floor=0.30)  # 400 MB in 1.5 ms: 5.0% of 5.3 TB/s
    assert slow.verdict.status == "fail"
    forged = _shard(2, tests=("b",), rows=[slow])
    forged["results"][0]["verdict"]["status"] = "pass"
    forged["results"][0]["verdict"]["floor"]["status"] = "pass"
    paths = [_write(tmp_path, "1.json", _shard(1)), _write(tmp_path, "2.json", forged)]
    assert main([*paths, "--junit", str(tmp_path / "j.xml")]) == 1
    out = capsys.readouterr().out
    assert (
        f"shard 2/2 ({paths[1]}): b [k, cold]: the report says pass, its numbers say fail "
        "(efficiency 5.03% against the floor 30.00% is fail, not pass)"
    ) in out
    assert "1 test failed the gate: b" in out
    assert '<failure message="' in (tmp_path / "j.xml").read_text()


def test_a_regression_edited_to_within_noise_is_decided_again(tmp_path):
    from tests.records import SIM_REFERENCE as reference

    row = _row("b")  # 75%: 17% under 90%, beyond a 5% allowance
    check = BaselineCheck(outcome="within-noise", baseline=reference, delta=-0.01, allowance=0.05)
    forged = _shard(2, tests=("b",), rows=[row])
    forged["results"][0]["verdict"]["baseline"] = to_plain(check)
    merged = merge_reports(
        [
            read_shard(_write(tmp_path, "1.json", _shard(1))),
            read_shard(_write(tmp_path, "2.json", forged)),
        ]
    )
    assert merged.verdict == "failed"
    assert any(
        "the report says pass, its numbers say fail (against the stored baseline it is "
        "regressed, not within-noise)" in reason
        for reason in merged.reasons
    )


def _result_field(document: dict, *path, value) -> dict:
    target = document["results"][0]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return document


@pytest.mark.parametrize(
    ("forge", "words"),
    [
        (
            lambda d: _result_field(d, "verdict", "status", value="totally-fine"),
            "results[0].verdict.status: 'totally-fine' is not one of 'pass', 'fail'",
        ),
        (
            lambda d: d | {"results": d["results"] * 2},
            "results[1]: 'b' [k, cold] is given twice (also results[0])",
        ),
        (
            lambda d: _result_field(d, "measurement", "time_s", value=float("inf")),
            "results[0].measurement.time_s: Infinity is not a number a JSON report holds",
        ),
        (
            lambda d: _result_field(d, "measurement", "time_s", value=0),
            "results[0].measurement.time_s: expected a number above 0.0, got 0",
        ),
        (
            lambda d: d | {"shard": d["shard"] | {"tests": None}},
            "shard.tests: expected an array, got null",
        ),
        (
            lambda d: d | {"shard": d["shard"] | {"count": 1000000}},
            "shard.count: 1000000 shards is more than any run may have (at most 256)",
        ),
        (
            lambda d: d | {"shard": d["shard"] | {"count": 10**9}},
            "shard.count: 1000000000 shards is more than any run may have",
        ),
        (
            lambda d: d | {"shard": d["shard"] | {"outcomes": {"b": {"outcome": "fine"}}}},
            "shard.outcomes['b'].outcome: 'fine' is not one of 'passed'",
        ),
        (
            lambda d: d | {"results": [{**d["results"][0], "test_id": "z"}]},
            "results[0].test_id: 'z' is not one of shard.tests",
        ),
        (lambda d: d | {"problems": None}, "problems: expected an array, got null"),
        (
            lambda d: _result_field(d, "measurement", "calibrated_efficiency", value="x"),
            "results[0].measurement.calibrated_efficiency: expected a finite number, got 'x'",
        ),
        (
            lambda d: _result_field(d, "verdict", "baseline", "tolerance", value=[1]),
            "results[0].verdict.baseline.tolerance: expected a finite number, got [1]",
        ),
        (
            lambda d: _result_field(d, "measurement", "grid", value=["a", 1, 1]),
            "results[0].measurement.grid[0]: expected an integer, got 'a'",
        ),
        (
            lambda d: _result_field(d, "measurement", "grid", value=[1, 2]),
            "its results cannot be read",
        ),
    ],
)
def test_a_forged_or_broken_field_is_one_line_naming_file_and_field(tmp_path, forge, words):
    """Unknown states, duplicates, numbers no run writes, a wrong kind: refused with one line
    and exit 2, before any output is written (they were tracebacks, or merged as PASSED)."""
    document = forge(_shard(2, tests=("b",)))
    text = json.dumps(document)  # Infinity where a test put inf: what a hand edit writes
    bad = _write(tmp_path, "2.json", text)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_gpuperf.commands",
            "merge",
            _write(tmp_path, "1.json", _shard(1)),
            bad,
            "--json",
            str(tmp_path / "out.json"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and f"{bad}: " in done.stderr
    assert words in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == "" and not (tmp_path / "out.json").exists()


def test_many_missing_shards_are_one_line(tmp_path):
    """A forged `count` within the bound names the missing shards once, not a line each."""
    merged = merge_reports([read_shard(_write(tmp_path, "1.json", _shard(1, count=200)))])
    missing = [reason for reason in merged.reasons if "missing" in reason]
    assert missing == [
        "199 of 200 shards are missing (2-200): no report for them (did their jobs end before "
        "writing --gpuperf-json?); their tests were not measured"
    ]


# -- every test, in collection order (issue 37, item 7) ---------------------------------------


def test_every_test_of_every_shard_is_listed_once_in_collection_order(tmp_path):
    one = _shard(
        1,
        tests=("a", "q"),
        measuring=("a",),
        outcomes={"q": {"outcome": "failed", "message": "AssertionError: 2 != 3"}},
        tests_failed=1,
    )
    two = _shard(
        2,
        tests=("p", "b", "c"),
        measuring=("b",),
        outcomes={"c": {"outcome": "skipped", "message": "needs two GPUs"}},
    )
    merged = merge_reports(
        [
            read_shard(_write(tmp_path, "2.json", two)),
            read_shard(_write(tmp_path, "1.json", one)),
        ]
    )
    tests = merged.meta.merge["tests"]
    assert [(t["test_id"], t["shard"], t["outcome"]) for t in tests] == [
        ("a", 1, "passed"),
        ("p", 2, "passed"),
        ("b", 2, "passed"),
        ("q", 1, "failed"),
        ("c", 2, "skipped"),
    ]
    assert [row.test_id for row in merged.rows] == ["a", "b"]
    assert f"shard 1/2 ({tmp_path / '1.json'}): test q failed: AssertionError: 2 != 3" in (
        merged.reasons
    )
    assert not any("other test" in reason for reason in merged.reasons)
    from pytest_gpuperf.commands.merge.shards import verdict_line

    assert verdict_line(merged) == (
        "merged 2 shards: 5 tests (2 measuring in the suite, 2 measured, 2 measurements): "
        "3 passed, 1 failed, 1 skipped: FAILED (1 reason)"
    )


def test_the_cost_line_says_what_to_do_or_is_left_out(tmp_path):
    from pytest_gpuperf.commands.merge.shards import cost_line

    even = [{"index": 1, "measured_cost_s": 1.0}, {"index": 2, "measured_cost_s": 1.1}]
    assert cost_line(even, {"suite_tests": 2, "costed": 2}) == ""
    uneven = [{"index": 1, "measured_cost_s": 1.0}, {"index": 2, "measured_cost_s": 7.233}]
    line = cost_line(uneven, {"suite_tests": 17, "costed": 0})
    assert line.startswith("cost balance: shard 2 measured 623% more GPU time")
    assert "17 of 17 measuring tests had no recorded cost to plan by; save baselines" in line
    line = cost_line(uneven, {"suite_tests": 17, "costed": 17, "dominant": "t.py::test_big"})
    assert "t.py::test_big alone costs more than a shard's share" in line
    line = cost_line(uneven, {"suite_tests": 17, "costed": 17, "dominant": ""})
    assert "save the baselines again (--gpuperf-save) to rebalance" in line


# -- control characters from a file reach the terminal escaped (issue 38, item 15) ------------


def test_test_ids_from_a_shard_are_printed_escaped(tmp_path, capsys):
    evil = "a\x1b]0;owned\x07\x1b[2J\rPASSED"
    document = _shard(
        1,
        count=1,
        tests=(evil,),
        outcomes={evil: {"outcome": "failed", "message": "x\x1b[31m"}},
    )
    path = _write(tmp_path, "1.json", document)
    assert main([path, "--junit", str(tmp_path / "j.xml")]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out
    assert "a\\x1b]0;owned\\x07\\x1b[2J\\rPASSED" in out
    ElementTree.parse(tmp_path / "j.xml")  # XML 1.0 cannot hold them either
