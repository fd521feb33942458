"""The docs' in-place example (docs/writing-perf-tests.md, "A kernel that updates its input
in place") measured on a real GPU through pytest, cold and hot: the setup's `gpu_bench.copy`
only queues, so the timed launches find the GPU busy and the measurement ends with its
samples in seconds (a setup that waited for the GPU once ended after 53 s with no usable
sample). Also a bf16 RMSNorm through the CUDA backend (hip_bf16.h mapped to cuda_bf16.h)
against NumPy with the simulated device's bfloat16 helpers."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from tests.doc_samples import section_code
from tests.half_precision import HALF_KERNELS
from tests.toolchains import need

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "writing-perf-tests.md"
SECTION = "### A kernel that updates its input in place"

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("cache", ["cold", "hot"])
def test_the_in_place_example_measures_with_a_copy_in_its_setup(
    pytester, monkeypatch, cuda_backend, cache
):
    kernel, test = section_code(DOC, SECTION, "cpp"), section_code(DOC, SECTION, "python")
    (pytester.path / "axpy.hip").write_text(kernel)
    pytester.makepyfile(test_axpy=test)
    paths = [str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    json_path = pytester.path / "report.json"
    started = time.monotonic()
    result = pytester.runpytest_subprocess(
        "-p", "pytest_gpuperf.plugin", "-p", "no:cacheprovider", "--gpuperf",
        "--gpuperf-backend=cuda", f"--gpuperf-cache={cache}",
        f"--gpuperf-baseline-dir={pytester.path / 'baselines'}", f"--gpuperf-json={json_path}",
    )  # fmt: skip
    took_s = time.monotonic() - started
    assert result.ret == 0, result.stdout.str()
    (row,) = json.loads(json_path.read_text())["results"]
    measurement = row["measurement"]
    assert len(measurement["samples_s"]) >= 10, measurement
    assert 0.3 < measurement["efficiency"] <= 1.0, measurement  # 192 MiB: HBM speed
    assert took_s < 60, took_s
    print(f"\n[{cache}] {measurement['time_s'] * 1e6:.1f} us, {measurement['efficiency']:.1%} "
          f"of peak, {len(measurement['samples_s'])} samples, {took_s:.1f} s")  # fmt: skip


def test_a_bf16_rmsnorm_on_the_gpu_matches_numpy(cuda_backend, tmp_path):
    need("cuda-headers")
    from pytest_gpuperf.simulate.bfloat16 import from_bfloat16, to_bfloat16

    source = tmp_path / "half_kernels.hip"
    source.write_text(HALF_KERNELS)
    kernel = cuda_backend.compile(source).kernel("rmsnorm_bf16")
    rows, cols = 64, 4096
    rng = np.random.default_rng(0)
    x = to_bfloat16(rng.standard_normal(rows * cols, dtype=np.float32))
    w = to_bfloat16(rng.random(cols, dtype=np.float32) + 0.5)
    dx, dw = cuda_backend.to_device(x), cuda_backend.to_device(w)
    dy = cuda_backend.alloc(x.nbytes)
    try:
        cuda_backend.launch(kernel, rows, 256, (dx, dw, dy, rows, cols, 1e-6))
        got = from_bfloat16(dy.download(np.uint16)).reshape(rows, cols)
    finally:
        for buffer in (dx, dw, dy):
            buffer.free()
    values = from_bfloat16(x).reshape(rows, cols).astype(np.float64)
    scale = 1 / np.sqrt((values * values).mean(axis=1, keepdims=True) + 1e-6)
    normed = from_bfloat16(to_bfloat16((values * scale).astype(np.float32)))
    want = from_bfloat16(to_bfloat16(normed * from_bfloat16(w)))
    # the device's rsqrtf and sum order may move a value across a bf16 rounding step, twice
    np.testing.assert_allclose(got, want, rtol=2**-6, atol=0)
