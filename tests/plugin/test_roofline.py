"""The roofline through pytest on the simulated MI300X: a kernel that declares its FLOPs is
timed by the simulated compute roof (1307.4 TFLOP/s bf16 x 0.70, docs/simulated-device.md),
judged by min_flops and min_roofline, reported in TFLOP/s (table, failure text, JSON); a
declaration that cannot be right is one clear line; a memory-bound run is what it was; the
stored and A/B gates stay on time and show TFLOP/s; the explain pass names the pipe that fell
(tests/fake_ncu.py's counters, SIMULATED) and checks the declared FLOPs.
"""

from __future__ import annotations

import re

import pytest

from tests.git_repo import commit_all
from tests.plugin.test_explain import fake_ncu  # noqa: F401 (a fixture)

# 0.1 TFLOP of bf16 over 12.6 MB: 7,944 FLOP/B, far above the MI300X's bf16 ridge (246.7);
# the simulated device takes 0.1e12 / (1307.4e12 x 0.70) = 109 us for it
COMPUTE = 'add(gpu_bench, flops=10**11, math="bf16")'
# 0.01 GFLOP over the same bytes: 0.8 FLOP/B, memory-bound
MEMORY = 'add(gpu_bench, flops=10**7, math="bf16")'


def _one_test(body: str, marks: str = "") -> str:
    return f"\n{marks}\ndef test_add(gpu_bench):\n    {body}\n"


def _failure(output: str) -> str:
    start = output.index(" test_add ")
    return output[start : output.index("short test summary", start)]


@pytest.mark.slow
def test_a_compute_bound_kernel_passes_its_floors_and_reports_tflops(gp):
    gp.test_file(_one_test(COMPUTE, "@pytest.mark.min_flops(0.6)\n@pytest.mark.min_roofline(0.6)"))
    result = gp.run("--gpuperf", "--gpuperf-json=report.json", "-v")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert re.search(r"measured test_perf.py::test_add \[vector_add, cold\]: [\d.]+ us, [\d.]+% "
                     r"of peak, [\d.]+ TFLOP/s, [67]\d\.\d% of the bf16 peak 1307\.4 TFLOP/s "
                     r"\(compute-bound, [67]\d\.\d% of its roof\)", out), out  # fmt: skip
    assert "TFLOP/s" in out and "% bf16" in out and "60% flops 60% roof" in out
    row = gp.report()["results"][0]
    assert row["measurement"]["work"]["math"] == "bf16"
    roofline = row["measurement"]["roofline"]
    assert roofline["bound"] == "compute" and 0.6 < roofline["compute_efficiency"] < 0.8
    assert row["verdict"]["flops_floor"]["status"] == "pass"
    assert row["verdict"]["roofline_floor"]["origin"] == "min_roofline"


@pytest.mark.slow
def test_a_missed_compute_floor_fails_naming_the_roof(gp):
    gp.test_file(_one_test(COMPUTE, "@pytest.mark.min_flops(0.9)"))
    result = gp.run("--gpuperf", "--gpuperf-json=report.json")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    section = _failure(out)
    headline = r"vector_add: compute efficiency [67]\d\.\d\d% of the bf16 peak 1,307 TFLOP/s is "
    assert re.search(headline + r"below the floor 90\.00%", section), section
    assert (
        "expected >= 90.00% of the bf16 peak 1,307 TFLOP/s = 1,177 TFLOP/s (min_flops)" in section
    )
    assert "above the bf16 ridge 246.7 FLOP/B: compute-bound" in section
    assert "1 measurement in 1 test: 1 failed (compute floor)" in out
    assert gp.report()["results"][0]["verdict"]["flops_floor"]["status"] == "fail"


@pytest.mark.slow
def test_min_roofline_floors_the_memory_roof_below_the_ridge(gp):
    gp.test_file(_one_test(MEMORY, "@pytest.mark.min_roofline(0.95)"))
    result = gp.run("--gpuperf")
    result.assert_outcomes(failed=1)
    section = _failure(result.stdout.str())
    assert "roofline efficiency" in section and "of the memory roof" in section
    assert "below the bf16 ridge 246.7 FLOP/B: memory-bound" in section


