"""Accepting an intended slowdown: --gpuperf-accept=PATTERN (repeatable, ini too) and a
`Gpuperf-Accept: PATTERN <reason>` trailer in a commit between --gpuperf-compare's REF and
HEAD turn a confirmed regression of the tests they name into `accepted` (exit 0, listed with
the reason and the commit in the terminal, Markdown, JSON and JUnit). Real git repositories in
tmp, the simulated device (whose gpuperf-sim directive really slows the kernel down)."""

from __future__ import annotations

import pytest

from tests.git_repo import git

TWO = """
def test_add(gpu_bench):
    add(gpu_bench)

def test_add_again(gpu_bench):
    add(gpu_bench)
"""
REASON = "trades 20% for the fused epilogue"


def commit_slower(gp, message: str) -> str:
    """Commit a kernel that streams at 50% instead of the model's 71.85%: a real slowdown."""
    gp.write_kernel(0.5)
    git(gp.path, "commit", "-qam", message)
    return git(gp.path, "rev-parse", "HEAD")


@pytest.fixture
def two(repo):
    """The base commit holds two tests of the same kernel."""
    repo.test_file(TWO)
    git(repo.path, "add", "-A")
    git(repo.path, "commit", "-qm", "two tests")
    return repo


def test_a_commit_trailer_accepts_the_regression_it_names_in_every_report(two):
    sha = commit_slower(two, f"slower vadd\n\nGpuperf-Accept: test_perf.py::test_add {REASON}\n")
    result = two.run(
        "--gpuperf",
        "--gpuperf-compare=HEAD~1",
        "--gpuperf-json=report.json",
        "--gpuperf-markdown=summary.md",
        "--junitxml=junit.xml",
    )
    # test_add is accepted; test_add_again, which no rule names, still fails
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "  test_perf.py::test_add",
            "    vector_add * slower, again * accepted",
            f'note: accepted slowdown: "{REASON}" (Gpuperf-Accept in {sha[:12]}, pattern '
            "test_perf.py::test_add) (test_perf.py::test_add)",
            "2 measurements in 2 tests: 1 accepted (an intended slowdown), 1 failed (A/B)",
            "gpuperf: confirmation: 2 regressions measured again: 2 confirmed (1 failed, 1 "
            "accepted), 0 not confirmed (passed, reported)",
        ]
    )
    # the failure of the other test says how to accept it, like the stored path's update:
    assert (
        "  accept:       if this slowdown is intended: a commit trailer 'Gpuperf-Accept: "
        "test_perf.py::test_add_again <why>' (under --gpuperf-compare), or "
        "--gpuperf-accept='test_perf.py::test_add_again <why>'" in out
    )
    document = two.report()
    assert document["summary"]["accepted"] == 1 and document["summary"]["failed"] == 1
    assert document["summary"]["passed"] == 0
    assert document["accepted"] == [
        {
            "test_id": "test_perf.py::test_add",
            "name": "vector_add",
            "checks": ["ab"],
            "pattern": "test_perf.py::test_add",
            "reason": REASON,
            "source": "Gpuperf-Accept trailer",
            "commit": sha,
        }
    ]
    accepted = document["results"][0]["verdict"]
    assert accepted["status"] == "accepted" and accepted["comparison"]["state"] == "regressed"
    assert document["results"][0]["test_outcome"] == "passed"
    markdown = (two.path / "summary.md").read_text()
    assert "| `test_perf.py::test_add` |" in markdown and "| accepted |" in markdown
    assert f'- accepted slowdown: "{REASON}" (Gpuperf-Accept in {sha[:12]}' in markdown
    junit = (two.path / "junit.xml").read_text()
    assert '<property name="gpuperf_verdict" value="accepted"' in junit
    assert f'<property name="gpuperf_accept_reason" value="{REASON}"' in junit
    assert f'<property name="gpuperf_accept_source" value="Gpuperf-Accept in {sha[:12]}"' in junit


def test_the_option_accepts_every_test_its_glob_names_exit_0(two):
    commit_slower(two, "slower vadd")
    result = two.run(
        "--gpuperf",
        "--gpuperf-compare=HEAD~1",
        f"--gpuperf-accept=test_perf.py::* {REASON}",
        "--gpuperf-json=report.json",
    )
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            f'note: accepted slowdown: "{REASON}" (--gpuperf-accept, pattern test_perf.py::*) '
            "(all measurements)",
            "2 measurements in 2 tests: 2 accepted (an intended slowdown)",
        ]
    )
    assert {r["source"] for r in two.report()["accepted"]} == {"--gpuperf-accept"}


def test_the_ini_key_takes_one_rule_a_line_and_a_reason_is_optional(two):
    commit_slower(two, "slower vadd")
    two.pytester.makeini(
        "[pytest]\ngpuperf_accept =\n    test_perf.py::test_add\n    *::test_add_again why\n"
    )
    result = two.run("--gpuperf", "--gpuperf-compare=HEAD~1", "--gpuperf-json=report.json")
    assert result.ret == pytest.ExitCode.OK
    accepted = {a["test_id"]: a for a in two.report()["accepted"]}
    assert accepted["test_perf.py::test_add"]["reason"] == ""
    assert accepted["test_perf.py::test_add_again"]["reason"] == "why"
    assert accepted["test_perf.py::test_add"]["source"] == "gpuperf_accept (ini)"
    result.stdout.fnmatch_lines(["note: accepted slowdown: no reason given (gpuperf_accept*"])


