"""bench/real_ops.py and the harness it stands on (bench/lab/): the scratch repositories it
builds (a release vendored from a wheel or a folder, torch's edited test), one op's outcome
at each gate from a report read back through the plugin's reader, pytest's JUnit XML, the
table, and the hard bound on a process. The GPU run itself is the lead's (docs/benchmarks.md,
"Real library ops"); the slow test below runs the script where torch is missing."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from pytest_gpuperf.record.checks import BaselineCheck, ComparisonCheck
from pytest_gpuperf.record.meta import ReportMeta
from pytest_gpuperf.record.verdict import Row, SaveAction, Verdict
from pytest_gpuperf.report.json_document import to_json
from tests.bench_scripts import load_script
from tests.git_repo import git
from tests.records import measurement

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "real_ops.py"


def _bench():
    return load_script("real_ops")


def _runs():
    _bench()  # puts bench/ on sys.path
    from lab import pytest_runs

    return pytest_runs


def _row(name: str, **verdict) -> Row:
    m = measurement(
        0.8, time_s=2e-4, name=name, queue_method="as it runs (host syncs)", started_s=100.0,
        ended_s=100.5, wall_s=0.7,
    )  # fmt: skip
    verdict.setdefault("baseline", BaselineCheck(outcome="no-baseline"))
    return Row(
        f"test_ops.py::test_{name}", m, Verdict(status=verdict.pop("status", "pass"), **verdict)
    )


def _read_back(tmp_path: Path, rows: list[Row]):
    """The rows as a report file, read back through the plugin's one reader."""
    path = tmp_path / "report.json"
    path.write_text(json.dumps(to_json(rows, ReportMeta(commit="c0ffee"))))
    report, problem = _runs().read_report(path)
    assert problem == ""
    return report


def test_each_gate_reads_its_own_check_from_a_report(tmp_path):
    bench, runs = _bench(), _runs()
    stored = BaselineCheck(outcome="regressed", delta=-0.031, allowance=0.012)
    comparison = ComparisonCheck(
        state="improved", ref="HEAD~1", threshold=0.005, ratio=0.71, ratio_ci=(0.70, 0.72)
    )
    traffic = {"problem": "", "lines": ["head moved +0.1% DRAM bytes: read +0.1% (1 -> 1 MB)"]}
    report = _read_back(
        tmp_path,
        [
            _row("saved", save=SaveAction(saved=True, path="b.toml", device_key="h200")),
            _row("judged", status="fail", baseline=stored),
            _row("compared", comparison=comparison),
            _row("explained", explain={"traffic": traffic}),
            _row("unprofiled", explain={"traffic": {"problem": "ncu: ERR_NVGPUCTRPERM"}}),
        ],
    )
    by_name = {row.measurement.name: [row] for row in report.rows}
    said = bench.outcome("save2", None, by_name["saved"])
    assert said[0] == "pass" and said[1].startswith("saved; 200.0 us, 80.0% of peak, as it runs")
    assert bench.outcome("judge", None, by_name["judged"]) == (
        "regressed", "-3.10% (allowance 1.20%); 200.0 us, 80.0% of peak, as it runs (host syncs)"
    )  # fmt: skip
    assert bench.outcome("ab", None, by_name["compared"]) == (
        "improved", "ratio 0.7100 [0.7000, 0.7200]"
    )  # fmt: skip
    assert bench.outcome("explain", None, by_name["explained"]) == (
        "explained",
        traffic["lines"][0],
    )
    assert bench.outcome("explain", None, by_name["unprofiled"]) == (
        "unexplained", "ncu: ERR_NVGPUCTRPERM"
    )  # fmt: skip
    assert bench.outcome("measure", None, by_name["saved"])[0] == "pass"
    # a stored check with no baseline says so, not "pass"
    assert bench.outcome("judge", None, by_name["saved"])[0] == "no baseline"
    assert runs.Run("x", 0, 1.0, "", report=report).rows_of("test_compared") == by_name["compared"]


def test_an_op_without_a_measurement_says_why_in_one_line():
    bench, runs = _bench(), _runs()
    case = runs.Case
    assert bench.outcome("smoke", case("t", "passed"), []) == ("pass", "")
    assert bench.outcome("measure", case("t", "passed"), []) == (
        "unmeasured", "passed without a measurement"
    )  # fmt: skip
    assert bench.outcome("ab", case("t", "skipped", "needs liger-kernel"), []) == (
        "skipped", "needs liger-kernel"
    )  # fmt: skip
    refused = case("t", "failed", "gpu_bench.run refused ce_fwd: it synchronises the host")
    assert bench.outcome("measure", refused, [])[0] == "refused"
    assert bench.outcome("measure", case("t", "failed", "AssertionError: x"), [])[0] == "fail"
    assert bench.outcome("ab", None, []) == ("missing", "not in the run's JUnit report")
    unjudged = _row("k", status="unjudged")
    assert bench.outcome("ab", case("t", "failed", "Mismatched elements: 3"), [unjudged]) == (
        "unjudged", "Mismatched elements: 3"
    )  # fmt: skip


