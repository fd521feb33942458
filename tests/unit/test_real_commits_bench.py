"""bench/real_commits.py: the truth's ratio and interval from interleaved rounds, the rule
that says whether the A/B gate agrees with it, a gate's row from its report, the export of
each commit and its parent from a git mirror (`prepare`), and the loading of two revisions
of one library in one process. The GPU run is the lead's (docs/benchmarks.md, "Real commits
against the truth")."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_gpuperf.record.checks import BaselineCheck, ComparisonCheck
from pytest_gpuperf.record.verdict import Row, Verdict
from tests.bench_scripts import load_script
from tests.git_repo import commit_all
from tests.records import measurement


def _bench():
    return load_script("real_commits")


def test_the_truth_is_the_geometric_mean_of_the_rounds_ratios_with_a_t_interval():
    bench = _bench()
    steady = bench.truth_from_times([1.0] * 8, [0.3] * 8)
    assert steady.ratio == pytest.approx(0.3) and steady.low == pytest.approx(0.3)
    assert steady.rounds == 8
    noisy = bench.truth_from_times([1.0, 1.0, 1.0, 1.0], [1.01, 0.99, 1.02, 0.98])
    logs = [math.log(x) for x in (1.01, 0.99, 1.02, 0.98)]
    assert noisy.ratio == pytest.approx(math.exp(sum(logs) / 4))
    # t(0.975, 3) = 3.182: the interval is wide with four rounds
    assert noisy.low < 0.98 and noisy.high > 1.02
    back = steady.reversed()
    assert back.ratio == pytest.approx(1 / 0.3) and back.low <= back.ratio <= back.high


def _truth(low: float, high: float):
    return _bench().Truth(math.sqrt(low * high), low, high, 8)


def test_the_gate_agrees_where_the_truth_is_clear_of_the_threshold_and_either_way_across_it():
    bench = _bench()
    t = 0.005
    assert bench.expected_states(_truth(0.28, 0.31), t) == ({"improved"}, True)
    assert bench.expected_states(_truth(3.2, 3.6), t) == ({"regressed"}, True)
    assert bench.expected_states(_truth(0.998, 1.003), t) == ({"pass"}, True)
    grey, clear = bench.expected_states(_truth(0.990, 0.999), t)
    assert (grey, clear) == ({"pass", "inconclusive", "improved"}, False)
    assert bench.agreement("improved", _truth(0.28, 0.31), t) == "agrees"
    assert bench.agreement("pass", _truth(0.28, 0.31), t) == "DISAGREES (truth: improved)"
    assert bench.agreement("inconclusive", _truth(3.2, 3.6), t) == "DISAGREES (truth: regressed)"
    assert bench.agreement("regressed", _truth(0.998, 1.003), t) == "DISAGREES (truth: pass)"
    assert bench.agreement("inconclusive", _truth(0.990, 0.999), t).startswith("agrees (grey")
    assert bench.agreement("pass", None, t) == "no truth"
    # the gate's own interval (+-0.3%) widens what it can be asked: a truth 0.6% slow is past
    # the threshold but within its reach, so inconclusive agrees; 1.2% slow is clear of both
    assert bench.expected_states(_truth(1.006, 1.007), t) == ({"regressed"}, True)
    assert bench.agreement("inconclusive", _truth(1.006, 1.007), t, noise=0.003).startswith(
        "agrees (grey"
    )
    assert bench.agreement("inconclusive", _truth(1.012, 1.013), t, noise=0.003).startswith("DIS")
    # a gate whose interval is wider than the threshold is never asked for a plain pass
    assert bench.expected_states(_truth(0.999, 1.001), t, noise=0.006)[1] is False


def _run(*rows, returncode=1, problem=""):
    report = SimpleNamespace(rows=list(rows), document={}) if rows else None
    return SimpleNamespace(report=report, returncode=returncode, problem=problem, cases={},
                           wall_s=12.5)  # fmt: skip


def test_a_gate_row_reads_the_comparison_and_judges_it_against_the_truth():
    bench = _bench()
    comparison = ComparisonCheck(
        state="improved", ref="HEAD~1", threshold=0.006, ratio=0.31, ratio_ci=(0.30, 0.32)
    )
    verdict = Verdict(status="pass", baseline=BaselineCheck(outcome="no-baseline"),
                      comparison=comparison)  # fmt: skip
    row = Row("t.py::test_x", measurement(0.5, time_s=3e-4), verdict, "passed")
    truth = _truth(0.29, 0.31)
    made = bench.gate_row("b7025a70", "commit", _run(row), truth)
    assert (made.state, made.ratio, made.ratio_ci, made.threshold) == (
        "improved", 0.31, (0.30, 0.32), 0.006
    )  # fmt: skip
    assert made.agreement == "agrees"
    killed = bench.gate_row("b7025a70", "revert", _run(returncode=None, problem="killed at 300 s"),
                            truth.reversed())  # fmt: skip
    assert (killed.state, killed.detail) == ("timeout", "killed at 300 s")
    assert killed.agreement.startswith("DISAGREES")
    table = bench.render([made, killed])
    assert "0.3100" in table and "[0.3000, 0.3200]" in table and "timeout" in table
    assert bench.summary([made, killed]) == "1 of 2 directions agree with the truth (0 grey)"


def test_prepare_exports_each_commit_and_its_parent_from_the_mirror(tmp_path, monkeypatch):
    bench = _bench()
    mirror = tmp_path / "liger"
    package = mirror / "src" / "liger_kernel"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("SIDE = 'parent'\n")
    (mirror / "README.md").write_text("not exported\n")
    commit_all(mirror, "parent")
    (package / "__init__.py").write_text("SIDE = 'commit'\n")
    commit_all(mirror, "the commit")
    commit = bench.Commit("c1", "HEAD~1", "HEAD", "test_commit_dyt_fwd.py", "a commit")
    monkeypatch.setattr(bench, "COMMITS", (commit,))
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "lib-1.0-py3-none-any.whl").write_bytes(b"PK")
    out = tmp_path / ".realops" / "liger"
    listed = bench.prepare(mirror / ".git", out, wheels)
    (entry,) = listed
    assert entry["name"] == "c1" and entry["base_dir"] != entry["head_dir"]
    assert (out / entry["base_dir"] / "src/liger_kernel/__init__.py").read_text() == (
        "SIDE = 'parent'\n"
    )  # fmt: skip
    assert (out / entry["head_dir"] / "src/liger_kernel/__init__.py").read_text() == (
        "SIDE = 'commit'\n"
    )  # fmt: skip
    assert not (out / entry["head_dir"] / "README.md").exists()
    assert json.loads((out / "commits.json").read_text()) == listed
    assert (tmp_path / ".realops" / "whl" / "lib-1.0-py3-none-any.whl").read_bytes() == b"PK"
    assert bench.prepare(mirror / ".git", out, None) == listed  # again: nothing to redo
    monkeypatch.setattr(bench, "COMMITS", (bench.Commit("c2", "nope~1", "nope", "t.py", ""),))
    with pytest.raises(SystemExit, match="git rev-parse nope~1"):
        bench.prepare(mirror / ".git", out, None)


def test_two_revisions_of_the_library_load_side_by_side_in_one_process(tmp_path):
    bench = _bench()
    test = tmp_path / "test_case.py"
    test.write_text("from liger_kernel.ops import side\n\n\ndef case():\n    return side()\n")
    folders = {}
    for tag in ("base", "head"):
        package = tmp_path / tag / "liger_kernel"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "ops.py").write_text(f"def side():\n    return {tag!r}\n")
        folders[tag] = tmp_path / tag
    loaded = {tag: bench.load_side(folder, test, tag) for tag, folder in folders.items()}
    assert loaded["base"][0].case() == "base" and loaded["head"][0].case() == "head"
    assert "liger_kernel" not in sys.modules and str(folders["head"]) not in sys.path
    for tag, (_, side) in loaded.items():
        assert Path(side.modules["liger_kernel.ops"].__file__).parent.parent == folders[tag]
    # a lazy import made while a side is active comes from that side and stays with it
    (folders["head"] / "liger_kernel" / "late.py").write_text("WHO = 'head'\n")
    with bench.active(loaded["head"][1]):
        import liger_kernel.late  # noqa: F401

        assert sys.path[0] == str(folders["head"])
    assert "liger_kernel.late" in loaded["head"][1].modules and "liger_kernel" not in sys.modules
    assert "liger_kernel.late" not in loaded["base"][1].modules
    with pytest.raises(SystemExit, match="came from"):
        bench.load_side(tmp_path / "nowhere", _installed_elsewhere(tmp_path), "other")


def _installed_elsewhere(tmp_path: Path) -> Path:
    """A test whose library import finds the package somewhere other than its vendor folder
    (what an installed copy shadowing the vendored one would look like)."""
    elsewhere = tmp_path / "site" / "liger_kernel"
    elsewhere.mkdir(parents=True)
    (elsewhere / "__init__.py").write_text("")
    test = tmp_path / "test_elsewhere.py"
    test.write_text(
        f"import sys\nsys.path.insert(0, {str(elsewhere.parent)!r})\nimport liger_kernel\n"
        f"sys.path.remove({str(elsewhere.parent)!r})\n"
    )
    return test


def test_the_truth_times_each_side_under_its_own_library_interleaved(tmp_path, monkeypatch):
    """measure_truth with do_bench and torch's synchronize stood in for (no GPU here): each
    side's call runs with its own revision active, the rounds alternate which goes first."""
    bench = _bench()
    test = tmp_path / "test_case.py"
    test.write_text(
        "from types import SimpleNamespace\n\nfrom liger_kernel.ops import side\n\n\n"
        "def case():\n    return SimpleNamespace(fn=side)\n"
    )
    for tag in ("base", "head"):
        package = tmp_path / tag / "liger_kernel"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "ops.py").write_text(
            "import sys\n\n\ndef side():\n"
            f"    assert sys.modules['liger_kernel.ops'].__file__ == __file__\n    return {tag!r}\n"
        )
    order = []

    def do_bench(fn, warmup, rep):
        order.append(fn())
        return {"base": 2.0, "head": 1.5}[order[-1]]

    triton = SimpleNamespace(testing=SimpleNamespace(do_bench=do_bench))
    monkeypatch.setitem(
        sys.modules, "torch", SimpleNamespace(cuda=SimpleNamespace(synchronize=lambda: None))
    )
    monkeypatch.setitem(sys.modules, "triton", triton)
    monkeypatch.setitem(sys.modules, "triton.testing", triton.testing)
    args = SimpleNamespace(test=str(test), base=str(tmp_path / "base"), head=str(tmp_path / "head"),
                           rounds=8, warmup_ms=1.0, rep_ms=1.0)  # fmt: skip
    found = bench.measure_truth(args)
    assert order[:4] == ["base", "head", "head", "base"] and len(order) == 16
    assert found["ratio"] == pytest.approx(0.75) and found["rounds"] == 8
    assert found["base_ms"] == [2.0] * 8 and found["head_file"].startswith(str(tmp_path / "head"))
    assert "liger_kernel" not in sys.modules


