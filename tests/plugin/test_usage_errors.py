"""Bad input: every mistake is an error that names the test, option or ini key at fault."""

from __future__ import annotations

import pytest

USAGE = pytest.ExitCode.USAGE_ERROR


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        (
            "min_bw(1.7)",
            "*test_perf.py::test_add: @pytest.mark.min_bw(1.7): the floor is a "
            "fraction of the peak bandwidth and must be in (0, 1]",
        ),
        ("min_bw(80)", "*min_bw(80)*must be in (0, 1] (a percentage? did you mean 0.8?)"),
        (
            'min_bw("fast")',
            "*test_perf.py::test_add: @pytest.mark.min_bw('fast'): the floor must be a number*",
        ),
        (
            "min_bw()",
            "*test_perf.py::test_add: @pytest.mark.min_bw takes one positional fraction and "
            "optionally name=, device=, cache=*; got ()",
        ),
        (
            "gpuperf(colour=1)",
            "*test_perf.py::test_add: @pytest.mark.gpuperf: unknown keyword "
            "'colour'; valid keywords: tolerance, cache, budget_s, peak_gbps, strict",
        ),
        (
            'gpuperf(cache="warm")',
            "*test_perf.py::test_add: @pytest.mark.gpuperf(cache=...): "
            "unknown cache mode 'warm'; valid modes: cold *, hot *, rotate *",
        ),
        ("gpuperf(tolerance=5)", "*gpuperf(tolerance=...): the tolerance*must be in [[]0, 0.5]*"),
        ("gpuperf(0.1)", "*@pytest.mark.gpuperf takes keyword arguments only*"),
        ("gpuperf(budget_s=1e307)", "*gpuperf(budget_s=...): the budget must be * (0, 86400]*"),
        ("gpuperf(peak_gbps=1e307)", "*gpuperf(peak_gbps=...): must be GB/s in (0, 100000]*"),
    ],
)
def test_bad_marker_is_a_usage_error_naming_the_test(gp, marker, message):
    """A bad marker fails its own test (an error at setup, no traceback into the plugin), not
    the whole session."""
    gp.test_file(f"@pytest.mark.{marker}\n{BAD_AND_GOOD}")
    result = gp.run("--gpuperf")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of test_add*",
            f"pytest-gpuperf: {message}",
            "ERROR test_perf.py::test_add - Failed: pytest-gpuperf: *",
        ]
    )


BAD_AND_GOOD = """def test_add(gpu_bench):
    add(gpu_bench)

def test_good(gpu_bench):
    add(gpu_bench)
"""


def test_bad_marker_is_caught_in_smoke_mode_too(gp):
    gp.test_file(f"@pytest.mark.min_bw(1.7)\n{BAD_AND_GOOD}")
    result = gp.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["pytest-gpuperf: *min_bw(1.7)*"])


def test_bad_marker_on_a_deselected_test_does_not_stop_the_session(gp):
    gp.test_file(f"@pytest.mark.min_bw(1.7)\n{BAD_AND_GOOD}")
    result = gp.run("--gpuperf", "-k", "test_good")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--gpuperf-cache=warm", "--gpuperf-cache: unknown cache mode 'warm'; valid modes: cold*"),
        ("--gpuperf-tolerance=5%", "--gpuperf-tolerance: * must be a number in [[]0, 0.5], *"),
        ("--gpuperf-tolerance=1.5", "--gpuperf-tolerance: * must be in [[]0, 0.5], got *1.5*"),
        ("--gpuperf-budget=0", "--gpuperf-budget: the budget must be a number of seconds in*"),
        # Before: accepted, then an OverflowError in every test
        (
            "--gpuperf-budget=1e307",
            "--gpuperf-budget: the budget must be a number of seconds in (0, 86400] (a day at "
            "most), got '1e307'",
        ),
        ("--gpuperf-kernel-timeout=1e307", "--gpuperf-kernel-timeout: the kernel timeout must*"),
        ("--gpuperf-compile-timeout=1e20", "--gpuperf-compile-timeout: *in (0, 86400]*"),
        # Before: more than 4,300 digits were a ValueError traceback out of int()
        ("--gpuperf-compare-loads=" + "9" * 5000, "--gpuperf-compare-loads: expected * 1 to 64*"),
        ("--gpuperf-compare-buffer-sets=" + "9" * 5000, "--gpuperf-compare-buffer-sets: *1 to 64*"),
        ("--gpuperf-history=" + "9" * 5000, "--gpuperf-history: expected * from 1 to 100*"),
        ("--gpuperf-gpu=" + "9" * 5000, "--gpuperf-gpu: expected a device index from 0 to 1023*"),
        ("--gpuperf-sim-gpus=" + "9" * 5000, "--gpuperf-sim-gpus: expected a number of simul*"),
        (
            "--gpuperf-backend=rocm",
            "--gpuperf-backend: unknown backend 'rocm'; choose from hip, cuda, sim*",
        ),
        ("--gpuperf-device=mi999", "--gpuperf-device: unknown device key 'mi999'; known keys: *"),
        ("--gpuperf-gpu=first", "--gpuperf-gpu: expected a device index from 0 to 1023*"),
    ],
)
def test_bad_option_is_a_usage_error_naming_it(gp, option, message):
    gp.test_file("def test_add(gpu_bench):\n    add(gpu_bench)\n")
    result = gp.run_plain("--gpuperf", option)
    assert result.ret == USAGE
    result.stderr.fnmatch_lines([f"ERROR: pytest-gpuperf: {message}"])