def test_a_process_killed_at_its_bound_is_a_row_for_each_op():
    bench, runs = _bench(), _runs()
    killed = runs.Run("ab", None, 300.2, "sampling...", problem="killed at its bound of 300 s")
    rows = bench.op_rows("liger", "ab", killed, ["test_ce", "test_rope"])
    assert [(r.op, r.outcome, r.detail) for r in rows] == [
        ("test_ce", "timeout", "killed at its bound of 300 s"),
        ("test_rope", "timeout", "killed at its bound of 300 s"),
    ]
    crashed = runs.Run("smoke", 2, 3.0, "E   ImportError: flag_gems\nERROR collecting\n")
    assert bench.op_rows("flaggems", "smoke", crashed, ["test_softmax"])[0].outcome == "fail"


def test_rows_carry_the_tests_wall_and_the_gpu_lock_of_its_measurements(tmp_path):
    bench, runs = _bench(), _runs()
    report = _read_back(tmp_path, [_row("ce")])
    run = runs.Run(
        "measure",
        0,
        9.0,
        "",
        report=report,
        cases={"test_ce": runs.Case("test_ce", "passed", "", 1.25)},
    )
    (row,) = bench.op_rows("liger", "measure", run, ["test_ce"])
    assert (row.wall_s, row.lock_s) == (1.25, 0.5)
    table = bench.render([row])
    assert table.splitlines()[0].split() == [
        "library",
        "op",
        "gate",
        "outcome",
        "wall",
        "s",
        "GPU",
        "lock",
        "s",
        "why",
    ]
    assert "liger" in table.splitlines()[2] and "1.25" in table and "0.50" in table
    line = bench.summary([row, dataclasses.replace(row, gate="ab", outcome="improved")], [run])
    assert line == (
        "1 ops x 2 gates, 1 processes: 1 pass, 1 improved; 0 killed at their bound; wall 9 s, "
        "GPU lock 0.0 s"
    )


def test_junit_cases_name_each_test_and_a_module_skipped_whole(tmp_path):
    runs = _runs()
    path = tmp_path / "junit.xml"
    path.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="test_a" name="test_ok[8192]" time="1.5"/>'
        '<testcase classname="test_a" name="test_bad" time="2.0">'
        '<failure message="AssertionError: Tensor-likes are not close!">trace</failure></testcase>'
        '<testcase classname="test_a" name="test_skip" time="0.0">'
        '<skipped type="pytest.skip" message="needs FlagGems (pip install flag-gems)">x</skipped>'
        "</testcase>"
        '<testcase classname="" name="test_whole" time="0.0"><skipped message="collection skipped">'
        "('/tmp/r/test_whole.py', 22, 'Skipped: needs a CUDA GPU (torch.cuda.is_available() is"
        " False)')</skipped></testcase>"
        '<testcase classname="" name="test_broken" time="0.0"><error message="collection failure">'
        "Traceback\nRuntimeError: No device were detected on your machine !</error></testcase>"
        "</testsuite></testsuites>"
    )
    cases = runs.read_junit(path)
    assert cases["test_ok"] == runs.Case("test_ok", "passed", "", 1.5)
    assert cases["test_bad"].status == "failed"
    assert cases["test_bad"].message == "AssertionError: Tensor-likes are not close!"
    assert cases["test_skip"].message == "needs FlagGems (pip install flag-gems)"
    assert cases["test_whole"].message == "needs a CUDA GPU (torch.cuda.is_available() is False)"
    assert cases["test_broken"].status == "error"
    assert cases["test_broken"].message == "RuntimeError: No device were detected on your machine !"
    assert runs.read_junit(tmp_path / "absent.xml") == {}


def _wheel(path: Path, package: str, version: str) -> Path:
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(f"{package}/__init__.py", f"VERSION = {version!r}\n")
        wheel.writestr(f"{package}/ops/kernel.py", "def op():\n    return 1\n")
        wheel.writestr(f"{package}-{version}.dist-info/METADATA", "Name: x\n")
    return path


