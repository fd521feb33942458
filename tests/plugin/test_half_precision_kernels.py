"""bf16 and fp16 HIP kernels (`#include <hip/hip_bf16.h>`, as most LLM kernels begin) through
the plugin on the simulated device: measured and checked with a model written with the
simulated device's bfloat16 helpers, syntax-checked by clang-19 against the plugin's own
headers, through the static gate (--gpuperf-static=gfx942, no ROCm needed) with their facts,
and explained by their code facts when an A/B fails; a header nobody provides is named in the
failure's `code:` row by clang's own words."""

from __future__ import annotations

import pytest

from tests import toolchains
from tests.git_repo import commit_all
from tests.half_precision import HALF_KERNELS

STATIC = "--gpuperf-static=gfx942"

MODEL = """
import numpy as np

from pytest_gpuperf import simulate
from pytest_gpuperf.simulate.bfloat16 import from_bfloat16, to_bfloat16


@simulate.model("half_kernels.hip", "rmsnorm_bf16", efficiency=0.6)
def rmsnorm_bf16(args, launch):
    x, w, y, rows, cols, eps = args  # bf16 buffers arrive as their uint16 bit patterns
    rows_x = from_bfloat16(x[: rows * cols]).reshape(rows, cols)
    sums = (rows_x * rows_x).sum(axis=1, dtype=np.float32, keepdims=True)
    scale = np.float32(1) / np.sqrt(sums / np.float32(cols) + np.float32(eps))
    normed = from_bfloat16(to_bfloat16(rows_x * scale))  # __float2bfloat16(x * scale)
    y[: rows * cols] = to_bfloat16(normed * from_bfloat16(w[:cols])).ravel()  # bf16 * bf16
"""

TEST = """
import numpy as np

from pytest_gpuperf.simulate.bfloat16 import from_bfloat16, to_bfloat16

ROWS, COLS = 64, 4096


def test_rmsnorm_bf16(gpu_bench):
    kernel = gpu_bench.kernel("half_kernels.hip", "rmsnorm_bf16")
    rng = np.random.default_rng(0)
    x = to_bfloat16(rng.standard_normal(ROWS * COLS, dtype=np.float32))
    w = to_bfloat16(rng.random(COLS, dtype=np.float32) + 0.5)
    dx, dw, dy = gpu_bench.to_device(x), gpu_bench.to_device(w), gpu_bench.empty(x.size, np.uint16)
    gpu_bench(kernel, grid=ROWS, block=256, args=(dx, dw, dy, ROWS, COLS, 1e-6),
              reads=(x, w), writes=(x,))
    got = from_bfloat16(gpu_bench.from_device(dy, np.uint16)).reshape(ROWS, COLS)
    rows = from_bfloat16(x).reshape(ROWS, COLS).astype(np.float64)
    want = rows / np.sqrt((rows * rows).mean(axis=1, keepdims=True) + 1e-6) * from_bfloat16(w)
    np.testing.assert_allclose(got, want, rtol=2**-7, atol=1e-6)  # two bf16 roundings
"""


@pytest.fixture
def bf16(gp, tmp_path, monkeypatch):
    """A project with the bf16 kernels, their model and a test that checks their output."""
    monkeypatch.setenv("GPUPERF_CACHE_DIR", str(tmp_path / "kernel-cache"))
    (gp.path / "half_kernels.hip").write_text(HALF_KERNELS)
    conftest = gp.path / "conftest.py"
    conftest.write_text(conftest.read_text() + MODEL)
    gp.pytester.makepyfile(test_bf16=TEST)
    return gp


def test_a_bf16_kernel_is_measured_and_checked_on_the_simulated_device(bf16):
    bf16.run().assert_outcomes(passed=1)  # smoke: one launch
    result = bf16.run("--gpuperf", "--gpuperf-json=report.json")
    result.assert_outcomes(passed=1)
    (row,) = bf16.report()["results"]
    measured = row["measurement"]
    assert measured["name"] == "rmsnorm_bf16"
    assert measured["bytes_moved"] == 2 * (2 * 64 * 4096) + 2 * 4096  # x read, y written, w
    assert measured["efficiency"] > 0 and len(measured["samples_s"]) > 1


