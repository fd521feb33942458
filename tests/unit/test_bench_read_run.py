"""bench/lab/runs.py read_run: every bench script reads a run back (--render, --from-json,
--compare, --merge, --plan-from) through it, and a file that is missing or is not a run ends
the script with one line naming the file, never a traceback. Raw runs are kept out of the
repository, so a path copied from the docs is often missing."""

from __future__ import annotations

import re

import pytest

from tests.bench_scripts import BENCH, load_script


def _one_line_exit(call) -> str:
    with pytest.raises(SystemExit) as exited:
        call()
    message = str(exited.value.code)
    assert "\n" not in message and "Traceback" not in message
    return message


def test_a_missing_run_names_the_file_and_where_raw_runs_are(tmp_path):
    common = load_script("lab_runs", BENCH / "lab" / "runs.py")
    missing = tmp_path / "stored-noise-h100-2026-11-27.json"
    message = _one_line_exit(lambda: common.read_run(missing))
    assert message.startswith(f"{missing}: cannot read the run (No such file or directory)")
    assert "docs/benchmarks.md, 'Raw runs'" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"runs": [', "not a run's JSON (line 1: Expecting value)"),
        ("[1, 2]", "not a run's JSON (a list, not an object)"),
        ("", "not a run's JSON (line 1: Expecting value)"),
    ],
)
def test_a_file_that_is_not_a_run_is_one_line(tmp_path, text, expected):
    common = load_script("lab_runs", BENCH / "lab" / "runs.py")
    path = tmp_path / "run.json"
    path.write_text(text)
    assert _one_line_exit(lambda: common.read_run(path)) == f"{path}: {expected}"
    assert path.read_text() == text  # left as it was


def test_a_run_reads_back_as_written(tmp_path):
    common = load_script("lab_runs", BENCH / "lab" / "runs.py")
    path = tmp_path / "out" / "run.json"
    common.write_json(str(path), {"runs": [1.5, "x"]})
    assert common.read_run(path) == {"runs": [1.5, "x"]}


@pytest.mark.parametrize(
    "script", ["stored_lengths", "main_job", "vs_pytest_benchmark", "gate_quality"]
)
def test_render_of_a_missing_run_is_one_line_from_the_command(script, tmp_path, capsys):
    module = load_script(script)
    missing = tmp_path / "missing.json"
    message = _one_line_exit(lambda: module.main(["--render", str(missing)]))
    assert message.startswith(f"{missing}: cannot read the run")
    assert capsys.readouterr().out == ""


def test_every_script_reads_a_run_given_on_its_command_line_through_read_run():
    direct = re.compile(r"json\.loads\(.*options\..*read_text\(\)")  # not --worker's JSON text
    offenders = [
        f"{path.relative_to(BENCH)}:{number}"
        for path in sorted(BENCH.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if direct.search(line)
    ]
    assert not offenders, offenders
