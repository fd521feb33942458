"""No output command writes over a baseline file, wherever it is: publish -o, compare
--markdown, merge's outputs, bisect's --json and the pytest run's reports all ask one check
(record/files.py's `Guarded.owner`, by the file's content), so a baseline outside ./baselines
(another checkout's, a --gpuperf-baseline-dir, a copy under any name) is one line, exit 2, and
is left byte for byte as it was."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pytest_gpuperf import compare
from pytest_gpuperf.commands.merge import __main__ as merge
from pytest_gpuperf.commands.publish.__main__ import main as publish
from pytest_gpuperf.record.files import Guarded, output_problem
from tests.dashboard_history import make_history

REPO = Path(__file__).resolve().parents[2]
HAND_WRITTEN = 'schema = 2\ndevice = "h100-sxm"\n\n[[entry]]\nid = "t.py::t"\n'
CONFLICTED = (
    'schema = 2\ndevice = "mi300x"\n<<<<<<< HEAD\n[[entry]]\nid = "a"\n=======\n'
    '[[entry]]\nid = "b"\n>>>>>>> branch\n'
)


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> tuple[Path, list[Path]]:
    return make_history(tmp_path_factory.mktemp("history"), measurements=3, runs=3)


@pytest.fixture
def stored(tmp_path, monkeypatch) -> list[Path]:
    """Store files outside ./baselines, in a folder the command is not run from: a saved
    baseline under a .toml name and under another, one by hand, one mid-merge, static facts."""
    elsewhere = tmp_path / "other-checkout" / "perf-data"
    elsewhere.mkdir(parents=True)
    files = [elsewhere / "h100-sxm.toml", elsewhere / "copy-of-baselines.html"]
    for path in files:
        shutil.copyfile(REPO / "baselines" / "h100-sxm.toml", path)
    (elsewhere / "by-hand.md").write_text(HAND_WRITTEN)
    (elsewhere / "conflicted.toml").write_text(CONFLICTED)
    shutil.copyfile(REPO / "baselines" / "static" / "gfx942.toml", elsewhere / "facts.toml")
    files += [elsewhere / "by-hand.md", elsewhere / "conflicted.toml", elsewhere / "facts.toml"]
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return files


def refused(capsys, code: int, option: str, target: Path) -> None:
    out = capsys.readouterr()
    assert code == 2, out
    lines = out.err.splitlines()
    assert len(lines) == 1 and "Traceback" not in out.err, out.err
    assert f"{option} {target}" in lines[0] or f"{option}={target}" in lines[0], lines[0]
    assert "(by its content)" in lines[0], lines[0]


def test_publish_never_writes_over_a_baseline_anywhere(history, stored, capsys):
    baseline, reports = history
    before = {path: path.read_bytes() for path in stored}
    for target in stored:
        refused(capsys, publish([str(baseline), str(reports[0]), "-o", str(target)]), "-o", target)
    assert {path: path.read_bytes() for path in stored} == before


def test_compare_never_writes_over_a_baseline_anywhere(history, stored, capsys):
    _, reports = history
    before = {path: path.read_bytes() for path in stored}
    for target in stored:
        code = compare.main([str(reports[0]), str(reports[1]), "--markdown", str(target)])
        refused(capsys, code, "--markdown", target)
    assert {path: path.read_bytes() for path in stored} == before


def test_merge_never_writes_over_a_baseline_anywhere(history, stored, capsys):
    _, reports = history
    before = {path: path.read_bytes() for path in stored}
    for option in ("--json", "--markdown", "--junit"):
        target = stored[1]  # not a .toml name: only its content says what it is
        code = merge.main([str(reports[0]), str(reports[1]), f"{option}={target}"])
        refused(capsys, code, option, target)
    assert {path: path.read_bytes() for path in stored} == before


def test_bisect_and_the_runs_reports_ask_the_same_check(stored, tmp_path):
    guards = Guarded(tmp_path / "baselines", tmp_path / "locks", tmp_path / "cache")
    for target in stored:
        assert "(by its content)" in output_problem(target)  # bisect's --json
        assert "(by its content)" in guards.owner(target)  # --gpuperf-json, --junitxml, merge


def test_other_files_stay_writable(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "1"\n')
    (tmp_path / "page.html").write_text("<html>schema = 2</html>\n")
    for name in ("pyproject.toml", "page.html", "new.md"):
        assert output_problem(tmp_path / name) == "", name
