"""Code facts on a real NVIDIA GPU: the driver's function attributes and occupancy agree with
what the no-GPU path reads from NVRTC's ptxas report and the occupancy rules, and a real A/B
failure of an edit that adds register pressure (a larger unroll) names the change.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_ab_on_gpu import TEST  # the same user test: a + b + extra, 32M floats

from pytest_gpuperf.explain.code.code_facts import nvidia_facts
from pytest_gpuperf.explain.code.kernel_facts import facts_of, nvrtc_build
from tests.git_repo import commit_all

REPO = Path(__file__).resolve().parents[2]

KERNELS = """\
#include "gpuperf.h"
GPUPERF_KERNEL void add3(const float* a, const float* b, const float* d, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i] + d[i];
}
GPUPERF_KERNEL void __launch_bounds__(128) tile(const double* a, double* c, int n) {
    __shared__ double s[128];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = i < n ? a[i] : 0.0;
    __syncthreads();
    if (i < n) c[i] = s[127 - threadIdx.x];
}
GPUPERF_KERNEL void spill(const float* a, float* c, int n) {
    float v[64];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (int k = 0; k < 64; ++k) v[k] = a[(i + k * 977) % n];
    float s = 0;
    for (int k = 0; k < 64; ++k) s += v[(k * 7 + i) & 63];
    if (i < n) c[i] = s;
}
GPUPERF_KERNEL void heavy(const float* a, float* c, int n) {
    float v[48];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
    for (int k = 0; k < 48; ++k) v[k] = a[(i + k * 4099) % n];
    float s = 0;
#pragma unroll
    for (int k = 0; k < 48; ++k) s += v[k] * v[(k + 5) % 48];
    if (i < n) c[i] = s;
}
"""


@pytest.mark.gpu
@pytest.mark.parametrize(
    "name, block", [("add3", 256), ("tile", 128), ("spill", 256), ("heavy", 256), ("heavy", 1024)]
)
def test_the_driver_agrees_with_the_no_gpu_path(cuda_backend, tmp_path, name, block):
    source = tmp_path / "kernels.hip"
    source.write_text(KERNELS)
    module = cuda_backend.compile(source)
    module.source_path = source
    kernel = module.kernel(name)
    n = 1 << 16
    buffers = [cuda_backend.alloc(8 * n) for _ in range(4)]
    args = {"add3": (*buffers[:4], n), "tile": (*buffers[:2], n)}.get(name, (*buffers[:2], n))
    cuda_backend.launch(kernel, grid=n // block, block=block, args=args)
    cuda_backend.synchronize()
    driven = facts_of(kernel, block=(block, 1, 1))
    cubin, log, version = nvrtc_build(kernel, source, "sm_90", {}, 300.0)
    offline = nvidia_facts(cubin, log, name, "sm_90", toolchain=version, block_threads=block)
    print(f"\n{name} block {block}: driver {driven}\n  no-GPU {offline}")
    assert "driver" in dict(driven.sources)["resources"]
    assert "driver" in dict(driven.sources)["occupancy"]
    assert driven.fingerprint == offline.fingerprint  # the -v build is the loaded code
    for fact in ("registers", "local_bytes", "shared_bytes", "max_threads_per_block"):
        assert getattr(driven, fact) == getattr(offline, fact), fact
    assert driven.occupancy == pytest.approx(offline.occupancy), (driven, offline)
    assert offline.global_loads is not None  # nvdisasm found on the GPU machine
    for buffer in buffers:
        buffer.free()


KERNEL_AB = """\
#include "gpuperf.h"
#define UNROLL {unroll}
// c = a + b, plus UNROLL scattered reads of zeros all live at once (the first step of the
// chain needs the first and the last): a larger UNROLL holds more registers and moves more
// requests, the result unchanged.
GPUPERF_KERNEL void add_more(const float* a, const float* b, float* c, const float* extra,
                             int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float keep[UNROLL];
#pragma unroll
    for (int k = 0; k < UNROLL; ++k) keep[k] = extra[(i + k * 4099) % n];
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < UNROLL; ++k) s = s * keep[UNROLL - 1 - k] + keep[k];
    c[i] = a[i] + b[i] + s;
}}
"""


@pytest.mark.gpu
def test_a_larger_unroll_names_registers_and_occupancy_in_a_real_ab_failure(
    cuda_backend, tmp_path, capsys
):
    root = tmp_path / "project"
    root.mkdir()
    (root / "add_more.hip").write_text(KERNEL_AB.format(unroll=2))
    (root / "test_add_more.py").write_text(TEST)  # its output check holds: s is 0
    commit_all(root, "base")
    (root / "add_more.hip").write_text(KERNEL_AB.format(unroll=24))  # the pull request
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO), env.get("PYTHONPATH"))))
    report = root / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "pytest_gpuperf.plugin", "-p", "no:cacheprovider",
         "--gpuperf", "--gpuperf-backend=cuda", "--gpuperf-compare=HEAD",
         f"--gpuperf-json={report}", "--gpuperf-markdown=summary.md", "-q"],
        cwd=root, env=env, capture_output=True, text=True, timeout=400, check=False,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    with capsys.disabled():
        print("\n" + output[-6000:])
        print((root / "summary.md").read_text()[-3000:])
    assert proc.returncode == 1, output[-4000:]
    verdict = json.loads(report.read_text())["results"][0]["verdict"]
    code = verdict["explain"]["code"]
    with capsys.disabled():
        print(json.dumps(verdict["explain"], indent=1))
    # NVRTC 13 for sm_90: 18 -> 40 registers, 100% -> 75% at 256 threads (registers)
    assert code["head"]["registers"] > code["base"]["registers"]
    assert code["head"]["occupancy"] < code["base"]["occupancy"]
    assert code["head"]["occupancy_limiter"] == "registers"
    assert any(line.startswith("registers ") and "occupancy" in line for line in code["changes"])
    assert "  code:" in output and "registers " in output
    assert "the driver" in code["head"]["sources"]["resources"]
