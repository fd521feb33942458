"""Verdicts through pytest: floors, baselines, marginal results, and outputs checked first.

The simulated MI300X is judged against `baselines/mi300x-sim.toml` only (a real or reported
`mi300x.toml` entry is shown beside it, never gated: test_mi300x_baseline.py), so the stored
baselines below are written under the key "mi300x-sim". The summary table never cuts a test
id: at pytester's 80 columns each test id has a line of its own, its measurements below it.
"""

from __future__ import annotations

import json

from pytest_gpuperf.engine.sequential import MIN_DECIDE_SAMPLES

FLOORED = """
@pytest.mark.min_bw({floor})
def test_add(gpu_bench):
    result = add(gpu_bench)
    print("EFFICIENCY", result.efficiency)
"""

PLAIN = """
def test_add(gpu_bench):
    add(gpu_bench)
"""


def test_floor_reached_passes(gp):
    gp.test_file(FLOORED.format(floor=0.3))
    result = gp.run("--gpuperf", "-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*EFFICIENCY 0.4*",
            "*measurement*mode*eff*floor*verdict",
            "  test_perf.py::test_add",
            "    vector_add *cold*45.9%*30%*pass",
            "1 measurement in 1 test: 1 ok",
        ]
    )


def test_floor_missed_fails_the_test_with_measured_and_expected(gp):
    gp.test_file(FLOORED.format(floor=0.9))
    result = gp.run("--gpuperf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_add _*",
            "vector_add: efficiency 4*% is below the floor 90.00%",
            "*floor:*expected >= 90.00% of peak = 4,770 GB/s (min_bw)",
            "*vs floor:*points of peak*relative)",
            "*floor noise:*lies entirely below the floor: not noise",
            "*measured:*% of peak = * GB/s (95% CI *",
            "*device:*mi300x*simulated*sim backend*; cache=cold",
            "! test_perf.py::test_add",
            "    vector_add *cold*45.9%*90%*FAIL floor",
            "1 measurement in 1 test: 1 failed (floor)",
            "FAILED test_perf.py::test_add - Failed: vector_add: efficiency*",
        ]
    )


def test_no_baseline_is_reported_not_failed(gp):
    gp.test_file(PLAIN)
    result = gp.run("--gpuperf")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "  test_perf.py::test_add",
            "    vector_add *pass",
            "note: 1 of 1 measurement has no baseline for mi300x-sim (reported, not failed; "
            "--gpuperf-strict fails them)",
            "note: record them with: pytest --gpuperf --gpuperf-save --gpuperf-backend=sim "
            "test_perf.py",
            "1 measurement in 1 test: 1 ok",
        ]
    )
    assert result.stdout.str().count("no baseline for") == 1


def test_strict_fails_without_a_baseline(gp):
    gp.test_file(PLAIN)
    result = gp.run("--gpuperf", "--gpuperf-strict")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "vector_add: no baseline for device *, and a baseline is required*",
            "*record:*pytest --gpuperf --gpuperf-save --gpuperf-backend=sim test_perf.py::test_add",
            "! test_perf.py::test_add",
            "    vector_add *FAIL no baseline",
            "1 measurement in 1 test: 1 failed (no baseline)",
        ]
    )


def test_strict_failure_names_the_device_without_a_baseline(gp):
    gp.test_file(PLAIN)
    result = gp.run("--gpuperf", "--gpuperf-strict")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["vector_add: no baseline for device mi300x-sim, and a baseline is required*"]
    )


def test_baseline_of_another_device_is_reported_naming_it(gp):
    gp.test_file(PLAIN)
    gp.baseline("h100-sxm", [{"id": "test_perf.py::test_add", "efficiency": 0.8}])
    result = gp.run("--gpuperf")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "    vector_add *other dev*pass",
            "note: baselines for these measurements exist for other devices only: h100-sxm*",
            "note: 1 of 1 measurement has no baseline for mi300x-sim*",
            "note: record them with: pytest --gpuperf --gpuperf-save*",
        ]
    )
    # The command to record one is said once, in that note, not again for the test.
    assert result.stdout.str().count("--gpuperf-save") == 1


