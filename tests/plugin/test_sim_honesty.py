"""The simulated device is honest about code: an A/B comparison of an edited kernel whose
model did not change is 'modelled' (not timed, never a pass: xfailed, failed under
--gpuperf-strict), so is a stored check of changed code, and a kernel with no model fails
first with "no model: outputs not computed"."""

from __future__ import annotations

import pytest

PLAIN = """
def test_add(gpu_bench):
    add(gpu_bench)
"""
TWO = PLAIN + PLAIN.replace("test_add", "test_add_again")

# vector_add changed at head to read its input eight times: a GPU would slow down; the
# simulated device's time comes from the model registered for vadd.hip, which did not change.
EIGHT_READS = """\
#include "gpuperf.h"
GPUPERF_KERNEL void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float sum = 0.0f;
        for (int k = 0; k < 8; ++k) sum += a[(i + k * 4099) % n];
        c[i] = a[i] + b[i] + 0.0f * sum;
    }
}
"""


def test_an_edited_body_with_the_same_model_is_modelled_not_a_pass(repo):
    repo.test_file(TWO)
    (repo.path / "vadd.hip").write_text(EIGHT_READS)
    result = repo.run(
        "--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-json=report.json", "--junitxml=j.xml"
    )
    assert result.ret == pytest.ExitCode.OK
    # not failed (nothing says the edit is slower), not passed (nothing measured the edit)
    result.assert_outcomes(xfailed=2)
    output = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "    vector_add * speed from model  modelled",
            "note: A/B modelled: head and base are different code, but the simulated device "
            "times both from the same model*--gpuperf-static=ARCH*(all measurements)",
            "2 measurements in 2 tests: 2 modelled (the change was not measured)",
        ]
    )
    assert output.count("Gate code changes without a GPU") == 1  # said once
    rows = [line for line in output.splitlines() if line.startswith("    vector_add")]
    assert len(rows) == 2 and not any(" pass" in row or " same" in row for row in rows)
    document = repo.report()
    assert document["summary"]["passed"] == 0 and document["summary"]["modelled"] == 2
    assert {r["verdict"]["status"] for r in document["results"]} == {"modelled"}
    assert {r["test_outcome"] for r in document["results"]} == {"skipped"}  # pytest's xfail
    comparison = document["results"][0]["verdict"]["comparison"]
    assert comparison["state"] == "modelled" and comparison["ratio"] is None
    assert comparison["modelled_by"] == "model" and comparison["modelled_efficiency"] == 0.7185
    assert comparison["head_fingerprint"] != comparison["base_fingerprint"]
    junit = (repo.path / "j.xml").read_text()
    assert 'name="gpuperf_ab_state" value="modelled"' in junit
    assert '<skipped type="pytest.xfail" message="gpuperf: not measured: vector_add (A/B' in junit


def test_a_model_that_differs_between_base_and_head_is_still_compared(repo):
    """A gpuperf-sim directive is part of the model: changed with the body, it is timed."""
    repo.test_file(TWO)
    text = EIGHT_READS.replace("GPUPERF_KERNEL", "// gpuperf-sim: efficiency=0.5\nGPUPERF_KERNEL")
    (repo.path / "vadd.hip").write_text(text)
    result = repo.run("--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-json=report.json")
    result.assert_outcomes(failed=2)
    assert {r["verdict"]["comparison"]["state"] for r in repo.report()["results"]} == {"regressed"}


def test_forcing_a_modelled_pair_times_the_simulators_code_drift(repo):
    repo.test_file(TWO)
    (repo.path / "vadd.hip").write_text(EIGHT_READS)
    result = repo.run(
        "--gpuperf",
        "--gpuperf-compare=HEAD",
        "--gpuperf-compare-force",
        "--gpuperf-json=report.json",
    )
    result.assert_outcomes(passed=2)
    comparison = repo.report()["results"][0]["verdict"]["comparison"]
    assert comparison["forced"] is True and comparison["ratio"] is not None


def test_a_kernel_with_no_model_fails_first_with_no_model(gp):
    (gp.path / "conftest.py").write_text("")  # no model for vadd.hip
    gp.test_file(PLAIN)
    for args in (["--gpuperf"], []):  # measured or smoke
        result = gp.run(*args)
        result.assert_outcomes(failed=1)
        output = result.stdout.str()
        result.stdout.fnmatch_lines(
            [
                "no model: outputs not computed: the simulated device has no model that "
                "computes the outputs of kernel 'vector_add' of */vadd.hip*Register a model in "
                "a conftest.py:",
                "*@simulate.model('*/vadd.hip', 'vector_add')",
                "The output check that failed (test_perf.py:*)*",
                "*FAILED test_perf.py::test_add - Failed: no model: outputs not computed*",
            ]
        )
        assert "setup=" not in output and "in place" not in output  # not blamed first
        assert "During handling" not in output