def test_a_pattern_that_names_no_test_is_a_warning(two):
    commit_slower(two, "slower vadd")
    result = two.run(
        "--gpuperf",
        "--gpuperf-compare=HEAD~1",
        "--gpuperf-accept=test_perf.py::test_add",  # one rule a test: neither names them all
        "--gpuperf-accept=test_perf.py::test_add_again",
        "--gpuperf-accept=test_prf.py::* typo",
        "--gpuperf-json=report.json",
        "--gpuperf-markdown=summary.md",
    )
    assert result.ret == pytest.ExitCode.OK  # the other rules accepted both
    line = (
        "accept rule 'test_prf.py::*' (--gpuperf-accept) names no test of this run: nothing "
        "was accepted by it (a test id glob, e.g. 'test_rmsnorm.py::*')"
    )
    result.stdout.fnmatch_lines([f"gpuperf: WARNING: {line}"])
    assert two.report()["accept_warnings"] == [line]
    assert f"- {line}" in (two.path / "summary.md").read_text()


def test_an_accepted_test_that_did_not_regress_says_so(repo):
    repo.test_file(TWO)
    result = repo.run("--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-accept=*::test_add why not")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            'note: accepted slowdown not needed: an accept rule names it ("why not" '
            "(--gpuperf-accept, pattern *::test_add)), but it did not regress "
            "(test_perf.py::test_add)",
            "2 measurements in 2 tests: 2 ok",
        ]
    )


def test_a_trailer_without_a_reason_accepts_nothing_and_says_why(two):
    sha = commit_slower(two, "slower vadd\n\nGpuperf-Accept: test_perf.py::*\n")
    result = two.run("--gpuperf", "--gpuperf-compare=HEAD~1", "--gpuperf-json=report.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=2)
    line = (
        f"Gpuperf-Accept: test_perf.py::* in commit {sha[:12]} gives no reason: not accepted "
        "(write 'Gpuperf-Accept: test_perf.py::* <why the slowdown is intended>')"
    )
    result.stdout.fnmatch_lines([f"gpuperf: WARNING: {line}"])
    assert two.report()["accept_warnings"] == [line]


def test_only_the_commits_between_base_and_head_count(two):
    # a trailer in the base itself (or before it) is history: it accepts nothing now
    git(two.path, "commit", "-q", "--allow-empty", "-m", f"old\n\nGpuperf-Accept: * {REASON}")
    commit_slower(two, "slower vadd, no trailer")
    result = two.run("--gpuperf", "--gpuperf-compare=HEAD~1")
    result.assert_outcomes(failed=2)
    # and every commit of the range counts, not only the last
    git(two.path, "commit", "-q", "--allow-empty", "-m", "later, no trailer")
    ranged = two.run("--gpuperf", "--gpuperf-compare=HEAD~3")  # "two tests": old is inside
    ranged.assert_outcomes(passed=2)
    ranged.stdout.fnmatch_lines(["2 measurements in 2 tests: 2 accepted (an intended slowdown)"])


def test_a_floor_is_never_accepted(two):
    commit_slower(two, "slower vadd")
    two.test_file(TWO.replace("def test_add(", "@pytest.mark.min_bw(0.9)\ndef test_add("))
    result = two.run("--gpuperf", "--gpuperf-compare=HEAD~1", f"--gpuperf-accept=* {REASON}")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "    vector_add * FAIL floor A/B",
            "note: not accepted: an accept rule names it (*), but only a regression is "
            "accepted, never a floor or a --gpuperf-strict rule (test_perf.py::test_add)",
        ]
    )


def test_the_stored_path_honours_the_option_and_asks_for_a_re_save(gp):
    gp.test_file(TWO)
    entries = [{"id": f"test_perf.py::{name}", "efficiency": 0.9} for name in ("test_add",)]
    gp.baseline("mi300x-sim", entries)
    failed = gp.run("--gpuperf")
    failed.assert_outcomes(passed=1, failed=1)
    assert "update:" in failed.stdout.str() and "  accept: " in failed.stdout.str()
    result = gp.run("--gpuperf", f"--gpuperf-accept=*::test_add {REASON}")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "    vector_add * accepted",
            f'note: accepted slowdown: "{REASON}" (--gpuperf-accept, pattern *::test_add) '
            "(test_perf.py::test_add)",
            "note: 1 accepted stored regression: the stored baseline still holds the old speed "
            "and will fail the next run without the accept rule; re-save it once the change "
            "is merged: pytest --gpuperf --gpuperf-save --gpuperf-backend=sim "
            "test_perf.py::test_add",
        ]
    )


