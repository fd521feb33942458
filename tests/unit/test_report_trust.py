"""What a report says about itself decides nothing (issue 45 items 4, 5 and 12): compare and
merge decide from the numbers (an acceptance must name the test, a check that kept its entry
is decided again, a measurement gone from NEW is no pass), text from the files reaches no
terminal or Markdown raw, `-` is standard output, and SIGTERM leaves no temporary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_gpuperf.engine.plain import to_plain
from pytest_gpuperf.gate.decide import decide
from pytest_gpuperf.record.checks import BaselineCheck
from pytest_gpuperf.record.verdict import Acceptance, Row
from tests.dashboard_history import make_history
from tests.records import SIM_REFERENCE as REFERENCE

REPO = Path(__file__).resolve().parents[2]
ESC = "\x1b]0;owned\x07\x1b[2J"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, list[Path]]:
    """10 runs of 4 measurements: k003 regresses 5% in the last, accepted by a rule naming
    its test id."""
    return make_history(tmp_path_factory.mktemp("runs"), measurements=4, runs=10)


def _edit(source: Path, target: Path, edit) -> Path:
    document = json.loads(source.read_text())
    edit(document)
    target.write_text(json.dumps(document))
    return target


def _k003(document: dict) -> dict:
    return next(r for r in document["results"] if r["measurement"]["name"] == "k003")


def _compare(*args: str) -> int:
    from pytest_gpuperf.commands.compare import main

    return main(list(args))


# -- compare ---------------------------------------------------------------------------------


def test_an_accepted_slowdown_counts_only_with_a_rule_naming_the_test(runs, tmp_path, capsys):
    old, new = runs[1][0], runs[1][-1]
    assert _compare(str(old), str(new), "--fail-on-regression") == 0  # as the run accepted it
    capsys.readouterr()

    no_rule = _edit(
        new, tmp_path / "no-rule.json", lambda d: _k003(d)["verdict"].update(acceptance=None)
    )
    other = _edit(
        new,
        tmp_path / "other.json",
        lambda d: _k003(d)["verdict"]["acceptance"].update(pattern="no-such-test"),
    )
    for forged in (no_rule, other):
        assert _compare(str(old), str(forged), "--fail-on-regression") == 1, forged
        out = capsys.readouterr().out
        assert "1 slower," in out and "accepted" not in out.split("-\n")[-1], out


def test_a_measurement_gone_from_new_is_no_pass_unless_allowed(runs, tmp_path, capsys):
    """The regressed row removed from NEW: "gone", exit 0 before."""
    old, new = runs[1][0], runs[1][-1]
    gone = _edit(
        new,
        tmp_path / "gone.json",
        lambda d: d.update(results=[r for r in d["results"] if r is not _k003(d)]),
    )
    assert _compare(str(old), str(gone), "--fail-on-regression") == 1
    out = capsys.readouterr().out
    assert "1 gone" in out
    assert "gpuperf: FAILED: 1 measurement of OLD is missing from NEW (gone)" in out
    assert _compare(str(old), str(gone), "--fail-on-regression", "--allow-missing") == 0
    assert _compare(str(old), str(gone)) == 0  # without --fail-on-regression: shown only


def test_text_from_the_reports_is_printed_escaped(runs, tmp_path, capsys):
    """A test id holding ESC]0;...BEL retitled the terminal, ESC[2J cleared it."""

    def evil(document: dict) -> None:
        for result in document["results"]:
            result["test_id"] += ESC
        document["commit"]["id"] = ESC

    old = _edit(runs[1][0], tmp_path / "old.json", evil)
    new = _edit(runs[1][-1], tmp_path / "new.json", evil)
    markdown = tmp_path / "out.md"
    assert _compare(str(old), str(new), "--markdown", str(markdown)) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\\x1b]0;owned\\x07" in out
    assert "\x1b" not in markdown.read_text()


def test_markdown_to_dash_is_standard_output_not_a_file(runs, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _compare(str(runs[1][0]), str(runs[1][-1]), "--markdown", "-") == 0
    out = capsys.readouterr().out
    assert out.startswith("### pytest-gpuperf: two runs compared") and "| measurement |" in out
    assert os.listdir(tmp_path) == []


# -- merge -----------------------------------------------------------------------------------


def _merged(tmp_path: Path, row: Row):
    from pytest_gpuperf.commands.merge.shards import merge_reports, read_shard
    from tests.unit.test_merge_reports import _shard

    one, two = tmp_path / "1.json", tmp_path / "2.json"
    one.write_text(json.dumps(_shard(1)))
    two.write_text(json.dumps(_shard(2, tests=("b",), rows=[row])))
    return merge_reports([read_shard(one), read_shard(two)])


def test_merge_honours_no_acceptance_whose_pattern_names_no_test_of_the_run(tmp_path):
    from tests.unit.test_merge_reports import _row

    measured = _row("b")  # 75% against 90%: regressed beyond a 5% allowance
    check = BaselineCheck(outcome="regressed", baseline=REFERENCE, delta=-0.17, allowance=0.05)
    forged = Acceptance("no-such-test", "an intended slowdown", "--gpuperf-accept")
    verdict = decide(baseline=check, acceptance=forged)
    assert verdict.status == "accepted"  # what the forged shard says

    merged = _merged(tmp_path, Row("b", measured.measurement, verdict, "passed"))

    assert merged.verdict == "failed"
    assert any(
        "the report says accepted, its numbers say fail" in reason
        and "its accept rule 'no-such-test' does not name 'b'" in reason
        for reason in merged.reasons
    ), merged.reasons


def test_merge_honours_an_acceptance_that_names_the_test(tmp_path):
    from tests.unit.test_merge_reports import _row

    measured = _row("b")
    check = BaselineCheck(outcome="regressed", baseline=REFERENCE, delta=-0.17, allowance=0.05)
    verdict = decide(baseline=check, acceptance=Acceptance("b", "intended", "--gpuperf-accept"))
    merged = _merged(tmp_path, Row("b", measured.measurement, verdict, "passed"))
    assert merged.verdict == "passed", merged.reasons


@pytest.mark.parametrize("allowance", [0.05, None], ids=["allowance-kept", "allowance-removed"])
def test_merge_decides_a_check_edited_to_no_baseline_from_its_entry(tmp_path, allowance):
    from tests.unit.test_merge_reports import _row

    measured = _row("b")
    check = BaselineCheck(outcome="no-baseline", baseline=REFERENCE, allowance=allowance)
    verdict = decide(baseline=BaselineCheck(outcome="no-baseline"))
    verdict_json = to_plain(verdict) | {"baseline": to_plain(check)}
    from pytest_gpuperf.engine.plain import from_plain
    from pytest_gpuperf.record.verdict import Verdict

    row = Row("b", measured.measurement, from_plain(Verdict, verdict_json), "passed")
    merged = _merged(tmp_path, row)

    assert merged.verdict == "failed"
    assert any(
        "the report says pass, its numbers say fail (against the stored baseline it is "
        "regressed, not no-baseline)" in reason
        for reason in merged.reasons
    ), merged.reasons


# -- the Markdown summary ----------------------------------------------------------------------


def test_the_markdown_summary_writes_no_raw_escape(tmp_path):
    """The failure block (the failure and explain lines) wrote a test id's ESC raw."""
    from pytest_gpuperf import report
    from pytest_gpuperf.gate.stored import check_baseline
    from tests.unit.test_merge_reports import _row

    measured = _row("b")
    check = check_baseline(measured.measurement, REFERENCE, tolerance=0.01)
    row = Row(f"tests/test_k.py::test_k[{ESC}]", measured.measurement, decide(baseline=check))
    assert row.verdict.status == "fail"
    text = report.markdown([row])
    assert "#### Failures" in text
    assert "\x1b" not in text and "\x07" not in text and "\\x1b]0;owned" in text


# -- publish -----------------------------------------------------------------------------------


def test_publish_to_dash_writes_the_page_to_standard_output(runs, tmp_path, capsys, monkeypatch):
    from pytest_gpuperf.commands.publish.__main__ import main

    monkeypatch.chdir(tmp_path)
    baseline, reports = runs
    assert main([str(baseline), *map(str, reports), "-o", "-"]) == 0
    out = capsys.readouterr()
    assert out.out.lstrip().lower().startswith("<!doctype html>") and out.out.count("</html>") == 1
    assert "gpuperf: written: standard output (" in out.err
    assert os.listdir(tmp_path) == []


# -- SIGTERM while writing -----------------------------------------------------------------------

_STOPPED_MID_WRITE = textwrap.dedent(
    """
    import os, signal, sys

    real_chmod = os.chmod

    def chmod(path, mode, **kwargs):  # the temporary is written: SIGTERM before the rename
        if str(path).endswith(".tmp"):
            os.kill(os.getpid(), signal.SIGTERM)
        return real_chmod(path, mode, **kwargs)

    os.chmod = chmod
    command = sys.argv[1]
    if command == "publish":
        from pytest_gpuperf.commands.publish.__main__ import main
    else:
        from pytest_gpuperf.commands.compare import main
    sys.exit(main(sys.argv[2:]))
    """
)


@pytest.mark.parametrize("command", ["publish", "compare"])
def test_sigterm_while_writing_leaves_no_temporary_and_says_so(runs, tmp_path, command):
    baseline, reports = runs
    out = tmp_path / "out"
    out.mkdir()
    if command == "publish":
        args = [str(baseline), *map(str, reports), "-o", str(out / "page.html")]
    else:
        args = [str(reports[0]), str(reports[-1]), "--markdown", str(out / "compare.md")]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", _STOPPED_MID_WRITE, command, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 143, done
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "interrupted (SIGTERM)" in lines[0], done.stderr
    assert "no temporary left" in lines[0] and "Traceback" not in done.stderr
    assert os.listdir(out) == []


@pytest.mark.parametrize("status", ["pass", "fail"])
def test_merge_renders_a_check_whose_noise_was_removed(tmp_path, capsys, status):
    """A compared check with `noise` (and its band) removed: the failure text asserted on it,
    a traceback out of the merge's Markdown."""
    from pytest_gpuperf.commands.merge.__main__ import main
    from tests.unit.test_merge_reports import _shard

    check = BaselineCheck(outcome="regressed", baseline=REFERENCE, delta=-0.17, allowance=0.05)
    document = _shard(2, tests=("b",))
    document["results"][0]["verdict"] |= {"status": status, "baseline": to_plain(check)}
    (tmp_path / "1.json").write_text(json.dumps(_shard(1)))
    (tmp_path / "2.json").write_text(json.dumps(document))
    markdown = tmp_path / "m.md"
    code = main([str(tmp_path / "1.json"), str(tmp_path / "2.json"), "--markdown", str(markdown)])
    out = capsys.readouterr()
    assert code == 1 and "Traceback" not in out.err + out.out, out
    assert "1 test failed the gate: b" in out.out
    assert "#### Failures" in markdown.read_text()


# -- the levels a stored check is judged at come from the run, never from the shard --------------


def _confirmed_regression():
    """An honest shard's row: 75% against 90% at the run's level, confirmed by a second
    round (the gate's own functions)."""
    from pytest_gpuperf.gate.confirm import confirm_baseline
    from pytest_gpuperf.gate.stored import check_baseline
    from pytest_gpuperf.gate.suite import SuiteBudget
    from tests.unit.test_merge_reports import _row

    measured = _row("b").measurement
    rate = SuiteBudget(0.01, 2).stored_rate(1)  # the shards' suite (test_merge_reports._shard)
    first = check_baseline(measured, REFERENCE, tolerance=0.05, false_alarm_rate=rate)
    second = check_baseline(measured, REFERENCE, tolerance=0.05, false_alarm_rate=rate)
    confirmed = confirm_baseline(first, second)
    assert confirmed.outcome == "regressed" and decide(baseline=confirmed).status == "fail"
    return measured, confirmed


FORGED_LEVELS = {
    "gating-false": (
        {"gating": False},
        "(its stored check gates (no A/B with a base ran), not 'gating: false')",
    ),
    "allowance-and-noise-0.5": (
        {"allowance": 0.5, "noise": 0.5, "outcome": "within-noise"},
        "(against the stored baseline it is regressed, not within-noise)",
    ),
    "tolerance-0.9": (
        {"tolerance": 0.9, "allowance": 0.9, "outcome": "within-noise"},
        "(against the stored baseline it is regressed, not within-noise; its tolerance 0.9 is "
        "outside [0, 0.5], which the options refuse: judged at 0.01)",
    ),
}


@pytest.mark.parametrize(("forged", "words"), FORGED_LEVELS.values(), ids=FORGED_LEVELS)
def test_merge_judges_a_stored_check_at_the_runs_levels_not_the_shards(tmp_path, forged, words):
    """A confirmed regression whose check was edited to `gating = false`, to an allowance and
    noise of 0.5, or to a tolerance of 0.9 (which the options refuse) merged as PASSED."""
    from dataclasses import replace

    measured, confirmed = _confirmed_regression()
    second = confirmed.confirmation
    assert second is not None
    edited = replace(confirmed, **forged, confirmation=replace(second, **forged))
    verdict = decide(baseline=edited)
    assert verdict.status == "pass"  # what the forged shard says
    merged = _merged(tmp_path, Row("b", measured, verdict, "passed"))
    assert merged.verdict == "failed", merged.reasons
    assert any(
        reason.endswith(f"b [k, cold]: the report says pass, its numbers say fail {words}")
        for reason in merged.reasons
    ), merged.reasons
    assert any("1 test failed the gate: b" in reason for reason in merged.reasons)


def test_merge_passes_an_honest_stored_check_as_the_gate_judged_it(tmp_path):
    """The levels the merge computes are the gate's own: an honest check's allowance comes
    out the same, and a pass stays a pass."""
    from pytest_gpuperf.gate.stored import check_baseline
    from pytest_gpuperf.gate.suite import SuiteBudget
    from tests.unit.test_merge_reports import _row

    measured = _row("b").measurement
    near = replace_efficiency(REFERENCE, measured.efficiency * 1.01)
    rate = SuiteBudget(0.01, 2).stored_rate(1)
    check = check_baseline(measured, near, tolerance=0.05, false_alarm_rate=rate)
    merged = _merged(tmp_path, Row("b", measured, decide(baseline=check), "passed"))
    assert merged.verdict == "passed", merged.reasons
    (row,) = [row for row in merged.rows if row.test_id == "b"]
    assert row.verdict.baseline.allowance == check.allowance


def replace_efficiency(reference, efficiency: float):
    from dataclasses import replace

    return replace(reference, efficiency=efficiency)


def test_merge_judges_against_the_baseline_folder_when_given_it(tmp_path):
    """The shard's copy of its entry edited to the efficiency it measured (a 17% drop read as
    no change): against the folder's file, the regression it is."""
    from dataclasses import replace

    from pytest_gpuperf.commands.merge.shards import merge_reports, read_shard
    from pytest_gpuperf.gate.stored import check_baseline
    from tests.plugin.conftest import baseline_toml
    from tests.unit.test_merge_reports import _row, _shard

    measured = _row("b").measurement
    copy = replace(REFERENCE, efficiency=measured.efficiency)
    check = check_baseline(measured, copy, tolerance=0.05)
    assert decide(baseline=check).status == "pass"
    (tmp_path / "baselines").mkdir()
    (tmp_path / "baselines" / "mi300x-sim.toml").write_text(
        baseline_toml("mi300x-sim", [{"id": "b", "name": "k", "efficiency": 0.9}])
    )
    one, two = tmp_path / "1.json", tmp_path / "2.json"
    one.write_text(json.dumps(_shard(1)))
    row = Row("b", measured, decide(baseline=check), "passed")
    two.write_text(json.dumps(_shard(2, tests=("b",), rows=[row])))
    shards = [read_shard(one), read_shard(two)]
    assert merge_reports(shards).verdict == "passed"  # the copies agree with themselves
    merged = merge_reports(shards, baseline_dir=tmp_path / "baselines")
    assert merged.verdict == "failed"
    assert any("its numbers say fail (against the stored baseline it is regressed" in reason
               for reason in merged.reasons), merged.reasons  # fmt: skip
    # an entry the folder does not hold: the report compared with one the run never had
    (tmp_path / "baselines" / "mi300x-sim.toml").write_text(baseline_toml("mi300x-sim", []))
    merged = merge_reports(shards, baseline_dir=tmp_path / "baselines")
    assert any("it compared with an entry that" in reason and "does not hold" in reason
               for reason in merged.reasons), merged.reasons  # fmt: skip


def test_merge_fails_when_the_measuring_counts_do_not_add_up(tmp_path):
    """A measuring test's row and its `shard.measuring` entry removed together: the merge
    said "2 measuring in the suite, 1 measured" and PASSED."""
    from pytest_gpuperf.commands.merge.shards import merge_reports, read_shard
    from tests.unit.test_merge_reports import _shard

    one, two = tmp_path / "1.json", tmp_path / "2.json"
    one.write_text(json.dumps(_shard(1, planned_tests=[1, 1])))
    edited = _shard(2, tests=("b",), measuring=(), planned_tests=[1, 1])
    two.write_text(json.dumps(edited))
    merged = merge_reports([read_shard(one), read_shard(two)])
    assert merged.verdict == "failed"
    assert any("lists 0 measuring tests where its plan counts 1" in r for r in merged.reasons)
    assert any("the shards list 1 measuring test, the suite has 2" in r for r in merged.reasons)


def test_merge_refuses_a_baseline_dir_that_is_not_there_in_one_line(tmp_path, capsys):
    from pytest_gpuperf.commands.merge.__main__ import main
    from tests.unit.test_merge_reports import _shard

    (tmp_path / "1.json").write_text(json.dumps(_shard(1)))
    (tmp_path / "2.json").write_text(json.dumps(_shard(2, tests=("b",))))
    reports = [str(tmp_path / "1.json"), str(tmp_path / "2.json")]
    assert main([*reports, "--baseline-dir", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--baseline-dir" in err[0] and "does not exist" in err[0], err
