"""--gpuperf-require=gpu on a machine without one: the run fails, with or without --gpuperf,
and every line says the same thing (what was looked for, and that the tests fail)."""

from __future__ import annotations

import pytest

TEST = """
def test_add(gpu_bench):
    add(gpu_bench)
"""


@pytest.mark.parametrize("measure", [["--gpuperf"], []], ids=["gpuperf", "smoke"])
def test_a_required_gpu_that_is_missing_fails_the_run(gp, hidden_gpus, measure):
    gp.test_file(TEST)
    result = gp.run_subprocess(*measure, "--gpuperf-require=gpu", backend="hip,cuda,sim")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(errors=1)  # the fixture fails: an error at setup, never a skip
    output = result.stdout.str()
    header = [line for line in output.splitlines() if "tests using gpu_bench" in line]
    assert len(header) == 1
    assert "(hip: " in header[0] and "; cuda: " in header[0]  # what was looked for
    assert "--gpuperf-require=gpu needs a real GPU: this run fails" in header[0]
    assert header[0].endswith("tests using gpu_bench will FAIL")
    assert "skipped" not in output.lower().replace("rather than skipping", "")
    assert "sim" not in header[0].split("(", 1)[1].split(")")[0]  # never the simulated device
    result.stdout.fnmatch_lines(["ERROR test_perf.py::test_add - Failed: gpuperf: no usable GPU*"])
    assert "Traceback" not in output
