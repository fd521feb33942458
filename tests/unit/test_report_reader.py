"""The one reader of the JSON report (record/report_reader.py) and every command that reads
one through it (compare, merge, publish, history, bisect): a NaN, a key or a measurement given
twice, a field of the wrong kind or an unknown schema version is one line naming the file and
the field, exit 2, and nothing written; and the verdicts are decided from the numbers, not
from what a report says about itself."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.record.json_text import MAX_LINE_BYTES, loads_line, loads_strict
from pytest_gpuperf.record.report_reader import read_bisect, read_report
from tests.dashboard_history import make_history

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "pytest_gpuperf"

Forge = Callable[[dict], object]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, list[Path]]:
    """A baseline file and 3 runs of 4 measurements (k003 regresses 5% in the last two runs,
    accepted by a rule that names it)."""
    return make_history(tmp_path_factory.mktemp("runs"), measurements=4, runs=3)


def forged(source: Path, target: Path, forge: Forge | str) -> Path:
    """`source` with `forge` applied to its document (or replaced by the text `forge`)."""
    if isinstance(forge, str):
        target.write_text(forge)
        return target
    document = json.loads(source.read_text())
    forge(document)
    target.write_text(json.dumps(document))  # NaN stays NaN: Python writes it
    return target


def _set(*path: str | int, value: object) -> Forge:
    def forge(document: dict) -> None:
        target = document
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return forge


def _duplicate_result(document: dict) -> None:
    document["results"].append(document["results"][0])


def _key_twice(text: str) -> str:
    """The first `"time_s": ...` given a second time, earlier, in its object."""
    return text.replace('"time_s": ', '"time_s": 1e-9, "time_s": ', 1)


# The attacks of issue 45 item 12 and issue 47: (forge, the field the one line names)
WRONG = [
    (_set("commit", "id", value=["a", "b"]), "commit.id: expected a string or null, got"),
    (_set("results", 0, "measurement", "time_s", value=0), "results[0].measurement.time_s"),
    (_set("results", 0, "measurement", "time_s", value=None), "results[0].measurement.time_s"),
    (_set("results", 0, "measurement", "time_s", value="x"), "results[0].measurement.time_s"),
    (_set("results", 0, "measurement", "time_s", value=float("nan")), "time_s: NaN is not"),
    (_set("results", 0, "measurement", "peak_bps", value=0), "results[0].measurement.peak_bps"),
    (_set("results", 0, "verdict", value=None), "results[0].verdict: expected an object"),
    (_set("results", 0, "verdict", "status", value=None), "results[0].verdict.status: null"),
    (_set("results", 0, "test_id", value=["a"]), "results[0].test_id: expected a string"),
    (_set("results", 0, "test_id", value=7), "results[0].test_id: expected a string, got 7"),
    (_duplicate_result, "is given twice (also results[0])"),
    (_set("schema_version", value=99), "schema_version: a pytest-gpuperf report of schema"),
    (lambda d: d.pop("schema_version"), "schema_version: a pytest-gpuperf report of schema"),
    (
        _set("results", 0, "measurement", "work", value={"flops": -1, "math": "bf16"}),
        "results[0].measurement.work.flops: expected an integer at least 1, got -1",
    ),
    (
        _set("results", 0, "measurement", "work", value={"flops": 8, "math": "bf32"}),
        "results[0].measurement.work.math: 'bf32' is not one of 'fp64'",
    ),
    (
        _set("results", 0, "verdict", "flops_floor", value={"floor": 0.5, "status": "ok"}),
        "results[0].verdict.flops_floor.status: 'ok' is not one of",
    ),
]
WRONG_IDS = [
    "commit-list",
    "time-0",
    "time-null",
    "time-str",
    "time-nan",
    "peak-0",
    "verdict-null",
    "status-null",
    "test-id-list",
    "test-id-int",
    "duplicate-measurement",
    "version-99",
    "version-missing",
    "work-flops-negative",
    "work-math-unknown",
    "flops-floor-status",
]


# -- the reader ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{"a": [1, {"t": NaN}]}', "f.json: a[1].t: NaN is not a number"),
        ('{"a": -Infinity}', "f.json: a: -Infinity is not a number"),
        ('{"a": 1e999}', "f.json: a: 1e999 is not a number"),
        ('{"r": [{"x": 1, "x": 2}]}', "f.json: r[0].x: the key 'x' is given twice"),
        ('{"a": ', "f.json:1: not a JSON report (Expecting value; the file ends early"),
        ("[" * 100_000, "f.json: not a JSON report (nested too deep to parse)"),
    ],
    ids=["nan", "infinity", "overflow", "key-twice", "truncated", "deep"],
)
def test_strict_json_names_the_field_in_one_line(text, words):
    with pytest.raises(ConfigError) as refused:
        loads_strict(text, "f.json", "a JSON report")
    assert str(refused.value).startswith(words) and "\n" not in str(refused.value)


def test_a_childs_line_is_bounded():
    with pytest.raises(ConfigError, match="more than a planned launch may be"):
        loads_line("[" + "0," * MAX_LINE_BYTES + "0]", "plan.jsonl", "a planned launch")
    assert loads_line('{"kernel": "k"}', "plan.jsonl", "a planned launch") == {"kernel": "k"}


@pytest.mark.parametrize(("forge", "words"), WRONG, ids=WRONG_IDS)
def test_the_reader_refuses_each_attack_naming_file_and_field(runs, tmp_path, forge, words):
    path = forged(runs[1][0], tmp_path / "bad.json", forge)
    with pytest.raises(ConfigError) as refused:
        read_report(path)
    line = str(refused.value)
    assert line.startswith(f"{path}: ") and words in line and "\n" not in line, line


def test_a_key_given_twice_is_refused_not_last_wins(runs, tmp_path):
    path = forged(runs[1][0], tmp_path / "twice.json", _key_twice(runs[1][0].read_text()))
    with pytest.raises(ConfigError, match=r"results\[0\]\.measurement\.time_s: the key 'time_s'"):
        read_report(path)


def test_a_report_as_written_reads_back(runs):
    report = read_report(runs[1][-1])
    assert len(report.rows) == 4 and report.document["schema_version"] == 4


def test_a_fifo_or_a_large_file_is_never_read_whole(runs, tmp_path, monkeypatch):
    from pytest_gpuperf.record import json_text

    os.mkfifo(tmp_path / "fifo.json")
    with pytest.raises(ConfigError, match="is a FIFO"):
        read_report(tmp_path / "fifo.json")
    monkeypatch.setattr(json_text, "MAX_JSON_BYTES", 1000)
    with pytest.raises(ConfigError, match="more than a JSON report may be"):
        read_report(runs[1][0])


@pytest.mark.parametrize(
    ("document", "words"),
    [
        ({"probes": None}, "probes: expected an array, got null"),
        ({"probes": [{"sha": 7}]}, "probes[0].sha: expected a string, got 7"),
        ({"probes": [{"ratio": "x"}]}, "probes[0].ratio: expected a number or null"),
        ({"probes": [{"ratio_ci": [1.0]}]}, "probes[0].ratio_ci: not a [low, high] pair"),
        ({"culprit": "abc"}, "culprit: expected an object or null"),
        ({"schema_version": 2}, "schema_version: expected an integer from 1 to 1"),
    ],
)
def test_a_bisection_result_is_checked_field_by_field(tmp_path, document, words):
    path = tmp_path / "bisect.json"
    base = {"schema": "pytest-gpuperf-bisect", "schema_version": 1, "probes": []}
    path.write_text(json.dumps(base | document))
    with pytest.raises(ConfigError) as refused:
        read_bisect(path)
    assert str(refused.value) == f"{path}: {words}" or words in str(refused.value)


# -- what the package holds ------------------------------------------------------------------


def _sources() -> list[tuple[Path, str]]:
    return [(path, path.read_text()) for path in sorted(PACKAGE.rglob("*.py"))]


def test_json_is_parsed_only_in_record():
    """Four readers had drifted; one parses now (`json.loads` and `json.load(`)."""
    found = [
        f"{path.relative_to(REPO)}:{n}"
        for path, text in _sources()
        if path.parent.name != "record"
        for n, line in enumerate(text.splitlines(), 1)
        if re.search(r"\bjson\.loads?\(", line)
    ]
    assert found == []


def test_one_command_parser_and_one_point():
    parsers = [
        str(path.relative_to(REPO))
        for path, text in _sources()
        if re.search(r"class \w+\(argparse\.ArgumentParser\)", text)
    ]
    assert parsers == ["pytest_gpuperf/config/command.py"]
    points = [
        str(path.relative_to(REPO))
        for path, text in _sources()
        if re.search(r"^class Point\b", text, re.MULTILINE)
    ]
    assert points == ["pytest_gpuperf/record/history_model.py"]


# -- each command through the reader ---------------------------------------------------------


def _one_line_exit_2(capsys, code: int, prog: str, *words: str) -> str:
    out = capsys.readouterr()
    lines = out.err.splitlines()
    assert code == 2 and len(lines) == 1, out
    assert lines[0].startswith(f"gpuperf {prog}: error: "), lines[0]
    assert "Traceback" not in out.err
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize(("forge", "words"), WRONG, ids=WRONG_IDS)
def test_compare_refuses_each_attack_in_one_line(runs, tmp_path, capsys, forge, words):
    from pytest_gpuperf.commands.compare import main

    bad = forged(runs[1][-1], tmp_path / "new.json", forge)
    markdown = tmp_path / "out.md"
    code = main([str(runs[1][0]), str(bad), "--fail-on-regression", "--markdown", str(markdown)])
    _one_line_exit_2(capsys, code, "compare", str(bad), words)
    assert sorted(os.listdir(tmp_path)) == ["new.json"]


@pytest.mark.parametrize(("forge", "words"), WRONG, ids=WRONG_IDS)
def test_publish_refuses_each_attack_in_one_line(runs, tmp_path, capsys, forge, words):
    from pytest_gpuperf.commands.publish.__main__ import main

    baseline, reports = runs
    bad = forged(reports[-1], tmp_path / "run.json", forge)
    code = main([str(baseline), str(reports[0]), str(bad), "-o", str(tmp_path / "page.html")])
    _one_line_exit_2(capsys, code, "publish", str(bad), words)
    assert sorted(os.listdir(tmp_path)) == ["run.json"]


def test_publish_refuses_a_bisection_with_probes_null(runs, tmp_path, capsys):
    from pytest_gpuperf.commands.publish.__main__ import main

    baseline, reports = runs
    bisect = tmp_path / "bisect.json"
    bisect.write_text(json.dumps({"schema": "pytest-gpuperf-bisect", "schema_version": 1}))
    code = main([str(baseline), str(reports[0]), "--bisect", str(bisect), "-o", "page.html"])
    _one_line_exit_2(capsys, code, "publish", f"{bisect}: probes: expected an array, got null")
    assert not Path("page.html").exists()


@pytest.mark.parametrize(
    ("forge", "words"),
    [
        (_set("results", 0, "measurement", "time_s", value=float("nan")), "time_s: NaN is not"),
        (_duplicate_result, "is given twice (also results[0])"),
        (_set("results", 0, "test_id", value=7), "results[0].test_id: expected a string, got 7"),
    ],
    ids=["nan", "duplicate", "wrong-type"],
)
def test_history_refuses_through_the_reader(runs, tmp_path, capsys, forge, words):
    from pytest_gpuperf import history

    baseline, reports = runs
    bad = forged(reports[-1], tmp_path / "run.json", forge)
    code = history.main([str(baseline), "--reports", str(bad)])
    _one_line_exit_2(capsys, code, "history", str(bad), words)


@pytest.mark.parametrize(
    ("forge", "words"),
    [
        (_set("results", 0, "measurement", "time_s", value=float("nan")), "time_s: NaN is not"),
        (_duplicate_result, "is given twice (also results[0])"),
        (_set("results", 0, "verdict", value=None), "results[0].verdict: expected an object"),
    ],
    ids=["nan", "duplicate", "wrong-type"],
)
def test_merge_refuses_through_the_reader(tmp_path, capsys, forge, words):
    from pytest_gpuperf.commands.merge.__main__ import main
    from tests.unit.test_merge_reports import _shard

    bad = tmp_path / "2.json"
    good = tmp_path / "1.json"
    good.write_text(json.dumps(_shard(1)))
    document = _shard(2, tests=("b",))
    forge(document)
    bad.write_text(json.dumps(document))
    code = main([str(good), str(bad), "--json", str(tmp_path / "out.json")])
    _one_line_exit_2(capsys, code, "merge", str(bad), words)
    assert not (tmp_path / "out.json").exists()


def test_merge_refuses_a_shard_of_an_unknown_schema_version(tmp_path, capsys):
    """The merge's own reader never asked the version."""
    from pytest_gpuperf.commands.merge.__main__ import main
    from tests.unit.test_merge_reports import _shard

    (tmp_path / "1.json").write_text(json.dumps(_shard(1)))
    (tmp_path / "2.json").write_text(json.dumps(_shard(2, tests=("b",)) | {"schema_version": 9}))
    code = main([str(tmp_path / "1.json"), str(tmp_path / "2.json")])
    _one_line_exit_2(capsys, code, "merge", "2.json: schema_version: a pytest-gpuperf report")


