"""Options that cannot act are errors, never silently ignored: --gpuperf-compare (like
--gpuperf-save) names a measurement and implies --gpuperf; an option that only acts while
measuring, on the command line of a run that does not measure, stops it with exit 4 and says
what to add (its ini value is a default for measuring runs and stops nothing); a REF git
cannot resolve is exit 4 either way."""

from __future__ import annotations

import pytest

from pytest_gpuperf.config.settings import MEASURING_ONLY, STATIC_ACTS_ON

USAGE = pytest.ExitCode.USAGE_ERROR

PLAIN = "def test_add(gpu_bench):\n    add(gpu_bench)\n"
# a value each option accepts (a bad value would be an error of its own)
VALUES = {
    "gpuperf_tolerance": "--gpuperf-tolerance=0.02",
    "gpuperf_compare_threshold": "--gpuperf-compare-threshold=0.01",
    "gpuperf_compare_code_spread": "--gpuperf-compare-code-spread=0.01",
    "gpuperf_compare_loads": "--gpuperf-compare-loads=4",
    "gpuperf_compare_buffer_sets": "--gpuperf-compare-buffer-sets=2",
    "gpuperf_compare_force": "--gpuperf-compare-force",
    "gpuperf_code_facts": "--gpuperf-code-facts",
    "gpuperf_suite_alarm": "--gpuperf-suite-alarm=0.05",
    "gpuperf_history": "--gpuperf-history=3",
    "gpuperf_budget": "--gpuperf-budget=0.5",
    "gpuperf_hard_limit": "--gpuperf-hard-limit=20",
    "gpuperf_accept": "--gpuperf-accept=test_perf.py::*",
    "gpuperf_strict": "--gpuperf-strict",
    "gpuperf_compare_missing_ok": "--gpuperf-compare-missing-ok",
    "gpuperf_prune": "--gpuperf-prune",
    "gpuperf_explain": "--gpuperf-explain",
    "gpuperf_check_bytes": "--gpuperf-check-bytes",
    "gpuperf_explain_timeout": "--gpuperf-explain-timeout=60",
}


def test_every_measuring_only_option_is_tested():
    assert set(VALUES) == set(MEASURING_ONLY)


@pytest.mark.parametrize("dest", MEASURING_ONLY)
def test_a_measuring_only_option_without_gpuperf_stops_the_run(gp, dest):
    gp.test_file(PLAIN)
    option = VALUES[dest]
    flag = option.split("=")[0]
    result = gp.run_plain("--gpuperf-backend=sim", option, "--gpuperf-json=report.json")
    assert result.ret == USAGE
    result.stderr.fnmatch_lines(
        [
            f"ERROR: pytest-gpuperf: {flag} only acts while measuring, and this run does not "
            "measure: add --gpuperf (or --gpuperf-save / --gpuperf-compare=REF, which imply "
            "it), or leave the option out"
        ]
    )
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert not (gp.path / "report.json").exists()  # nothing left behind
    measuring = gp.run_plain("--gpuperf-backend=sim", "--gpuperf", option)
    assert measuring.ret != USAGE  # with --gpuperf it acts


def test_several_are_named_at_once(gp):
    gp.test_file(PLAIN)
    result = gp.run_plain("--gpuperf-tolerance=0.02", "--gpuperf-budget=0.5")
    assert result.ret == USAGE
    result.stderr.fnmatch_lines(
        ["ERROR: pytest-gpuperf: --gpuperf-tolerance, --gpuperf-budget only act while measuring*"]
    )


def test_their_ini_values_are_defaults_and_stop_no_smoke_run(gp):
    gp.pytester.makeini(
        "[pytest]\ngpuperf_tolerance = 0.02\ngpuperf_strict = true\ngpuperf_budget = 0.5\n"
        "gpuperf_accept = test_perf.py::*\n"
    )
    gp.test_file(PLAIN)
    result = gp.run_plain("--gpuperf-backend=sim")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["gpuperf: smoke mode*"])


def test_the_static_gate_takes_those_it_acts_on_and_refuses_the_others(gp):
    gp.test_file(PLAIN)
    refused = gp.run_plain("--gpuperf-static=gfx942", "--gpuperf-budget=0.5")
    assert refused.ret == USAGE
    refused.stderr.fnmatch_lines(
        ["ERROR: pytest-gpuperf: --gpuperf-budget only acts while measuring, and the static "
         "gate times nothing: *"]
    )  # fmt: skip
    assert set(STATIC_ACTS_ON) <= set(MEASURING_ONLY)
    for dest in STATIC_ACTS_ON:  # accepted at configure time (the clang is another matter)
        result = gp.run_plain("--gpuperf-static=gfx942", VALUES[dest], "--co")
        assert "only acts while measuring" not in result.stderr.str(), dest


