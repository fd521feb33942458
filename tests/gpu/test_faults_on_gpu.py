"""What a run does when the GPU misbehaves, on a real GPU through pytest: a kernel that does
not finish trips the watchdog (named, the lock released, the other GPU tests failed with the
reason, the reports written, the process ended), and a sticky device fault ends in a clear
failure and a summary, not a traceback. After either, the next process measures normally.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WATCHDOG_S = 3

KERNELS = """\
#include "gpuperf.h"

// Spins for `ns` nanoseconds of device wall clock: 60 s is a hang to the watchdog, and yet it
// ends by itself should the driver not stop it when its process exits.
GPUPERF_KERNEL void stuck(unsigned long long ns) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        const unsigned long long start = gp_wall_ns();
        while (gp_wall_ns() - start < ns) {
        }
    }
}

// Writes through a pointer no allocation owns: an illegal address, a sticky fault.
GPUPERF_KERNEL void wild_write(float* out, long long offset) {
    out[offset + threadIdx.x] = 1.0f;
}

GPUPERF_KERNEL void add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""

TESTS = """\
import numpy as np

N = 1 << 20


def test_a_{case}(gpu_bench):
    if "{case}" == "hang":
        kernel = gpu_bench.kernel("faults.hip", "stuck")
        gpu_bench(kernel, grid=1, block=32, args=(60 * 10**9,), bytes=4)
    else:
        kernel = gpu_bench.kernel("faults.hip", "wild_write")
        out = gpu_bench.empty(32)
        gpu_bench(kernel, grid=1, block=32, args=(out, 1 << 40), bytes=128)


def test_b_after(gpu_bench):
    kernel = gpu_bench.kernel("faults.hip", "add")
    a = np.ones(N, np.float32)
    da, db, dc = gpu_bench.to_device(a), gpu_bench.to_device(a), gpu_bench.empty(N)
    gpu_bench(kernel, grid=N // 256, block=256, args=(da, db, dc, N), bytes=12 * N)
"""


AFTER_ONLY = "import numpy as np\n\nN = 1 << 20\n\n\n" + TESTS.split("\n\n\n")[-1]


def _run(root: Path, tests: str) -> tuple[int, str, dict, float]:
    (root / "faults.hip").write_text(KERNELS)
    (root / "test_faults.py").write_text(tests)
    report = root / "report.json"
    env = dict(os.environ, GPUPERF_LOCK_DIR=str(root / "locks"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO), env.get("PYTHONPATH"))))
    began = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "pytest_gpuperf.plugin", "-p", "no:cacheprovider",
         "--gpuperf", "--gpuperf-backend=cuda", f"--gpuperf-kernel-timeout={WATCHDOG_S}",
         f"--gpuperf-json={report}", "-rA", "test_faults.py"],
        cwd=root, env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    took_s = time.monotonic() - began
    document = json.loads(report.read_text()) if report.exists() else {}
    return proc.returncode, proc.stdout + proc.stderr, document, took_s


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["hang", "fault"])
def test_a_misbehaving_kernel_ends_the_run_cleanly(cuda_backend, tmp_path, case, capsys):
    """cuda_backend: skips, saying why, where there is no CUDA GPU."""
    code, output, document, took_s = _run(tmp_path, TESTS.format(case=case))
    assert code == 1, output[-6000:]
    assert "Traceback" not in output and "INTERNALERROR" not in output, output[-6000:]
    if case == "hang":
        assert "did not finish within the kernel timeout of 3 s" in output, output[-6000:]
        assert "'stuck'" in output, output[-6000:]
        assert took_s < 60, f"the run took {took_s:.0f} s: the watchdog did not end it"
    else:
        assert "CUDA_ERROR_ILLEGAL_ADDRESS" in output, output[-6000:]
    # the other test fails with the reason instead of hanging or crashing
    assert "test_b_after" in output and "not run: " in output, output[-6000:]
    assert "1 failed, 1 error" in output, output[-6000:]
    assert document, "the JSON report was not written"
    with capsys.disabled():
        print(
            f"\n[{case}] {took_s:.1f} s: "
            + next(line for line in output.splitlines() if "FAILED" in line and "test_a_" in line)
        )

    # The GPU is free again for the next process: it measures normally.
    code, output, _, _ = _run(tmp_path, AFTER_ONLY)
    assert code == 0, output[-6000:]
