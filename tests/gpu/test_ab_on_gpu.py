"""A/B in one run on a real GPU, through pytest itself: a kernel edited to move 20% more bytes
regresses against the committed version, identical code is not timed, and identical code timed
anyway (the A/A control) passes; on the cuda backend and on the hip backend (through the shim).

Each inner pytest is a separate process in a throwaway git repository: the base is its commit,
the head the work tree, as on a pull request.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_hip_shim import CHILD_TIMEOUT_S, shim_env, shim_root  # noqa: F401 (fixtures)

from tests.git_repo import commit_all

REPO = Path(__file__).resolve().parents[2]

KERNEL = """\
#include "gpuperf.h"
#define EXTRA_PERMILLE {permille}
// c = a + b, reading EXTRA_PERMILLE/1000 of 12 n bytes more from `extra` (zeros: the result
// never changes, but every load happens): a slowdown made of real memory traffic.
GPUPERF_KERNEL void add_more(const float* a, const float* b, float* c, const float* extra,
                             int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int extra_n = (int)((long long)n * 3 * EXTRA_PERMILLE / 1000);
    if (i < n) {{
        float value = a[i] + b[i];
        if (i < extra_n && extra[i] == 1.0e30f) {{
            value = 0.0f;
        }}
        c[i] = value;
    }}
}}
"""

TEST = """\
import numpy as np

N = 32 << 20  # 384 MiB moved: beyond any L2


def test_add_more(gpu_bench):
    kernel = gpu_bench.kernel("add_more.hip", "add_more")
    a = np.random.default_rng(0).random(N, dtype=np.float32)
    da, db, dc = gpu_bench.to_device(a), gpu_bench.to_device(a), gpu_bench.empty(N)
    extra = gpu_bench.to_device(np.zeros(N, np.float32))
    gpu_bench(kernel, grid=N // 256, block=256, bytes=12 * N, args=(da, db, dc, extra, N))
    np.testing.assert_array_equal(gpu_bench.from_device(dc, np.float32, N), a + a)
"""


def _project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "add_more.hip").write_text(KERNEL.format(permille=0))
    (root / "test_add_more.py").write_text(TEST)
    commit_all(root, "base")
    return root


def _run(root: Path, backend: str, env: dict[str, str], *options: str) -> tuple[int, str, dict]:
    report = root / "report.json"
    report.unlink(missing_ok=True)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "pytest_gpuperf.plugin", "-p", "no:cacheprovider",
         "--gpuperf", f"--gpuperf-backend={backend}", "--gpuperf-compare=HEAD",
         f"--gpuperf-json={report}", "-q", *options],
        cwd=root, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    comparison = {}
    if report.exists():
        results = json.loads(report.read_text())["results"]
        comparison = results[0]["verdict"]["comparison"] if results else {}
    return proc.returncode, output, comparison


def _check_ab(root: Path, backend: str, env: dict[str, str]) -> None:
    code, output, comparison = _run(root, backend, env)
    assert code == 0 and comparison["state"] == "unchanged", output[-4000:]

    code, output, comparison = _run(root, backend, env, "--gpuperf-compare-force")
    assert code == 0 and comparison["state"] == "pass", output[-4000:]
    low, high = comparison["ratio_ci"]
    assert 0.995 < low <= high < 1.005, comparison  # A/A: identical code, no difference
    # the drift between the 8 loads per side was measured in the run, not assumed
    assert (comparison["loads"], comparison["drift_basis"]) == (8, "measured"), comparison

    (root / "add_more.hip").write_text(KERNEL.format(permille=200))  # the pull request
    code, output, comparison = _run(root, backend, env)
    assert code == 1 and comparison["state"] == "regressed", output[-4000:]
    assert 1.05 < comparison["ratio"] < 1.30, comparison
    assert "A/B regressed" in output, output[-4000:]
    print(f"\n[{backend}] " + next(line for line in output.splitlines() if "A/B regressed" in line))


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ, **(extra or {}))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO), env.get("PYTHONPATH"))))
    return env


@pytest.mark.gpu
def test_ab_on_the_cuda_backend(cuda_backend, tmp_path, capsys):
    """cuda_backend: skips, saying why, where there is no CUDA GPU."""
    with capsys.disabled():
        _check_ab(_project(tmp_path / "project"), "cuda", _env())


@pytest.mark.gpu
def test_ab_on_the_hip_backend_through_the_shim(shim_env, tmp_path, capsys):  # noqa: F811
    with capsys.disabled():
        _check_ab(_project(tmp_path / "project"), "hip", _env(shim_env))
