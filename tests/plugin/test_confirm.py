"""Confirm before failing, through pytest on the simulated device: a stored-baseline
regression is measured again and fails only when the second round agrees, both rounds in the
failure text and the JSON; a regression that cannot be measured again says why; the run's
false-alarm budget is counted at collection (under xdist too) and set the levels."""

from __future__ import annotations

import pytest

PLAIN = """
def test_add(gpu_bench):
    add(gpu_bench)
"""

FREES_ITS_BUFFER = """
import numpy as np

def test_add(gpu_bench):
    kernel = gpu_bench.kernel("vadd.hip", "vector_add")
    n = 1 << 20
    a = gpu_bench.backend.to_device(np.ones(n, np.float32))
    c = gpu_bench.empty(n)
    gpu_bench(kernel, grid=n // 256, block=256, args=(a, a, c, n), bytes=12 * n)
    a.free()  # the test frees a buffer it allocated itself
"""


def test_a_stored_regression_is_measured_again_and_both_rounds_are_reported(gp):
    gp.test_file(PLAIN)
    gp.baseline("mi300x-sim", [{"id": "test_perf.py::test_add", "efficiency": 0.9}])
    result = gp.run("--gpuperf", "--gpuperf-json=report.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "vector_add: regressed: *, confirmed by a second round: -*%",
            "*confirmation: measured again with freshly loaded code on fresh buffers: -*% "
            "against the allowance of -*%: regressed again: confirmed",
            "gpuperf: confirmation: 1 regression measured again: 1 confirmed (failed)*",
        ]
    )
    assert "false alarms:" not in result.stdout.str()  # the budget: under -v
    verbose = gp.run("--gpuperf", "-v")
    verbose.stdout.fnmatch_lines(
        [
            "gpuperf: confirmation: 1 regression measured again: 1 confirmed (failed)*",
            "gpuperf: false alarms: 1 check judged (0 A/B, 1 stored) in 1 measuring test; "
            "budget 1.0% a run (--gpuperf-suite-alarm)",
            "gpuperf: stored baselines: each measurement judged at 1.000% (the run's budget "
            "over its tests)",
        ]
    )
    document = gp.report()
    assert document["schema_version"] == 4
    baseline = document["results"][0]["verdict"]["baseline"]
    assert baseline["outcome"] == baseline["first_outcome"] == "regressed"
    assert baseline["confirmation"]["outcome"] == "regressed"
    assert baseline["confirmation"]["delta"] != baseline["delta"]  # a new measurement
    assert baseline["false_alarm_rate"] == pytest.approx(0.01)
    assert document["suite"] == {
        "target": 0.01,
        "checks": 1,
        "per_test_rate": 0.01,
        "ab_round_rate": 0.025,
        "ab_confirm_rate": 0.025,
        "stored_rate": 0.01,
        "ab": 0,
        "stored": 1,
        "confirmations": 1,
        "confirmed": 1,
        "unconfirmed": 0,
        "accepted": 0,
    }


def test_a_regression_whose_buffers_are_gone_fails_on_its_first_round_saying_why(gp):
    gp.test_file(FREES_ITS_BUFFER)
    gp.baseline("mi300x-sim", [{"id": "test_perf.py::test_add", "efficiency": 0.9}])
    result = gp.run("--gpuperf", "--gpuperf-json=report.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "vector_add: regressed: *; not confirmed: a buffer the call passed was freed "
            "before the test ended",
            "*confirmation: could not be measured again: a buffer the call passed was freed*",
        ]
    )
    baseline = gp.report()["results"][0]["verdict"]["baseline"]
    assert baseline["outcome"] == "regressed" and baseline["confirmation"] is None


def test_nothing_is_measured_again_while_saving(gp):
    gp.test_file(PLAIN)
    gp.baseline("mi300x-sim", [{"id": "test_perf.py::test_add", "efficiency": 0.9}])
    gp.run("--gpuperf-save", "--gpuperf-json=report.json").assert_outcomes(passed=1)
    baseline = gp.report()["results"][0]["verdict"]["baseline"]
    assert baseline["first_outcome"] == "" and baseline["confirmation"] is None


def test_the_budget_is_shared_by_the_measuring_tests_of_the_run(gp):
    """Ten measuring tests (and one that does not measure) at a 1% run budget: each stored
    check is judged at 0.1%, which the failure text quotes."""
    many = "".join(PLAIN.replace("test_add", f"test_add_{i}") for i in range(10))
    gp.test_file(many + "\ndef test_other():\n    pass\n")
    entries = [{"id": f"test_perf.py::test_add_{i}", "efficiency": 0.9} for i in range(10)]
    gp.baseline("mi300x-sim", entries)
    result = gp.run("--gpuperf", "--gpuperf-json=report.json", "-k", "not add_9")
    result.assert_outcomes(failed=9, passed=1)
    result.stdout.fnmatch_lines(["*a one-sided 99.8889% prediction bound*"])
    suite = gp.report()["suite"]
    assert suite["checks"] == 9  # deselected and non-measuring tests are not counted
    assert suite["stored_rate"] == pytest.approx(0.01 / 9)


def test_the_suite_alarm_option_and_ini_key(gp):
    gp.test_file(PLAIN)
    gp.baseline("mi300x-sim", [{"id": "test_perf.py::test_add", "efficiency": 0.9}])
    gp.run("--gpuperf", "--gpuperf-suite-alarm=0.001", "--gpuperf-json=report.json")
    assert gp.report()["suite"]["target"] == 0.001
    gp.pytester.makeini("[pytest]\ngpuperf_suite_alarm = 0.05\n")
    result = gp.run("--gpuperf", "--gpuperf-json=report.json")
    result.stdout.fnmatch_lines(["*suite false alarms 5.0%*"])
    assert gp.report()["suite"]["stored_rate"] == pytest.approx(0.01)  # never looser than 1%
    for bad in ("0", "1", "-0.1", "lots"):
        wrong = gp.run("--gpuperf", f"--gpuperf-suite-alarm={bad}")
        assert wrong.ret == pytest.ExitCode.USAGE_ERROR
        wrong.stderr.fnmatch_lines(["*--gpuperf-suite-alarm*false-alarm budget*"])


@pytest.mark.slow
def test_under_xdist_every_worker_counts_the_whole_run(gp):
    pytest.importorskip("xdist")
    many = "".join(PLAIN.replace("test_add", f"test_add_{i}") for i in range(4))
    gp.test_file(many)
    entries = [{"id": f"test_perf.py::test_add_{i}", "efficiency": 0.9} for i in range(4)]
    gp.baseline("mi300x-sim", entries)
    result = gp.run_subprocess("--gpuperf", "-n", "2", "--gpuperf-json=report.json", "-v")
    result.assert_outcomes(failed=4)
    document = gp.report()
    assert document["suite"]["checks"] == 4
    rates = {r["verdict"]["baseline"]["false_alarm_rate"] for r in document["results"]}
    assert rates == {0.0025}  # each worker judged at 1% / 4, not 1% / 2
    result.stdout.fnmatch_lines(["*false alarms: 4 checks judged (0 A/B, 4 stored) in 4 *"])