def test_a_release_is_vendored_from_a_wheel_or_a_folder(tmp_path):
    _bench()  # puts bench/ on sys.path
    from lab import projects as runs  # the vendoring is lab's

    root = tmp_path / "repo"
    runs.vendor(_wheel(tmp_path / "lib-1.0-py3-none-any.whl", "lib", "1.0"), "lib", root)
    assert (root / "vendor/lib/__init__.py").read_text() == "VERSION = '1.0'\n"
    assert not (root / "vendor/lib-1.0.dist-info").exists()  # the package only
    unpacked = tmp_path / "unpacked"
    (unpacked / "lib").mkdir(parents=True)
    (unpacked / "lib/__init__.py").write_text("VERSION = '2.0'\n")
    (unpacked / "lib-2.0.dist-info").mkdir()
    runs.vendor(unpacked, "lib", root)  # replaces what was there
    assert (root / "vendor/lib/__init__.py").read_text() == "VERSION = '2.0'\n"
    assert not (root / "vendor/lib/ops").exists()
    assert runs.release_name(unpacked, "lib") == "lib-2.0"
    source_tree = tmp_path / "checkout"
    (source_tree / "src/lib").mkdir(parents=True)
    (source_tree / "src/lib/__init__.py").write_text("VERSION = '3.0'\n")
    runs.vendor(source_tree, "lib", root)
    runs.vendor(source_tree / "src" / "lib", "lib", root)
    assert (root / "vendor/lib/__init__.py").read_text() == "VERSION = '3.0'\n"
    with pytest.raises(
        SystemExit, match=r"neither a wheel nor a folder holding other/__init__\.py"
    ):
        runs.vendor(tmp_path / "checkout" / "src", "other", root)
    with pytest.raises(SystemExit, match="a wheel without other/"):
        runs.vendor(tmp_path / "lib-1.0-py3-none-any.whl", "other", root)


def test_the_repository_commits_the_older_release_then_the_newer(tmp_path, monkeypatch):
    bench = _bench()
    monkeypatch.setitem(bench.LIBRARIES, "lib", ("lib", "test_torch_ops.py"))
    old = _wheel(tmp_path / "lib-1.0-py3-none-any.whl", "lib", "1.0")
    new = _wheel(tmp_path / "lib-2.0-py3-none-any.whl", "lib", "2.0")
    root = tmp_path / "repo"
    bench.build_repository(root, "lib", (old, new), budget_s=0.25)
    assert git(root, "show", "HEAD~1:vendor/lib/__init__.py") == "VERSION = '1.0'"
    assert git(root, "show", "HEAD:vendor/lib/__init__.py") == "VERSION = '2.0'"
    assert (
        git(root, "log", "--format=%s")
        == "vendor lib-2.0-py3-none-any.whl\nvendor lib-1.0-py3-none-any.whl"
    )
    ini = (root / "pytest.ini").read_text()
    assert "pythonpath = vendor" in ini and "gpuperf_budget = 0.25" in ini
    assert (root / "conftest.py").read_text() == (
        REPO / "tests/gpu/real_ops/conftest.py"
    ).read_text()
    assert git(root, "status", "--porcelain") == ""


def test_torch_ab_compares_the_test_file_with_its_edit(tmp_path):
    bench = _bench()
    root = tmp_path / "repo"
    bench.build_repository(root, "torch", None, budget_s=0.25)
    before = git(root, "show", "HEAD~1:test_torch_ops.py")
    after = (root / "test_torch_ops.py").read_text()
    assert before == (REPO / "tests/gpu/real_ops/test_torch_ops.py").read_text().rstrip("\n")
    assert "half of the work once more" in after and "ids.unique(return_counts=True)" in after
    ast.parse(after)  # still a module
    with pytest.raises(SystemExit, match="expected 'nothing' once"):
        bench.edited(after, (("nothing", "x"),))


def test_a_process_past_its_bound_is_killed_with_what_it_started(tmp_path):
    _bench()  # puts bench/ on sys.path
    from lab import children  # the bound on a process is lab's

    marker = tmp_path / "grandchild-alive"
    late = tmp_path / "late.py"
    late.write_text(f"import time\ntime.sleep(3)\nopen({str(marker)!r}, 'w')\n")
    script = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, {str(late)!r}])\n"
        "print('started', flush=True)\n"
        "time.sleep(60)\n"
    )
    started = time.monotonic()
    done = children.run([sys.executable, "-c", script], cwd=tmp_path, env={}, timeout_s=1.0)
    code, output, wall_s = done.returncode, done.output, done.wall_s
    assert code is None and "started" in output
    assert wall_s < 10 and time.monotonic() - started < 10
    time.sleep(3.5)
    assert not marker.exists()  # the grandchild went with its group


