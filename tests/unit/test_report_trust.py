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
