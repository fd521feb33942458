"""The explain pass with the real profiler (Nsight Compute) on a real GPU, through pytest
itself, on a user's repository (bench/explain_demo.py's: its own kernel, not one the plugin
ships): a head that reads 3% more fails its A/B, and the failure names the extra DRAM read
bytes within half a point of the truth; an input of one value, where the GPU compresses it,
is named as such and not as a wrong declaration; and explaining one test costs at most 10 s.

Skipped without a CUDA GPU or without ncu (the stand-in of tests/plugin/test_explain.py
proves the plumbing everywhere else)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.explain_demo import make_project
from pytest_gpuperf.explain.counters.ncu import find_ncu
from tests.git_repo import commit_all
from tests.gpu.conftest import needs_cuda_torch_triton

REPO = Path(__file__).resolve().parents[2]


def compare_with_head(root: Path, *options: str) -> tuple[str, dict]:
    """The user's `pytest --gpuperf --gpuperf-compare=HEAD` in `root` on the GPU, as CI runs a
    pull request: its output and its JSON report."""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    )
    report = root.parent / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "pytest_gpuperf.plugin", "-p",
         "no:cacheprovider", "--gpuperf", "--gpuperf-backend=cuda", "--gpuperf-compare=HEAD",
         f"--gpuperf-json={report}", "-q", *options],
        cwd=root, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    return done.stdout + done.stderr, json.loads(report.read_text())


@pytest.mark.gpu
def test_a_regression_names_its_extra_dram_reads(cuda_backend, tmp_path, capsys):
    if find_ncu() is None:
        pytest.skip("Nsight Compute's ncu is not installed")
    root = tmp_path / "project"
    make_project(root)
    output, document = compare_with_head(
        root, "--gpuperf-check-bytes", "--gpuperf-budget=0.5", "-k", "read30 or constant"
    )
    results = {r["test_id"].split("::")[-1]: r for r in document["results"]}
    read30 = results["test_gather[read30]"]
    assert read30["verdict"]["status"] == "fail", output[-4000:]
    traffic = read30["verdict"]["explain"]["traffic"]
    extra = traffic["head"]["dram_read_bytes"] / traffic["base"]["dram_read_bytes"] - 1
    assert abs(extra - 0.030) < 0.005, traffic
    assert "explain: head moved" in output and "read +3.0% (268.4 -> 276." in output
    assert traffic["cost_s"] <= 10.0, traffic  # the budget for one explained test
    # one value everywhere: named as such when the GPU compressed it, never a wrong declaration
    constant = results["test_constant_input"]["verdict"]["explain"]["bytes_check"]
    assert constant["uniform_args"] == [0, 2], constant
    compressed = constant["read_bytes"] < 0.5 * constant["declared_bytes"]
    assert constant["outcome"] == ("compressed" if compressed else "within"), constant
    print(f"\nconstant input: {constant['line']}")
    with capsys.disabled():
        print("\n" + "\n".join(line for line in output.splitlines() if "explain:" in line))


TORCH_OP = """\
import torch

LAUNCHES = 1


def add(a, b, c):
    for _ in range(LAUNCHES):
        torch.add(a, b, out=c)
"""

TORCH_TEST = """\
import torch

import myop


def test_op(gpu_bench):
    n = 32 << 20
    a, b = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    c = torch.empty_like(a)
    gpu_bench.run(lambda: myop.add(a, b, c), bytes=12 * n, name="op")
"""


@pytest.mark.gpu
def test_a_callables_failure_names_its_launches_and_bytes_against_base(tmp_path, capsys):
    """A torch callable whose head launches its kernel twice: the A/B fails, and the
    explain pass (ncu) profiles base's callable beside head's: the kernel launched twice as
    often leads, then twice base's DRAM read bytes."""
    needs_cuda_torch_triton()  # torch with a CUDA GPU (its Linux wheels bring triton)
    if find_ncu() is None:
        pytest.skip("Nsight Compute's ncu is not installed")

    root = tmp_path / "project"
    root.mkdir()
    (root / "myop.py").write_text(TORCH_OP)
    (root / "test_op.py").write_text(TORCH_TEST)
    commit_all(root, "base")
    (root / "myop.py").write_text(TORCH_OP.replace("LAUNCHES = 1", "LAUNCHES = 2"))
    output, document = compare_with_head(root)
    verdict = document["results"][0]["verdict"]
    assert verdict["status"] == "fail" and verdict["comparison"]["state"] == "regressed", output
    traffic = verdict["explain"]["traffic"]
    assert traffic["lines"][0].startswith("launches per call: "), traffic
    assert traffic["lines"][0].endswith(" 1 -> 2"), traffic
    read = traffic["head"]["dram_read_bytes"] / traffic["base"]["dram_read_bytes"]
    assert abs(read - 2.0) < 0.01, traffic
    assert traffic["head"]["shared_bytes_per_block"] is not None, traffic
    with capsys.disabled():
        print("\n" + "\n".join(line for line in output.splitlines() if "explain:" in line))