def test_a_bf16_kernel_that_does_not_compile_fails_on_the_simulated_device(bf16, clang19):
    """The simulated device checks a source with clang-19 and the static gate's headers;
    without a hip_bf16.h of its own it had to leave every bf16 kernel unchecked."""
    kernel = bf16.path / "half_kernels.hip"
    kernel.write_text(kernel.read_text().replace("__bfloat162float(in[c])", "__bf162float(in[c])"))
    result = bf16.run("--gpuperf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*does not compile (clang 19*, checked for the simulated device): error: use of "
         "undeclared identifier '__bf162float'*"]
    )  # fmt: skip


def test_the_static_gate_builds_a_bf16_kernel_and_records_its_facts(bf16, clang19):
    result = bf16.run(STATIC, "--gpuperf-save")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["rmsnorm_bf16  half_kernels.hip    256 *100% (8 w/SIMD)*no stored facts, saved", "*1 new"]
    )
    stored = (bf16.path / "baselines" / "static" / "gfx942.toml").read_text()
    assert 'kernel = "rmsnorm_bf16"' in stored and 'hip_runtime = "gpuperf"' in stored
    again = bf16.run(STATIC)
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(["*rmsnorm_bf16*half_kernels.hip*code unchanged*"])


def test_an_ab_regression_of_a_bf16_kernel_names_its_code_change(bf16, clang19):
    commit_all(bf16.path, "the base")
    kernel = bf16.path / "half_kernels.hip"
    kernel.write_text(
        kernel.read_text()
        .replace(
            "GPUPERF_KERNEL void rmsnorm_bf16",
            "// gpuperf-sim: efficiency=0.3\nGPUPERF_KERNEL void rmsnorm_bf16",
        )
        .replace("* scale) * w[c];", "* scale) * __hmax(w[c], w[(c + 1) % cols]);")
    )  # a second load of w per element, and the simulated device made slower
    result = bf16.run("--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-json=report.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["rmsnorm_bf16: A/B regressed against HEAD*", "  code:*global loads 3 -> 4 (b16 3 -> 4*"]
    )
    code = bf16.report()["results"][0]["verdict"]["explain"]["code"]
    assert code["head"]["global_loads"]["b16"] == code["base"]["global_loads"]["b16"] + 1


def test_a_header_nobody_provides_is_named_in_the_code_row(bf16, clang19):
    """ROCm 6's `hip/hip_fp8.h` is not among the static gate's headers (nor in Debian's ROCm
    5.2): the simulated device cannot check such a source and runs it, and when its A/B
    fails, the `code:` row quotes clang's first error, not only that clang failed."""
    kernel = bf16.path / "half_kernels.hip"
    commit_all(bf16.path, "the base")
    kernel.write_text(
        kernel.read_text()
        .replace("#include <hip/hip_fp16.h>", "#include <hip/hip_fp16.h>\n#include <hip/hip_fp8.h>")
        .replace(
            "GPUPERF_KERNEL void rmsnorm_bf16",
            "// gpuperf-sim: efficiency=0.3\nGPUPERF_KERNEL void rmsnorm_bf16",
        )
    )
    result = bf16.run("--gpuperf", "--gpuperf-compare=HEAD", "--gpuperf-json=report.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["  code:*clang could not build half_kernels.hip for gfx942: half_kernels.hip:4:10: "
         "fatal error: 'hip/hip_fp8.h' file not found"]
    )  # fmt: skip
    code = bf16.report()["results"][0]["verdict"]["explain"]["code"]
    assert "'hip/hip_fp8.h' file not found" in code["unavailable"]


def test_the_toolchain_reason_names_the_headers(monkeypatch):
    """On a machine where NVRTC has no CUDA headers, the NVRTC bf16 tests skip for that."""
    from pytest_gpuperf.runtime import cuda_compiler

    toolchains.missing.cache_clear()
    monkeypatch.setattr(cuda_compiler, "cuda_headers_dir", lambda: None)
    try:
        why = toolchains.missing("cuda-headers")
    finally:
        toolchains.missing.cache_clear()
    assert why is not None and "nvidia-cuda-runtime" in why and "pip install" in why
