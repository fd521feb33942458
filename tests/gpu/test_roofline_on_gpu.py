"""The roofline's counters on a real GPU, through pytest itself, with the real profiler:

- kernels/gemm.hip (NVRTC, sm_90), declared as 2 m n k fp32 FLOPs: ncu counts the same FLOPs
  (FFMA instructions, two a piece) within the check's 5%, on the FMA pipe, the tensor pipe
  idle;
- torch.matmul in bf16, declared as 2 m n k bf16 FLOPs: ncu's tensor-path operations
  (`sm__ops_path_tensor_src_bf16_dst_fp32`) count the same within 5%, with the tensor pipe
  busy. This is what makes the FLOPs check and the counted TFLOP/s of the explain pass right
  on the card: the counter counts two operations a multiply-add, as the declaration does.

Each is checked with `--gpuperf-check-bytes` (an explain pass of every measured test). Needs
CUDA and ncu (and torch for the second); skips without them. On the GPU machine:
`PYTHONPATH=. python3 -m pytest -s tests/gpu/test_roofline_on_gpu.py`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_gpuperf.explain.counters.ncu import find_ncu
from tests.gpu.conftest import needs_cuda_torch_triton

REPO = Path(__file__).resolve().parents[2]

GEMM_TEST = """\
import numpy as np

SIZE = 1024


def test_gemm(gpu_bench):
    kernel = gpu_bench.kernel("kernels/gemm.hip", "gemm_bf16_fp32")
    rng = np.random.default_rng(1)
    bits = lambda shape: (rng.uniform(-1, 1, shape).astype(np.float32).view(np.uint32) >> 16
                          ).astype(np.uint16)
    a, b = bits((SIZE, SIZE)), bits((SIZE, SIZE))
    da, db, dc = gpu_bench.to_device(a), gpu_bench.to_device(b), gpu_bench.empty((SIZE, SIZE))
    gpu_bench(kernel, grid=(SIZE // 64, SIZE // 64), block=256, args=(da, db, dc, SIZE, SIZE, SIZE),
              reads=(a, b), writes=(4 * SIZE * SIZE,), flops=gpu_bench.gemm_flops(SIZE, SIZE, SIZE),
              math="fp32")
"""

TORCH_TEST = """\
import torch

SIZE = 2048


def test_torch(gpu_bench):
    device = torch.device("cuda", gpu_bench.info.index)
    a = torch.randn(SIZE, SIZE, device=device, dtype=torch.bfloat16)
    b, c = torch.randn_like(a), torch.empty_like(a)
    gpu_bench.run(lambda: torch.matmul(a, b, out=c), reads=(a, b), writes=(c,),
                  flops=gpu_bench.gemm_flops(SIZE, SIZE, SIZE), math="bf16", name="torch")
"""


def profiled_run(root: Path, test: str) -> tuple[str, dict]:
    """`pytest --gpuperf --gpuperf-check-bytes` of `test` in `root`: output and JSON report."""
    (root / "test_roofline.py").write_text(test)
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    )
    report = root / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "pytest_gpuperf.plugin", "-p", "no:cacheprovider",
         "--gpuperf", "--gpuperf-backend=cuda", "--gpuperf-check-bytes", "--gpuperf-budget=0.3",
         f"--gpuperf-json={report}", f"--rootdir={root}", "-q", str(root / "test_roofline.py")],
        cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert report.exists(), output[-4000:]
    return output, json.loads(report.read_text())


def _explained(document: dict, output: str) -> dict:
    (row,) = document["results"]
    explain = row["verdict"]["explain"]
    assert explain is not None and not explain["traffic"]["problem"], output[-4000:]
    return explain


@pytest.mark.gpu
def test_the_hip_gemm_counts_its_declared_fp32_flops_on_the_fma_pipe(cuda_backend, tmp_path):
    if find_ncu() is None:
        pytest.skip("Nsight Compute's ncu is not installed")
    output, document = profiled_run(tmp_path, GEMM_TEST)
    explain = _explained(document, output)
    check, head = explain["flops_check"], explain["traffic"]["head"]
    assert check["outcome"] == "within", (check, output[-3000:])
    assert head["fma_pipe"] is not None and head["fma_pipe"] > 0.2, head
    # no tensor instruction: its roof is fp32's (H200 2026-11-29: 0.18% of the tensor pipe
    # counted active, not 0: a sliver of whatever else the SM issued)
    assert head["tensor_pipe"] < 0.01, head
    assert document["results"][0]["measurement"]["roofline"]["bound"] == "compute"
    print(f"\ngemm.hip 1024^3: {check['line']}; FMA pipe {head['fma_pipe']:.0%}")


@pytest.mark.gpu
def test_a_bf16_matmul_counts_its_declared_flops_on_the_tensor_path(cuda_backend, tmp_path):
    needs_cuda_torch_triton()
    if find_ncu() is None:
        pytest.skip("Nsight Compute's ncu is not installed")
    output, document = profiled_run(tmp_path, TORCH_TEST)
    explain = _explained(document, output)
    check, head = explain["flops_check"], explain["traffic"]["head"]
    assert check["tensor_flops"] is not None, (check, output[-3000:])  # the counter is known
    assert check["outcome"] == "within", (check, output[-3000:])
    assert head["tensor_pipe"] is not None and head["tensor_pipe"] > 0.3, head
    print(f"\ntorch bf16 2048^3: {check['line']}; tensor pipe {head['tensor_pipe']:.0%} "
          f"({head['tensor_pipe_kind']})")  # fmt: skip
    unknown = [line for line in explain["traffic"]["lines"] if "does not know" in line]
    print("\n".join(unknown) or "every compute counter known on this card")