@pytest.mark.slow
def test_a_memory_bound_run_is_what_it_was(gp):
    gp.test_file(_one_test("add(gpu_bench)", "@pytest.mark.min_bw(0.3)"))
    result = gp.run("--gpuperf", "--gpuperf-json=report.json", "--gpuperf-markdown=summary.md")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "TFLOP/s" not in out and "roof" not in out and "flops" not in out
    row = gp.report()["results"][0]
    assert row["measurement"]["work"] is None and row["measurement"]["roofline"] is None
    assert row["verdict"]["flops_floor"] is None and row["verdict"]["roofline_floor"] is None
    assert "TFLOP/s" not in (gp.path / "summary.md").read_text()


# -- declarations that cannot be right: one clear line each ---------------------------------

MISTAKES = {
    "min_flops_without_flops": (
        "@pytest.mark.min_flops(0.5)",
        "add(gpu_bench)",
        "test_perf.py::test_add [vector_add]: @pytest.mark.min_flops applies to this "
        "measurement, but it declared no FLOPs: give gpu_bench(...) flops= and math=",
    ),
    "unknown_math": (
        "",
        'add(gpu_bench, flops=10**9, math="bfloat16")',
        "test_perf.py::test_add [vector_add]: math=: unknown math type 'bfloat16'; valid "
        "types: fp64, fp32, tf32, bf16, fp16, fp8, int8",
    ),
    "negative_flops": (
        "",
        'add(gpu_bench, flops=-10, math="bf16")',
        "test_perf.py::test_add [vector_add]: flops= must be a positive whole number of "
        "floating-point operations, got -10",
    ),
    "float_flops": (
        "",
        'add(gpu_bench, flops=1e9, math="bf16")',
        "flops= got the float 1000000000.0; a FLOP count is a whole number (use "
        "int(1000000000.0) if it is a count)",
    ),
    "flops_without_math": ("", "add(gpu_bench, flops=10**9)", "flops= needs math="),
}


@pytest.mark.parametrize("measure", [True, False], ids=["measuring", "smoke"])
@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_a_declaration_that_cannot_be_right_is_one_clear_line(gp, name, measure):
    marks, body, words = MISTAKES[name]
    gp.test_file(_one_test(body, marks))
    result = gp.run(*(["--gpuperf"] if measure else []), "--gpuperf-json=report.json")
    result.assert_outcomes(failed=1)
    section = _failure(result.stdout.str())
    assert words in section, section
    assert "pytest_gpuperf/" not in section  # the user's lines and our message, no frames of ours
    (test,) = gp.report()["tests"]
    assert test["error"].startswith("ConfigError: ") and words in test["error"]
    assert "\n" not in test["error"]


@pytest.mark.slow
def test_a_type_the_device_has_no_peak_for_is_stated(gp):
    """The simulated MI250X (one GCD, gfx90a) has no fp8: its data sheet gives none."""
    gp.test_file(_one_test('add(gpu_bench, flops=10**9, math="fp8")'))
    result = gp.run("--gpuperf", "--gpuperf-device=mi250x")
    result.assert_outcomes(failed=1)
    assert (
        "math='fp8': no fp8 peak known for AMD Instinct MI250X (one GCD) (mi250x): the device "
        "table has fp64, fp32, bf16, fp16, int8 there" in _failure(result.stdout.str())
    )


def test_a_bad_or_misspelt_roofline_mark_fails_its_test_naming_it(gp):
    gp.test_file(_one_test(COMPUTE, "@pytest.mark.min_flops(60)"))
    result = gp.run("--gpuperf")
    result.assert_outcomes(errors=1)
    assert "@pytest.mark.min_flops(60): the floor is a fraction of the device's dense peak " in (
        result.stdout.str()
    )
    gp.test_file(_one_test(COMPUTE, "@pytest.mark.min_flop(0.6)"))
    result = gp.run("--gpuperf")
    assert "unknown marker 'min_flop': did you mean 'min_flops'?" in result.stdout.str()


@pytest.mark.slow
def test_a_callable_declares_its_work_too(gp):
    gp.test_file(
        """
        @pytest.mark.min_flops(0.5)
        def test_add(gpu_bench):
            kernel = gpu_bench.kernel("vadd.hip", "vector_add")
            n = 1 << 20
            x, y = gpu_bench.to_device(np.ones(n, np.float32)), gpu_bench.empty(n)
            gpu_bench.backend.declare_work(kernel, 10**11, "bf16")  # what the callable runs
            gpu_bench.run(
                lambda: gpu_bench.backend.launch(kernel, n // 256, 256, (x, x, y, n)),
                reads=(x, x), writes=(y,), flops=10**11, math="bf16", name="call",
            )
        """
    )
    result = gp.run("--gpuperf", "--gpuperf-json=report.json")
    result.assert_outcomes(passed=1)
    roofline = gp.report()["results"][0]["measurement"]["roofline"]
    assert roofline["bound"] == "compute" and roofline["compute_efficiency"] > 0.5


