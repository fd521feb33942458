"""Every promise the output makes about --gpuperf-strict is kept.

PROMISES lists each sentence of the plugin that says what --gpuperf-strict does (found by
reading every string literal of the package that names it: a new one without an entry here
fails `test_every_strict_promise_is_listed`), and the test that runs it both ways: reported
without strict, failed (exit 1) with it."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from pytest_gpuperf.config.options import OPTIONS

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_gpuperf"

PLAIN = """
def test_add(gpu_bench):
    add(gpu_bench)
"""

# fragment of the sentence -> "module::test" that shows the run keeping it
PROMISES = {
    # --help: the option's own list (each clause has its own row below)
    "fail what a run could not judge by measuring": (
        "test_strict_promises::test_the_help_lists_exactly_the_promises_kept_below"
    ),
    # a measured test without a baseline (the run's note, and the marker)
    "(reported, not failed; --gpuperf-strict fails them)": (
        "test_strict_promises::test_a_missing_baseline_is_reported_and_fails_under_strict"
    ),
    # the gpuperf marker's strict= (its help text)
    "strict (--gpuperf-strict for this test)": (
        "test_strict_promises::test_a_missing_baseline_is_reported_and_fails_under_strict"
    ),
    # an A/B that stays inconclusive
    "--gpuperf-strict fails it; a longer --gpuperf-budget": (
        "test_compare::test_a_difference_at_the_threshold_is_inconclusive_and_strict_fails_it"
    ),
    # a modelled A/B (the xfail reason and the run's note)
    "(not a pass; --gpuperf-strict fails it)": (
        "test_sim_honesty::test_xfailed_with_the_reason_on_its_line_and_failed_under_strict"
    ),
    "this is not a pass (xfailed; --gpuperf-strict fails ": (
        "test_sim_honesty::test_xfailed_with_the_reason_on_its_line_and_failed_under_strict"
    ),
    # a modelled stored check
    "says nothing about the edit: this is not a pass ": (
        "test_sim_honesty::test_a_stored_check_of_changed_code_is_modelled_and_of_the_same_"
        "code_a_pass"
    ),
    "(xfailed; --gpuperf-strict fails it). ": (
        "test_sim_honesty::test_a_stored_check_of_changed_code_is_modelled_and_of_the_same_"
        "code_a_pass"
    ),
    # the failure's explanation of a strict-modelled failure
    "--gpuperf-strict fails what was not measured": (
        "test_sim_honesty::test_xfailed_with_the_reason_on_its_line_and_failed_under_strict"
    ),
    # a REF git cannot serve (--gpuperf-compare-missing-ok)
    "could not reach the base": ("test_compare::test_missing_ok_runs_on_with_no_base_and_says_so"),
    # the static gate: a kernel without stored facts or base version
    "--gpuperf-strict fails a kernel without stored facts or base version": (
        "test_static_gate::test_compare_lists_a_kernel_file_the_base_revision_does_not_have"
    ),
    # a drift across saves (the run's note, the failure's headline and its advice)
    "(drift: --gpuperf-strict fails it)": (
        "test_board_and_drift::test_a_drift_across_re_saves_is_reported_and_fails_under_strict"
    ),
    "failed under --gpuperf-strict": (
        "test_board_and_drift::test_a_drift_across_re_saves_is_reported_and_fails_under_strict"
    ),
    "run without --gpuperf-strict to report the drift": (
        "test_board_and_drift::test_a_drift_across_re_saves_is_reported_and_fails_under_strict"
    ),
    # no A/B base, no stored baseline, no floor under --gpuperf-compare (the row's note)
    "nothing decided these measurements (--gpuperf-strict fails them": (
        "test_callable_ab::test_strict_fails_a_measurement_that_nothing_gated"
    ),
    # a measurement not taken (no usable sample, or its hard limit): the test's failure
    "(--gpuperf-strict fails a measurement not taken)": (
        "test_real_code::test_under_strict_a_measurement_not_taken_fails"
    ),
    # a baseline folder given that does not exist (issue 55 item 7)
    "--gpuperf-strict stops the run: ": (
        "test_baselines::test_under_strict_a_baseline_folder_that_does_not_exist_stops_the_run"
    ),
    # measuring tests a selection left out, named (issue 55 item 10)
    "--gpuperf-strict names what it did not measure: ": (
        "test_xdist_and_reruns::test_a_strict_run_names_the_measuring_tests_its_selection_left_out"
    ),
    # an accept rule never excuses a strict failure
    "never a floor or a --gpuperf-strict rule": "test_accept::test_a_floor_is_never_accepted",
}


def strict_literals() -> list[tuple[str, str]]:
    """(file, text) of every string literal of the package that names --gpuperf-strict,
    docstrings left out (they speak to the maintainer, not the user)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef):
                body = node.body
                if body and isinstance(body[0], ast.Expr):
                    docstrings.add(id(body[0].value))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and ("--gpuperf-strict" in node.value or "strict (--gpuperf-strict" in node.value)
            ):
                found.append((str(path.relative_to(PACKAGE)), node.value))
    return found


def test_every_strict_promise_is_listed():
    literals = strict_literals()
    assert len(literals) >= 8  # the scan finds them
    for where, text in literals:
        if text == "--gpuperf-strict":  # the flag itself
            continue
        assert any(fragment in text for fragment in PROMISES), (
            f"{where}: a --gpuperf-strict promise no test keeps: {text!r}"
        )


def test_every_listed_promise_has_its_test():
    for keeper in set(PROMISES.values()):
        module, name = keeper.split("::")
        assert callable(getattr(importlib.import_module(module), name)), keeper


def test_the_help_lists_exactly_the_promises_kept_below():
    text = next(spec.help for spec in OPTIONS if spec.flag == "--gpuperf-strict")
    for clause in (
        "no baseline here (while baselines gate)",
        "a modelled verdict",
        "an A/B inconclusive or without its base",
        "a kernel without stored facts (static)",
        "a drift across saves",
        "a measurement not taken",
    ):
        assert clause in text


def test_a_missing_baseline_is_reported_and_fails_under_strict(gp):
    gp.test_file(PLAIN)
    reported = gp.run("--gpuperf")
    assert reported.ret == pytest.ExitCode.OK
    reported.stdout.fnmatch_lines(
        ["note: 1 of 1 measurement has no baseline for mi300x-sim (reported, not failed; "
         "--gpuperf-strict fails them)*"]
    )  # fmt: skip
    strict = gp.run("--gpuperf", "--gpuperf-strict")
    assert strict.ret == pytest.ExitCode.TESTS_FAILED
    strict.stdout.fnmatch_lines(["    vector_add * FAIL no baseline"])
    marked = gp.test_file("@pytest.mark.gpuperf(strict=True)" + PLAIN)  # the marker too
    assert gp.run("--gpuperf", str(marked)).ret == pytest.ExitCode.TESTS_FAILED


def test_while_an_ab_gates_no_baseline_is_promised_to_strict(repo):
    """Stored baselines are shown, not gated, under --gpuperf-compare: the run must not say
    that --gpuperf-strict fails a missing one (it does not, and the issue was that it said so)."""
    reported = repo.run("--gpuperf", "--gpuperf-compare=HEAD")
    assert "--gpuperf-strict fails them" not in reported.stdout.str()
    strict = repo.run("--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-strict")
    strict.assert_outcomes(passed=1)  # same code, measured: a pass, no baseline needed