@pytest.mark.slow
def test_the_script_runs_every_gate_as_a_row_where_torch_is_missing(tmp_path):
    if importlib.util.find_spec("torch") is not None:
        pytest.skip("torch is installed here: the corpus's own run is the GPU machine's")
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--torch", "--gates", "smoke,measure", "--out", str(out),
         "--timeout", "120"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[-1].startswith("1 ops x 2 gates, 2 processes: 2 skipped; 0 killed")
    said = [line for line in lines if "needs torch (pip install torch)" in line]
    assert len(said) == 2 and all("torch_ops" in line for line in said)  # as each gate ends
    assert lines[-2].split() == ["torch", "torch_ops", "skipped", "skipped", "0.00", "-"]
    assert (out / "table.txt").read_text().count("needs torch (pip install torch)") == 2
    rows = json.loads((out / "rows.json").read_text())
    assert [r["gate"] for r in rows] == ["smoke", "measure"]
    assert (out / "torch" / "smoke.xml").is_file() and (out / "torch" / "measure.log").is_file()


def test_each_process_runs_the_options_of_the_gates_asked_for(tmp_path, monkeypatch):
    bench, runs = _bench(), _runs()
    seen = []

    def fake_run(root, test_name, options, out, label, timeout_s):
        seen.append((label, options))
        cases = {"test_softmax": runs.Case("test_softmax", "passed")}
        return runs.Run(label, 0, 1.0, "", cases=cases)

    monkeypatch.setattr(bench, "run_test_file", fake_run)
    monkeypatch.setattr(bench, "build_repository", lambda *args: None)
    args = bench.parse(
        ["--torch", "--gates", "save,judge", "-k", "softmax", "--out", str(tmp_path / "o")]
    )
    rows, ran = bench.run_library("torch", None, args, tmp_path)
    assert seen == [
        ("save1", ("--gpuperf-save", "-k", "softmax")),
        ("save2", ("--gpuperf-save", "-k", "softmax")),
        ("save3", ("--gpuperf-save", "-k", "softmax")),
        ("judge", ("--gpuperf", "-k", "softmax")),  # no explain pass: not asked for
    ]
    assert [row.gate for row in rows] == ["save1", "save2", "save3", "judge"]
    assert [row.outcome for row in rows] == ["unmeasured"] * 4 and len(ran) == 4
    seen.clear()
    args = bench.parse(
        ["--torch", "--gates", "explain", "-k", "softmax or unique", "--explain-k", "softmax",
         "--out", str(tmp_path / "o")]
    )  # fmt: skip
    rows, _ = bench.run_library("torch", None, args, tmp_path)
    # the explain pass in a process of its own (its cost must not take the judge's rows), on
    # the ops --explain-k picks
    assert seen == [("explain", (*bench.EXPLAIN, "-k", "softmax"))]
    assert [row.gate for row in rows] == ["explain"]
    seen.clear()
    args = bench.parse(
        ["--torch", "--gates", "smoke,ab", "--deadline", "25", "--out", str(tmp_path / "o")]
    )
    args.started -= 10  # 15 s of the deadline left: less than a process is given
    rows, ran = bench.run_library("torch", None, args, tmp_path)
    assert seen == [] and ran == []
    assert [(row.gate, row.op, row.outcome) for row in rows] == [
        ("smoke", "(all)", "not run"),
        ("ab", "(all)", "not run"),
    ]
    with pytest.raises(SystemExit):
        bench.parse(["--torch", "--gates", "smoke,bogus"])
    with pytest.raises(SystemExit):
        bench.parse(["--gates", "smoke"])  # no library named


def test_the_closing_table_is_one_line_per_op_with_a_column_per_gate():
    bench = _bench()
    row = bench.OpRow
    rows = [
        row("liger", "test_ce", "smoke", "pass", "", 2.0, None),
        row("liger", "test_ce", "ab", "improved", "ratio 0.9", 5.5, 0.75),
        row("liger", "test_rope", "smoke", "skipped", "needs x", 0.0, None),
    ]
    lines = bench.pivot(rows).splitlines()
    assert lines[0].split() == ["library", "op", "smoke", "ab", "wall", "s", "(max)", "GPU",
                                "lock", "s", "(max)"]  # fmt: skip
    assert lines[2].split() == ["liger", "ce", "pass", "improved", "5.50", "0.75"]
    assert lines[3].split() == ["liger", "rope", "skipped", "-", "0.00", "-"]


def test_an_op_the_explain_gate_did_not_select_is_not_run_not_a_failure():
    # on an H200 the ops --explain-k left out read "fail" with pytest's "1 passed, 3 deselected"
    bench, runs = _bench(), _runs()
    run = runs.Run("explain", 0, 1.0, "1 passed, 3 deselected", cases={
        "test_softmax": runs.Case("test_softmax", "passed"),
    })  # fmt: skip
    rows = bench.op_rows("flaggems", "explain", run, ["test_softmax", "test_layer_norm"])
    assert [(row.op, row.outcome) for row in rows][1] == ("test_layer_norm", "not run")