def test_compare_implies_gpuperf(repo):
    result = repo.run_plain(
        "--gpuperf-backend=sim", "-o", "gpuperf_budget=0.02", "--gpuperf-compare=HEAD"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "gpuperf: measure and gate, backends sim*A/B against HEAD (threshold 0.5%)*",
            "    vector_add * same code  pass",
        ]
    )


def test_a_bad_ref_is_exit_4_with_or_without_gpuperf(repo):
    for measure in ([], ["--gpuperf"]):
        result = repo.run("--gpuperf-compare=no-such-ref", "--gpuperf-json=report.json", *measure)
        assert result.ret == USAGE
        result.stderr.fnmatch_lines(
            ["ERROR: pytest-gpuperf: --gpuperf-compare=no-such-ref: git cannot resolve "
             "'no-such-ref' to a commit*"]
        )  # fmt: skip
        assert not (repo.path / "report.json").exists()


def test_no_gpuperf_and_compare_contradict_each_other(repo):
    result = repo.run("--no-gpuperf", "--gpuperf-compare=HEAD")
    assert result.ret == USAGE
    result.stderr.fnmatch_lines(
        ["ERROR: pytest-gpuperf: --no-gpuperf (the command line) and --gpuperf-compare (the "
         "command line) contradict each other: remove one*"]
    )  # fmt: skip


# -- --no-gpuperf from addopts or PYTEST_ADDOPTS against a flag typed on the command line ----


def test_addopts_no_gpuperf_cannot_turn_the_gate_off(gp):
    """A pull request's pytest.ini with `addopts = --no-gpuperf` made CI's `pytest --gpuperf
    --gpuperf-strict` a smoke run: "nothing timed", exit 0, a JSON report with no results,
    and strict's error said "add --gpuperf", which was given."""
    gp.pytester.makefile(".ini", pytest="[pytest]\naddopts = --no-gpuperf\n")
    gp.test_file(PLAIN)
    result = gp.run("--gpuperf", "--gpuperf-strict", "--gpuperf-json=report.json")
    result.stdout.fnmatch_lines(
        ["gpuperf: --gpuperf on the command line overrides --no-gpuperf (addopts in "
         "pytest.ini): this run measures"]
    )  # fmt: skip
    assert "smoke mode" not in result.stdout.str()
    assert len(gp.report()["results"]) == 1  # measured and judged
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # strict: no baseline for this device


def test_pytest_addopts_no_gpuperf_cannot_turn_the_gate_off(gp):
    gp.monkeypatch.setenv("PYTEST_ADDOPTS", "--no-gpuperf")
    gp.test_file(PLAIN)
    result = gp.run("--gpuperf", "--gpuperf-json=report.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["gpuperf: --gpuperf on the command line overrides --no-gpuperf (PYTEST_ADDOPTS): "
         "this run measures"]
    )  # fmt: skip
    assert len(gp.report()["results"]) == 1


def test_no_gpuperf_typed_wins_over_gpuperf_in_addopts_and_says_so(gp):
    gp.pytester.makefile(".ini", pytest="[pytest]\naddopts = --gpuperf\n")
    gp.test_file(PLAIN)
    result = gp.run("--no-gpuperf")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "gpuperf: --no-gpuperf on the command line overrides --gpuperf (addopts in "
            "pytest.ini): this run does not measure",
            "gpuperf: smoke mode*",
        ]
    )


def test_contradicting_flags_none_of_them_typed_stop_the_run_naming_where_each_came_from(gp):
    gp.pytester.makefile(".ini", pytest="[pytest]\naddopts = --no-gpuperf\n")
    gp.monkeypatch.setenv("PYTEST_ADDOPTS", "--gpuperf")
    gp.test_file(PLAIN)
    result = gp.run("--gpuperf-json=report.json")
    assert result.ret == USAGE
    result.stderr.fnmatch_lines(
        ["ERROR: pytest-gpuperf: --no-gpuperf (addopts in pytest.ini) and --gpuperf "
         "(PYTEST_ADDOPTS) contradict each other: remove one (a flag typed on the command line "
         "wins over PYTEST_ADDOPTS and the ini file's addopts)"]
    )  # fmt: skip
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert not (gp.path / "report.json").exists()
