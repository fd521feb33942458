"""Smoke mode, no GPU, and the fallback to the simulated device."""

from __future__ import annotations

FLOORED = """
@pytest.mark.min_bw(0.99)
def test_add(gpu_bench):
    result = add(gpu_bench)
    assert not result.measured
    assert result.efficiency is None and result.time_s is None and result.samples == 0
    print("NOTE", result.note)
"""


def test_without_gpuperf_each_call_launches_once_and_nothing_is_gated(gp):
    gp.test_file(FLOORED)
    result = gp.run("-s")
    result.assert_outcomes(passed=1)  # a floor of 99% is not applied without --gpuperf
    result.stdout.fnmatch_lines(
        [
            "gpuperf: smoke mode (each gpu_bench call launches once, no timing, no gate)*",
            "*NOTE not measured: launched once as a correctness check (run with --gpuperf*",
            "gpuperf: smoke mode: 1 gpu_bench call(s) launched once and checked, nothing timed*",
        ]
    )
    assert not (gp.path / "baselines").exists()


def test_empty_buffers_are_poisoned_so_unwritten_outputs_show(gp):
    gp.test_file(
        """
        def test_add(gpu_bench):
            out = gpu_bench.from_device(gpu_bench.empty((4, 64)), np.float32, (4, 64))
            assert out.shape == (4, 64) and np.isnan(out).all()
            ints = gpu_bench.from_device(gpu_bench.empty(8, np.int32), np.int32)
            assert (ints == -1).all()
        """
    )
    gp.run().assert_outcomes(passed=1)


def test_no_gpu_skips_saying_what_was_tried(gp, hidden_gpus):
    gp.test_file(FLOORED)
    result = gp.run_subprocess("--gpuperf", "-rs", backend="hip,cuda")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        [
            "gpuperf: no usable GPU (hip: *; cuda: *)*; tests using gpu_bench will be skipped",
            "SKIPPED [[]1[]] test_perf.py:*: gpuperf: no usable GPU (hip: *; cuda: *). "
            "Add sim to --gpuperf-backend*",
        ]
    )


def test_fallback_to_the_simulated_device_says_so_in_header_and_summary(gp, hidden_gpus):
    gp.test_file("def test_add(gpu_bench):\n    add(gpu_bench)\n")
    result = gp.run_subprocess("--gpuperf", backend="hip,cuda,sim")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "gpuperf: the SIMULATED device is the fallback when no GPU is found*",
            "collected 1 item",
            "gpuperf device: AMD Instinct MI300X [[]mi300x[]] via sim*",
            "gpuperf device: *** SIMULATED *** times come from a model, not a GPU*",
            "gpuperf device: *** FELL BACK to sim: hip: *; cuda: * (-v: why)",
            "*= gpuperf — SIMULATED DEVICE =*",
            "gpuperf device: *** SIMULATED *** times come from a model, not a GPU*",
            "SIMULATED device — numbers are not measurements",
        ]
    )
    output = result.stdout.str()
    assert output.count("FELL BACK") == 1  # said once, in the header
    fell_back = next(line for line in output.splitlines() if "FELL BACK" in line)
    assert len(fell_back) <= 120, fell_back
    verbose = gp.run_subprocess("--gpuperf", "-v", backend="hip,cuda,sim")
    # -v: each backend's whole reason and way out (ROCM_PATH, the driver), header and summary
    assert verbose.stdout.str().count("FELL BACK") == 2
    assert "(-v: why)" not in verbose.stdout.str()


def test_device_option_selects_the_simulated_model(gp):
    gp.test_file(
        """
        def test_add(gpu_bench):
            assert gpu_bench.device.key == "h100-sxm"
            assert add(gpu_bench).measurement.device_key == "h100-sxm"
        """
    )
    result = gp.run("--gpuperf", "--gpuperf-device=h100-sxm")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["gpuperf device: NVIDIA H100 SXM 80GB [[]h100-sxm[]] via sim*"])


def test_kernel_paths_resolve_to_the_shipped_kernels(gp):
    gp.test_file(
        """
        def test_shipped(gpu_bench):
            result = add(gpu_bench, path="kernels/vector_add.hip")
            assert result.kernel == "vector_add"

        def test_missing(gpu_bench):
            gpu_bench.kernel("no_such.hip", "k")
        """
    )
    result = gp.run()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*ConfigError: kernel source 'no_such.hip' not found; looked for: *"]
    )