def test_bad_ini_value_is_a_usage_error_naming_the_key(gp):
    gp.pytester.makeini("[pytest]\ngpuperf_tolerance = lots\n")
    gp.test_file("def test_add(gpu_bench):\n    add(gpu_bench)\n")
    result = gp.run("--gpuperf")
    assert result.ret == USAGE
    # pytest >= 8.4 converts the float itself, older releases leave it to the plugin
    result.stderr.fnmatch_lines(["ERROR: pytest-gpuperf: gpuperf_tolerance (ini): *'lots'*"])
    assert "Traceback" not in result.stderr.str()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("gpuperf_compare_loads = 2.5", "gpuperf_compare_loads (ini): *'2.5'*"),
        ("gpuperf_compile_timeout = 0", "gpuperf_compile_timeout (ini): *must be a number of*"),
        ("gpuperf_kernel_timeout = 1e307", "gpuperf_kernel_timeout (ini): * (0, 86400]*"),
        ("gpuperf_gpu = first", "gpuperf_gpu (ini): *'first'*"),
    ],
)
def test_typed_ini_numbers_are_checked_naming_the_key(gp, line, message):
    gp.pytester.makeini(f"[pytest]\n{line}\n")
    gp.test_file("def test_add(gpu_bench):\n    add(gpu_bench)\n")
    result = gp.run("--gpuperf")
    assert result.ret == USAGE
    result.stderr.fnmatch_lines([f"ERROR: pytest-gpuperf: {message}"])


def test_typed_ini_numbers_reach_the_settings(gp):
    gp.pytester.makeini("[pytest]\ngpuperf_budget = 0.02\ngpuperf_compare_loads = 4\n")
    gp.test_file("def test_add(gpu_bench):\n    add(gpu_bench)\n")
    result = gp.run_plain("--gpuperf", "--gpuperf-backend=sim")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["gpuperf: measure and gate, *budget 0.02 s*"])


def test_command_line_wins_over_ini(gp):
    gp.pytester.makeini("[pytest]\ngpuperf_cache = warm\n")
    gp.test_file("def test_add(gpu_bench):\n    assert add(gpu_bench).cache == 'hot'\n")
    gp.run("--gpuperf", "--gpuperf-cache=hot").assert_outcomes(passed=1)


def test_unknown_cache_mode_in_a_call_fails_the_test_listing_the_modes(gp):
    gp.test_file("def test_add(gpu_bench):\n    add(gpu_bench, cache='lukewarm')\n")
    result = gp.run("--gpuperf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ConfigError: test_perf.py::test_add [[]vector_add[]]: gpu_bench(cache=...): unknown "
            "cache mode 'lukewarm'; valid modes: cold *, hot *, rotate *"
        ]
    )


def test_duplicate_measurement_name_fails_the_test(gp):
    gp.test_file(
        """
        def test_add(gpu_bench):
            add(gpu_bench)
            add(gpu_bench)
        """
    )
    result = gp.run("--gpuperf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ConfigError: test_perf.py::test_add: a measurement named 'vector_add' was already "
            "taken in this test; give each gpu_bench(...) call in a test its own name=...*"
        ]
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("bytes=0", "*bytes= byte counts must be positive, got 0"),
        ("bytes=8, reads=(a,)", "*give bytes= or reads=/writes=, not both"),
        ("", "*declare the bytes the kernel must move: bytes=N, or reads=*"),
        ("reads=('a',)", "*reads=/writes= takes arrays, device buffers or byte counts, got str"),
    ],
)
def test_bad_byte_declarations_fail_the_test(gp, call, message):
    gp.test_file(
        f"""
        def test_add(gpu_bench):
            kernel = gpu_bench.kernel("vadd.hip", "vector_add")
            a = np.ones(256, np.float32)
            da, dc = gpu_bench.to_device(a), gpu_bench.empty(256)
            gpu_bench(kernel, grid=1, block=256, args=(da, da, dc, 256), {call})
        """
    )
    result = gp.run("--gpuperf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*ConfigError: vector_add: {message.lstrip('*')}"])