def test_regression_against_a_stored_baseline_fails_with_the_update_command(gp):
    gp.test_file(PLAIN)
    gp.baseline("mi300x-sim", [{"id": "test_perf.py::test_add", "efficiency": 0.9}])
    result = gp.run("--gpuperf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "vector_add: regressed: 4*% vs baseline 90.00% (-*%, beyond the allowance of -*%), "
            "confirmed by a second round: -*%",
            # what decided first: the default tolerance is 1%; the noise of +-2% is larger
            "*allowance:*+-*% = the larger of the tolerance 1.00% and the noise*",
            "*baseline:*expected 90.00% of peak = 4,770 GB/s*run-to-run +-2.00%*cache=cold)",
            "*provenance:*written by hand*mi300x-sim.toml]",
            "*measured:*",
            "*device:*mi300x*; cache=cold",
            "*update:*pytest --gpuperf --gpuperf-save --gpuperf-backend=sim "
            "test_perf.py::test_add*",
            "! test_perf.py::test_add",
            "    vector_add *4?.?%*90.0%*FAIL regression",
            "1 measurement in 1 test: 1 failed (regression)",
        ]
    )


def test_slowed_kernel_regresses_against_its_saved_baseline(gp):
    gp.test_file(PLAIN)
    gp.run("--gpuperf-save").assert_outcomes(passed=1)
    gp.write_kernel(efficiency=0.2)  # the sim's directive: this kernel now streams slower
    result = gp.run("--gpuperf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["vector_add: regressed: *% vs baseline 4*%*"])


def test_improvement_passes_with_a_note(gp):
    gp.test_file(PLAIN)
    gp.baseline("mi300x-sim", [{"id": "test_perf.py::test_add", "efficiency": 0.2}])
    result = gp.run("--gpuperf")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "  test_perf.py::test_add",
            "    vector_add *45.9%*20.0%*+129.*pass (improved)",
            "note: 1 measurement is faster than the stored baseline beyond the noise: re-record "
            "with: pytest --gpuperf --gpuperf-save --gpuperf-backend=sim test_perf.py::test_add",
            "1 measurement in 1 test: 1 ok",
        ]
    )


def test_within_tolerance_passes(gp):
    gp.test_file(PLAIN)
    gp.run("--gpuperf-save").assert_outcomes(passed=1)
    result = gp.run("--gpuperf")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*eff*base*delta*allow*verdict",
            "  test_perf.py::test_add",
            "    vector_add *45.9%*45.9%*0.?%*pass",
            "1 measurement in 1 test: 1 ok",
        ]
    )


def test_marginal_floor_passes_with_a_gpuperf_warning(gp):
    # A floor the interval straddles is sampled on until the budget (engine/sequential.py);
    # a budget too short for any look to decide (fewer than MIN_DECIDE_SAMPLES samples)
    # makes the same seed give the same samples whatever the floor.
    short = ("-o", "gpuperf_budget=0.002")
    gp.test_file(FLOORED.format(floor=0.01))
    gp.run("--gpuperf", "--gpuperf-json=first.json", *short).assert_outcomes(passed=1)
    measured = json.loads((gp.path / "first.json").read_text())["results"][0]["measurement"]
    assert len(measured["samples_s"]) < MIN_DECIDE_SAMPLES
    low, _ = measured["efficiency_ci"]
    floor = (low + measured["efficiency"]) / 2  # inside the interval, below the median
    gp.test_file(FLOORED.format(floor=floor))
    result = gp.run("--gpuperf", *short)  # the same seed gives the same measurement
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(
        ["*GpuPerfWarning: vector_add: marginal: efficiency * is just at the floor*"]
    )


def test_wrong_output_fails_on_the_assertion_and_is_never_gated(gp):
    gp.test_file(
        """
        @pytest.mark.min_bw(0.01)
        def test_add(gpu_bench):
            kernel = gpu_bench.kernel("vadd.hip", "vector_add")
            a = np.ones(1024, np.float32)
            da, dc = gpu_bench.to_device(a), gpu_bench.empty(1024)
            gpu_bench(kernel, grid=4, block=256, args=(da, da, dc, 1024), bytes=3 * 4096)
            assert (gpu_bench.from_device(dc, np.float32, 1024) == 3).all(), "wrong sum"
        """
    )
    result = gp.run("--gpuperf", "--gpuperf-json=out.json")
    result.assert_outcomes(failed=1)
    # 0.1% of peak is far below the 1% floor: only the assertion may fail the test
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: wrong sum*",
            "  test_perf.py::test_add",
            "    vector_add *0.1%*1%*not judged (test failed)",
            "1 measurement in 1 test: 1 not judged (their test failed)",
        ]
    )
    assert "below the floor" not in result.stdout.str()
    (row,) = json.loads((gp.path / "out.json").read_text())["results"]
    assert row["verdict"]["status"] == "unjudged" and row["test_outcome"] == "failed"