@pytest.mark.slow
def test_under_xdist_the_controller_reports_what_the_workers_accepted(two):
    sha = commit_slower(two, f"slower vadd\n\nGpuperf-Accept: *::test_add {REASON}\n")
    result = two.run_subprocess(
        "--gpuperf",
        "--gpuperf-compare=HEAD~1",
        "--gpuperf-accept=*::test_gone typo",
        "-n",
        "2",
        "--gpuperf-json=report.json",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            f'note: accepted slowdown: "{REASON}" (Gpuperf-Accept in {sha[:12]}, pattern '
            "*::test_add) (test_perf.py::test_add)",
            "gpuperf: WARNING: accept rule '*::test_gone' (--gpuperf-accept) names no test of "
            "this run*",
        ]
    )
    document = two.report()
    assert [a["test_id"] for a in document["accepted"]] == ["test_perf.py::test_add"]
    assert document["accepted"][0]["commit"] == sha


PARAMETRIZED = """
import pytest

@pytest.mark.parametrize("n", [0, 1])
def test_scale(gpu_bench, n):
    add(gpu_bench)
"""


def test_the_advice_for_a_parametrized_test_pasted_as_it_is_accepts_it(repo):
    """Before: the failure said `Gpuperf-Accept: test_perf.py::test_scale[0] <why>`; committed
    word for word it accepted nothing (fnmatch read `[0]` as a character class) and the run
    warned that the rule "names no test"."""
    repo.test_file(PARAMETRIZED)
    git(repo.path, "add", "-A")
    git(repo.path, "commit", "-qm", "parametrized")
    commit_slower(repo, "slower vadd")
    failed = repo.run("--gpuperf", "--gpuperf-compare=HEAD~1")
    failed.assert_outcomes(failed=2)
    advice = next(
        line.split("a commit trailer '")[1].split("'")[0]
        for line in failed.stdout.lines
        if "test_scale[0]" in line and "a commit trailer" in line
    )
    assert advice == "Gpuperf-Accept: test_perf.py::test_scale[0] <why>"
    git(
        repo.path,
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "the why\n\n" + advice.replace("<why>", REASON),
    )
    result = repo.run("--gpuperf", "--gpuperf-compare=HEAD~2")
    result.assert_outcomes(passed=1, failed=1)  # test_scale[1] is still a regression
    assert "names no test" not in result.stdout.str()
    result.stdout.fnmatch_lines(["  test_perf.py::test_scale[[]0]", "    vector_add * accepted"])


def test_a_blanket_rule_is_a_warning(two):
    commit_slower(two, f"slower vadd\n\nGpuperf-Accept: *::* {REASON}\n")
    result = two.run("--gpuperf", "--gpuperf-compare=HEAD~1", "--gpuperf-json=report.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "gpuperf: WARNING: accept rule '*::*' (Gpuperf-Accept in *) names every test: any "
            "confirmed regression of this run is accepted by it; name the tests the change slows "
            "down (e.g. 'tests/perf/test_rmsnorm.py::*')"
        ]
    )
    assert "names every test" in two.report()["accept_warnings"][0]


@pytest.mark.parametrize(
    ("pattern", "words"),
    [
        ("?*", "names every test: any confirmed regression of this run is accepted by it"),
        ("*.py::*", "names every test: any confirmed regression of this run is accepted by it"),
        ("test_*", "names every measuring test of this run (2)"),
    ],
)
def test_a_rule_that_names_every_test_warns_whatever_its_spelling(two, pattern, words):
    """`?*`, `*.py::*` (and `tests/*` in a repository whose tests live there) accepted every
    regression without the warning `*` gets."""
    commit_slower(two, f"slower vadd\n\nGpuperf-Accept: {pattern} {REASON}\n")
    result = two.run("--gpuperf", "--gpuperf-compare=HEAD~1", "--gpuperf-json=report.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"gpuperf: WARNING: accept rule '{pattern}' (*) {words}*"])
    assert words in two.report()["accept_warnings"][0]


def test_the_advices_placeholder_is_no_reason(two):
    commit_slower(two, "slower vadd\n\nGpuperf-Accept: test_perf.py::test_add <why>\n")
    result = two.run("--gpuperf", "--gpuperf-compare=HEAD~1")
    result.assert_outcomes(failed=2)  # nothing accepted
    result.stdout.fnmatch_lines(
        ["gpuperf: WARNING: Gpuperf-Accept: test_perf.py::test_add in commit * gives only the "
         "placeholder <why>: not accepted*"]
    )  # fmt: skip
    pasted = two.run("--gpuperf", "--gpuperf-accept=test_perf.py::test_add <why>")
    assert pasted.ret == pytest.ExitCode.USAGE_ERROR
    pasted.stderr.fnmatch_lines(["*--gpuperf-accept: *<why> is the advice's placeholder*"])


def test_a_line_break_in_the_option_stops_the_run(two):
    result = two.run("--gpuperf", "--gpuperf-accept=x why\n* sneaky")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpuperf-accept: one rule a value, got a line break in*"])
