"""Which commits' Gpuperf-Accept trailers a comparison reads: the pull request's own
first-parent commits, not a merged side branch's, not one a later commit reverts, and not
what the target branch already holds (CI's test merge, origin/HEAD). Before, every commit of
`base..HEAD` counted: a trailer in a merged side branch, in a reverted commit, or on main
(when comparing with an older tag) accepted real regressions. Real git repositories in tmp."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gpuperf.config.settings import build_settings
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.gate.accept import (
    blanket,
    names,
    option_rules,
    parse_rule,
    too_broad,
    trailer_rules,
)
from pytest_gpuperf.session.base_tree import accept_trailers
from tests.git_repo import git


def commit(repo: Path, subject: str, accept: str = "") -> str:
    message = subject + (f"\n\nGpuperf-Accept: {accept} because" if accept else "")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q", "-b", "main")
    commit(tmp_path, "base")
    return tmp_path


def accepted(repo: Path, base: str, head: str = "HEAD") -> list[str]:
    return [value.split()[0] for _, value in accept_trailers(repo, base, head)]


def test_the_pull_requests_own_commits_count(repo):
    base = git(repo, "rev-parse", "HEAD")
    commit(repo, "one", "test_a.py::*")
    commit(repo, "two", "test_b.py::*")
    assert accepted(repo, base) == ["test_b.py::*", "test_a.py::*"]


def test_a_merged_side_branchs_trailer_accepts_nothing(repo):
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "side")
    commit(repo, "side work", "test_side.py::*")
    git(repo, "checkout", "-q", "main")
    commit(repo, "own", "test_own.py::*")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    assert accepted(repo, base) == ["test_own.py::*"]


def test_a_reverted_commit_accepts_nothing_unless_the_revert_is_reverted(repo):
    base = git(repo, "rev-parse", "HEAD")
    commit(repo, "file", "test_gone.py::*")
    (repo / "f").write_text("x")  # git revert needs a change to revert
    git(repo, "add", "f")
    git(repo, "commit", "-q", "--amend", "--no-edit")
    git(repo, "revert", "--no-edit", "HEAD")
    assert accepted(repo, base) == []
    git(repo, "revert", "--no-edit", "HEAD")  # the revert reverted: the change is back
    assert accepted(repo, base) == ["test_gone.py::*"]


def test_cis_test_merge_reads_the_pull_request_not_the_target(repo):
    """GitHub checks out refs/pull/N/merge: a merge commit whose first parent is the target
    branch's tip. Its first-parent line is main's history, the pull request is the second."""
    tag = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "pr")
    commit(repo, "the change", "test_new.py::*")
    git(repo, "checkout", "-q", "main")
    commit(repo, "merged long ago", "test_old.py::*")  # already on main
    main = git(repo, "rev-parse", "HEAD")
    git(repo, "merge", "-q", "--no-ff", "-m", "Merge pr into main", "pr")
    assert accepted(repo, main) == ["test_new.py::*"]  # --gpuperf-compare=origin/main
    # an older tag: main's trailer is not ours, once git knows the default branch
    git(repo, "update-ref", "refs/remotes/origin/main", main)
    git(repo, "symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/main")
    assert accepted(repo, tag) == ["test_new.py::*"]


def test_what_the_default_branch_holds_accepts_nothing(repo):
    tag = git(repo, "rev-parse", "HEAD")
    commit(repo, "merged long ago", "test_old.py::*")
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    git(repo, "symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/main")
    git(repo, "checkout", "-q", "-b", "feature")
    commit(repo, "the change", "test_new.py::*")
    assert accepted(repo, tag) == ["test_new.py::*"]


def test_brackets_in_a_rule_are_the_ids_own():
    """The failure's advice names `test_scale[0]`; fnmatch read `[0]` as a character class
    and the rule named `test_scale0`, never the test."""
    rule = parse_rule("tests/perf/test_scale.py::test_scale[0] why", "--gpuperf-accept")
    assert names(rule, "tests/perf/test_scale.py::test_scale[0]")
    assert not names(rule, "tests/perf/test_scale.py::test_scale0")
    every = parse_rule("*::test_scale[*] why", "--gpuperf-accept")
    assert names(every, "t.py::test_scale[0]") and names(every, "t.py::test_scale[big-1]")
    assert not names(every, "t.py::test_scale_other")


@pytest.mark.parametrize("pattern", ["*", "**", "*::*", "::*"])
def test_a_rule_naming_every_test_is_a_blanket(pattern):
    assert blanket(parse_rule(f"{pattern} why", "--gpuperf-accept"))


@pytest.mark.parametrize("pattern", ["test_x.py::*", "*::test_copy", "*[0]"])
def test_a_rule_naming_some_tests_is_not(pattern):
    assert not blanket(parse_rule(f"{pattern} why", "--gpuperf-accept"))


def test_a_line_break_in_the_option_is_refused_not_a_second_rule(tmp_path):
    with pytest.raises(ConfigError, match=r"one rule a value, got a line break in 'x why\\n\* "):
        option_rules(["x why\n* sneaky"], "--gpuperf-accept")
    cli = {"gpuperf_accept": ["x why\n* sneaky"], "gpuperf": True}
    with pytest.raises(ConfigError, match="--gpuperf-accept: one rule a value"):
        build_settings(cli, {}, rootdir=tmp_path, invocation_dir=tmp_path)
    ini = option_rules(["a why\nb because"], "gpuperf_accept (ini)")  # the ini: one a line
    assert [rule.pattern for rule in ini] == ["a", "b"]


SUITE = [f"tests/perf/test_k{k}.py::test_k{k}[{size}]" for k in range(3) for size in "SML"]


@pytest.mark.parametrize("pattern", ["?*", "*.py::*", "?*::*", "*?", "**?*"])
def test_a_rule_naming_any_id_warns_whatever_its_spelling(pattern):
    """`?*` and `*.py::*` accepted every regression without the warning `*` gets."""
    rule = parse_rule(f"{pattern} why", "Gpuperf-Accept trailer", commit="abc")
    for suite in (SUITE, SUITE[:1]):  # one test in the run or nine
        assert "names every test" in too_broad(rule, suite), pattern


@pytest.mark.parametrize(
    ("pattern", "words"),
    [
        ("tests/*", "names every measuring test of this run (9)"),
        ("tests/perf/test_k?.py::*", "names every measuring test of this run (9)"),
        ("*[S]", ""),  # 3 of 9
        ("tests/perf/test_k0.py::*", ""),  # 3 of 9
        ("tests/perf/test_k1.py::test_k1[M]", ""),
    ],
)
def test_a_rule_naming_the_whole_suite_warns_and_a_few_tests_do_not(pattern, words):
    rule = parse_rule(f"{pattern} why", "--gpuperf-accept")
    found = too_broad(rule, SUITE)
    assert (words in found) if words else found == "", found


def ids(in_a: int, in_b: int) -> list[str]:
    return [f"a.py::t{n}" for n in range(in_a)] + [f"b.py::t{n}" for n in range(in_b)]


def test_more_than_a_few_and_more_than_half_warns():
    rule = parse_rule("a.py::* why", "--gpuperf-accept")
    assert "names 5 of the run's 8 measuring tests" in too_broad(rule, ids(5, 3))
    assert too_broad(rule, ids(4, 5)) == ""  # not more than half
    assert too_broad(rule, ids(3, 1)) == ""  # a few
    assert "names every measuring test of this run (2)" in too_broad(rule, ids(2, 0))
    assert too_broad(rule, ids(1, 0)) == ""  # a run of one test: the rule names that one


@pytest.mark.parametrize("reason", ["<why>", "<why the slowdown is intended>", " <why> <why> "])
def test_the_placeholder_is_no_reason(reason):
    assert parse_rule(f"t.py::x {reason}", "--gpuperf-accept").reason == ""
    rules, warnings = trailer_rules([("0123456789abcdef", f"t.py::x {reason}")])
    assert rules == () and len(warnings) == 1
    assert "gives only the placeholder <why" in warnings[0] and "not accepted" in warnings[0]
    with pytest.raises(ConfigError, match="the advice's placeholder: write why"):
        option_rules([f"t.py::x {reason}"], "--gpuperf-accept")


def test_a_reason_with_brackets_in_it_is_a_reason():
    rule = parse_rule("t.py::x fused epilogue, see <issue 12>", "--gpuperf-accept")
    assert rule.reason == "fused epilogue, see <issue 12>"