def test_marker_settings_reach_the_measurement(gp):
    gp.test_file(
        """
        @pytest.mark.gpuperf(cache="hot", peak_gbps=1000, tolerance=0.2)
        @pytest.mark.min_bw(1.0)
        def test_add(gpu_bench):
            result = add(gpu_bench)
            assert result.cache == "hot"
            assert result.measurement.peak_bps == 1e12
        """
    )
    gp.baseline("mi300x-sim", [{"id": "test_perf.py::test_add", "efficiency": 2.5, "cache": "hot"}])
    result = gp.run("--gpuperf", "--gpuperf-json=out.json")
    # hot data against a 1 TB/s "peak" beats the floor; a floor in hot mode is warned about
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*GpuPerfWarning: vector_add: a floor in hot mode*"])
    verdict = json.loads((gp.path / "out.json").read_text())["results"][0]["verdict"]
    assert verdict["floor"]["floor"] == 1.0 and verdict["floor"]["status"] == "pass"
    baseline = verdict["baseline"]
    assert baseline["baseline"]["efficiency"] == 2.5 and baseline["baseline"]["cache"] == "hot"
    assert baseline["tolerance"] == 0.2  # the marker's tolerance, not the default 1%
    assert baseline["allowance"] >= 0.2


def test_a_tests_peak_override_is_not_the_devices_peak(gp):
    gp.test_file(
        """
        @pytest.mark.gpuperf(peak_gbps=1000)
        def test_a(gpu_bench):
            assert add(gpu_bench).measurement.peak_bps == 1e12

        def test_b(gpu_bench):
            assert add(gpu_bench).measurement.peak_bps == 5.3e12
        """
    )
    result = gp.run("--gpuperf", "--gpuperf-json=out.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "gpuperf device: AMD Instinct MI300X [[]mi300x[]] via sim, GPU 0, gfx942, *",
            "*= gpuperf — SIMULATED DEVICE =*",
            "gpuperf device: AMD Instinct MI300X [[]mi300x[]] via sim, gfx942, peak 5.30 TB/s",
        ]
    )
    # one name in the header and the summary (the table's); the runtime's is in the JSON
    (device,) = json.loads((gp.path / "out.json").read_text())["devices"]
    assert device["peak_bps"] == 5.3e12
    assert device["name"] == "AMD Instinct MI300X"
    assert device["runtime_name"] == "Simulated AMD Instinct MI300X"


def test_callable_is_measured_with_run(gp):
    gp.test_file(
        """
        def test_callable(gpu_bench):
            kernel = gpu_bench.kernel("vadd.hip", "vector_add")
            a = np.ones(4096, np.float32)
            da, dc = gpu_bench.to_device(a), gpu_bench.empty(4096)
            launch = lambda: gpu_bench.backend.launch(kernel, 16, 256, (da, da, dc, 4096))
            result = gpu_bench.run(launch, bytes=3 * a.nbytes, name="torch_like")
            assert result.measured and result.samples >= 3
            np.testing.assert_array_equal(gpu_bench.from_device(dc, np.float32, 4096), 2 * a)
        """
    )
    result = gp.run("--gpuperf")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["  test_perf.py::test_callable", "    torch_like *cold*pass"])


def test_cache_option_sets_the_default_mode(gp):
    gp.test_file(
        """
        def test_add(gpu_bench):
            assert add(gpu_bench).cache == "hot"
            assert add(gpu_bench, name="own", cache="cold").cache == "cold"
        """
    )
    gp.run("--gpuperf", "--gpuperf-cache=hot").assert_outcomes(passed=1)