@pytest.mark.parametrize(
    ("forge", "words"),
    [
        (_set("results", 0, "measurement", "time_s", value=float("nan")), "time_s: NaN is not"),
        (_duplicate_result, "is given twice (also results[0])"),
        (_set("results", 0, "test_id", value=["a"]), "results[0].test_id: expected a string"),
    ],
    ids=["nan", "duplicate", "wrong-type"],
)
def test_bisect_reads_its_probes_report_through_the_reader(
    runs, tmp_path, monkeypatch, forge, words
):
    """A probe's report was parsed with an unbounded json.loads and believed."""
    from pytest_gpuperf.commands.bisect import probe

    bad = forged(runs[1][-1], tmp_path / "probe-source.json", forge)

    def child(command, cwd, timeout_s, head):
        json_path = next(a.split("=", 1)[1] for a in command if a.startswith("--gpuperf-json="))
        Path(json_path).write_bytes(bad.read_bytes())
        return 0, "", ""

    monkeypatch.setattr(probe, "_run_child", child)
    with pytest.raises(probe.ProbeFailed) as failed:
        probe.run_probe(
            ["tests"], good="a" * 40, head="b" * 40, budget_s=1.0, threshold=0.03, cwd=tmp_path
        )
    line = str(failed.value)
    assert line.startswith("the probe of bbbbbbbbbbbb wrote a report bisect cannot read: ")
    assert words in line and "\n" not in line, line


def test_the_reader_knows_every_ab_state_the_gate_writes():
    """The states the field checks accept stand beside the words they list
    (record/checks.py): a state added there and not to AB_STATES would make every report
    that holds it unreadable."""
    from pytest_gpuperf.record import checks

    states = {
        value
        for name, value in vars(checks).items()
        if name.startswith("AB_") and isinstance(value, str)
    }
    assert set(checks.AB_STATES) == states