def test_xfailed_with_the_reason_on_its_line_and_failed_under_strict(repo):
    repo.test_file(TWO)
    (repo.path / "vadd.hip").write_text(EIGHT_READS)
    result = repo.run("--gpuperf", "--gpuperf-compare=HEAD", "-rx")
    result.assert_outcomes(xfailed=2)
    # pytest 8.0 writes "- reason: <reason>" on the XFAIL line, later releases "- <reason>"
    result.stdout.fnmatch_lines(
        [
            "XFAIL test_perf.py::test_add - *gpuperf: not measured: vector_add (A/B modelled): "
            "the simulated device times changed code from its unchanged model, so the edit's "
            "speed is unknown (not a pass; --gpuperf-strict fails it)",
        ]
    )
    strict = repo.run(
        "--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-strict", "--gpuperf-json=report.json"
    )
    assert strict.ret == pytest.ExitCode.TESTS_FAILED
    strict.assert_outcomes(failed=2)
    strict.stdout.fnmatch_lines(
        [
            "vector_add: A/B modelled: other code than HEAD (*), one model on the simulated "
            "device (efficiency 71.85% from the model registered for it): the speed comes from "
            "the model, not measured",
            "  code:   head sha256:*, base sha256:*",
            "  why:    --gpuperf-strict fails what was not measured: *",
            "    vector_add * speed from model  FAIL not measured",
            "2 measurements in 2 tests: 2 failed (not measured)",
        ]
    )
    assert {r["verdict"]["status"] for r in repo.report()["results"]} == {"fail"}


def test_a_stored_check_of_changed_code_is_modelled_and_of_the_same_code_a_pass(gp):
    gp.test_file(PLAIN)
    gp.run("--gpuperf", "--gpuperf-save").assert_outcomes(passed=1)
    same = gp.run("--gpuperf", "--gpuperf-strict")  # the code the entry was saved from
    same.assert_outcomes(passed=1)
    same.stdout.fnmatch_lines(["    vector_add * pass"])
    (gp.path / "vadd.hip").write_text(EIGHT_READS)
    result = gp.run("--gpuperf", "--gpuperf-json=report.json", "-rx")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(xfailed=1)
    result.stdout.fnmatch_lines(
        [
            "    vector_add * modelled",
            "note: stored modelled: the code differs from the code the baseline was saved from, "
            "but the simulated device times it from the same model (efficiency and bytes, not "
            "the code), so 'within the noise' says nothing about the edit: this is not a pass "
            "(xfailed; --gpuperf-strict fails it)*",
            "1 measurement in 1 test: 1 modelled (the change was not measured)",
            "XFAIL test_perf.py::test_add - *gpuperf: not measured: vector_add (stored check "
            "modelled)*",
        ]
    )
    document = gp.report()
    verdict = document["results"][0]["verdict"]
    assert verdict["status"] == "modelled" and verdict["baseline"]["modelled"] is True
    assert document["summary"]["modelled"] == 1 and document["summary"]["passed"] == 0
    strict = gp.run("--gpuperf", "--gpuperf-strict")
    assert strict.ret == pytest.ExitCode.TESTS_FAILED
    strict.stdout.fnmatch_lines(
        [
            "vector_add: stored modelled: other code than the baseline was saved from, one "
            "model on the simulated device: * restates the model, not measured",
            "  why: * --gpuperf-strict fails what was not measured*",
        ]
    )
    # re-saving the reviewed edit records it: the next run gates the new code again
    gp.run("--gpuperf", "--gpuperf-save").assert_outcomes(passed=1)
    gp.run("--gpuperf", "--gpuperf-strict").assert_outcomes(passed=1)


def test_a_changed_model_on_the_stored_path_is_still_judged(gp):
    """A gpuperf-sim directive changes the model: the time moves, and the check decides."""
    gp.test_file(PLAIN)
    gp.run("--gpuperf", "--gpuperf-save").assert_outcomes(passed=1)
    text = EIGHT_READS.replace("GPUPERF_KERNEL", "// gpuperf-sim: efficiency=0.3\nGPUPERF_KERNEL")
    (gp.path / "vadd.hip").write_text(text)
    result = gp.run("--gpuperf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["    vector_add * FAIL regression"])