def test_no_process_starts_past_the_deadline(tmp_path, monkeypatch):
    bench = _bench()
    from lab import cli  # the deadline is lab's (lab.cli.time_left)

    started = []
    monkeypatch.setattr(bench, "run_test_file", lambda *args: started.append(args))
    monkeypatch.setattr(bench, "run_command", lambda *args: started.append(args))
    entry = {"name": "c1", "base_dir": "a", "head_dir": "b", "base_sha": "a", "head_sha": "b",
             "test": "test_commit_dyt_fwd.py"}  # fmt: skip
    for side in ("a", "b"):
        (tmp_path / "src" / side / "liger_kernel").mkdir(parents=True)
        (tmp_path / "src" / side / "liger_kernel" / "__init__.py").write_text("")
    args = SimpleNamespace(src=tmp_path / "src", out=tmp_path / "out", budget=0.5, rounds=8,
                           timeout=180.0, deadline=30.0, started=0.0, no_truth=False)  # fmt: skip
    monkeypatch.setattr(cli.time, "monotonic", lambda: 15.0)  # 15 s left of 30
    rows = bench.run_commit(entry, args, tmp_path / "work")
    assert started == []
    assert [(r.direction, r.state, r.agreement) for r in rows] == [
        ("commit", "not run", "not run"),
        ("revert", "not run", "not run"),
    ]
    monkeypatch.setattr(cli.time, "monotonic", lambda: 5.0)  # 25 s left: bounded by them
    assert bench.time_left(args) == 25.0
    args.deadline = math.inf
    assert bench.time_left(args) == 180.0
