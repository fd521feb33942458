"""--gpuperf-require=gpu on a machine without one: the run fails, with or without --gpuperf,
with one session-level error (what was looked for), never one setup error per test and
never a skip, with or without pytest-xdist."""

from __future__ import annotations

import json

import pytest

TESTS = """
def test_add(gpu_bench):
    add(gpu_bench)


def test_scale(gpu_bench):
    add(gpu_bench)


def test_cpu_only():
    pass
"""


@pytest.mark.parametrize("measure", [["--gpuperf"], []], ids=["gpuperf", "smoke"])
def test_a_required_gpu_that_is_missing_fails_the_run_once(gp, hidden_gpus, measure):
    gp.test_file(TESTS)
    result = gp.run_subprocess(
        *measure, "--gpuperf-require=gpu", "--gpuperf-json=out.json", backend="hip,cuda,sim"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes()  # no test ran: nothing errored one by one, nothing skipped
    output = result.stdout.str()
    header = [line for line in output.splitlines() if "the run stops before" in line]
    assert header == [
        "gpuperf: --gpuperf-require=gpu and no usable GPU: the run stops before its first test "
        "(why: the summary's ERROR line)"
    ]
    (error,) = [line for line in output.splitlines() if line.startswith("gpuperf: ERROR:")]
    assert "(hip: " in error and "; cuda: " in error  # what was looked for
    assert "--gpuperf-require=gpu needs a real GPU: this run fails" in error
    assert "sim" not in error.split("(", 1)[1].split(")")[0]  # never the simulated device
    result.stdout.fnmatch_lines(
        ["!*gpuperf: --gpuperf-require=gpu found no such GPU: no test ran*!"]
    )
    assert output.count("(hip: ") == 1  # the long reason once, not once per test
    assert "skipped" not in output.lower().replace("rather than skipping", "")
    assert "Traceback" not in output
    report = json.loads((gp.path / "out.json").read_text())
    assert any("no usable GPU" in problem for problem in report["problems"])


@pytest.mark.slow
def test_under_xdist_the_controller_stops_the_run_once(gp, hidden_gpus):
    gp.test_file(TESTS)
    result = gp.run_subprocess("--gpuperf", "--gpuperf-require=gpu", "-n", "2", backend="hip")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    output = result.stdout.str()
    assert output.count("gpuperf: ERROR: no usable GPU") == 1, output
    assert "passed" not in output and "error" not in output.split("ERROR:")[0].lower()
    result.stdout.fnmatch_lines(["!*found no such GPU: no test ran*!"])


def test_a_present_gpu_runs_every_test(gp):
    """The check passes through when the required kind is there: on this machine the
    simulated device is never it, so a run that allows only sim is not required."""
    gp.test_file(TESTS)
    result = gp.run("--gpuperf", backend="sim")
    result.assert_outcomes(passed=3)
    assert "no test ran" not in result.stdout.str()