# -- the stored and A/B gates stay on time, and show TFLOP/s ---------------------------------

SLOW_COMPUTE = """\
#include "gpuperf.h"
// gpuperf-sim: compute_efficiency={speed}
GPUPERF_KERNEL void vector_add(const float* a, const float* b, float* c, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}}
"""


@pytest.fixture
def compute_repo(gp, tmp_path_factory, monkeypatch):
    """A git repository whose one test is the compute-bound vector add, committed as base."""
    monkeypatch.setenv("GPUPERF_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    gp.test_file(_one_test(COMPUTE))
    (gp.path / "vadd.hip").write_text(SLOW_COMPUTE.format(speed=0.7))
    commit_all(gp.path, "base")
    return gp


@pytest.mark.slow
def test_a_slower_head_fails_the_ab_gate_on_time_and_says_its_tflops(compute_repo):
    (compute_repo.path / "vadd.hip").write_text(SLOW_COMPUTE.format(speed=0.5))
    result = compute_repo.run("--gpuperf-compare=HEAD", "--gpuperf-json=report.json")
    result.assert_outcomes(failed=1)
    section = _failure(result.stdout.str())
    assert "A/B regressed against HEAD" in section
    assert re.search(r"compute: +head [\d.]+ TFLOP/s vs base [\d.]+ TFLOP/s \(bf16, the same "
                     r"100,000,000,000 declared operations\)", section), section  # fmt: skip
    comparison = compute_repo.report()["results"][0]["verdict"]["comparison"]
    assert comparison["state"] == "regressed" and comparison["ratio"] == pytest.approx(
        1.4, rel=0.03
    )


@pytest.mark.slow
def test_a_slower_kernel_fails_its_stored_baseline_and_says_the_baselines_tflops(compute_repo):
    compute_repo.run("--gpuperf-save").assert_outcomes(passed=1)
    (compute_repo.path / "vadd.hip").write_text(SLOW_COMPUTE.format(speed=0.5))
    result = compute_repo.run("--gpuperf", "--gpuperf-tolerance=0.05")
    result.assert_outcomes(failed=1)
    section = _failure(result.stdout.str())
    assert "regressed:" in section
    baseline = r"baseline: +expected [\d.]+% of peak = [\d,.]+ GB/s = [\d.]+ TFLOP/s \(bf16\)"
    assert re.search(baseline, section), section
    measured = r"measured: .* [\d.]+ TFLOP/s = [45]\d\.\d\d% of the bf16 peak"
    assert re.search(measured, section), section


@pytest.mark.slow
def test_the_explain_pass_names_the_pipe_that_fell_and_checks_the_flops(
    compute_repo,
    fake_ncu,  # noqa: F811
    monkeypatch,
):
    monkeypatch.setenv("FAKE_NCU_MODE", "ok")
    monkeypatch.setenv("FAKE_NCU_TENSOR_SCALE", "0.5")  # SIMULATED: head's tensor pipe at 40%
    monkeypatch.setenv("FAKE_NCU_FLOPS", str(10**11))
    monkeypatch.setenv("FAKE_NCU_UNKNOWN", "sm__pipe_tensor_op_gmma_cycles_active")
    (compute_repo.path / "vadd.hip").write_text(SLOW_COMPUTE.format(speed=0.5))
    result = compute_repo.run(
        "--gpuperf-compare=HEAD", "--gpuperf-explain", "--gpuperf-json=report.json"
    )
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "explain: tensor pipe utilisation fell 80% -> 40% (mma.sync (HMMA))" in out, out
    assert "ncu does not know sm__pipe_tensor_op_gmma_cycles_active on this GPU" in out
    assert (
        "declared FLOPs match the counters: 100.00 GFLOP counted (100.00 GFLOP of it on the "
        "tensor path) against 100.00 GFLOP declared (+0.0%), within 5%" in out
    )
    explain = compute_repo.report()["results"][0]["verdict"]["explain"]
    assert explain["traffic"]["head"]["tensor_pipe"] == pytest.approx(0.4)
    assert explain["flops_check"]["outcome"] == "within"
