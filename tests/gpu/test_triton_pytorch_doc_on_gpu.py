"""docs/triton-pytorch.md's torch, Triton and CuPy samples on a real GPU, as the page writes
them: each python block becomes a test module of a scratch repository, run by a user's
`pytest --gpuperf` in a separate process with a hard timeout, and each of its tests must end
as the page says (passed, or failed with its `# fails:` line) and print the lines its
comments state (tests/doc_samples.py, "python blocks that run as tests"). The
simulated-device block runs in tests/plugin/test_triton_pytorch_doc.py, which also checks
that every block of the page has a runner here or there.

Needs CUDA with torch and Triton (or CuPy for its sample); each test skips with its one
reason without them. On the GPU machine:
`PYTHONPATH=. python3 -m pytest -s tests/gpu/test_triton_pytorch_doc_on_gpu.py`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.doc_samples import ROOT, block_runner, python_blocks, sample_problems, sample_tests
from tests.gpu.conftest import needs_cuda_torch_triton
from tests.gpu.test_cupy_facts_on_gpu import needs_cuda_cupy

PAGE = ROOT / "docs" / "triton-pytorch.md"
CHILD_TIMEOUT_S = 480  # 7 measurements at a 0.5 s budget, their probes and first calls
BUDGET = "0.5"  # --gpuperf-budget; the hard limit is 10 x that, at least 5 s

# Each GPU runner (tests/doc_samples.py, block_runner) and the test here that runs its blocks.
RUNNERS = {
    "torch": "test_the_torch_and_triton_samples_run_as_the_page_says",
    "cupy": "test_the_cupy_sample_runs_as_the_page_says",
}

pytestmark = pytest.mark.gpu


def run_blocks(runner: str, folder: Path, plugin_loaded: bool) -> None:
    """The page's blocks for `runner`, each a test module of a fresh project, run by one
    `pytest --gpuperf` on the CUDA backend; fails with every difference from the page."""
    blocks = [block for block in python_blocks(PAGE) if block_runner(block) == runner]
    assert blocks, f"no {runner} block in {PAGE.name}"
    folder.mkdir()
    (folder / "pytest.ini").write_text("[pytest]\n")
    for position, block in enumerate(blocks):
        (folder / f"test_sample_{position}.py").write_text(block)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), env.get("PYTHONPATH"))))
    plugin = [] if plugin_loaded else ["-p", "pytest_gpuperf.plugin"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *plugin, "-p", "no:cacheprovider", "-rA", "--gpuperf",
         "--gpuperf-backend=cuda", f"--gpuperf-budget={BUDGET}", "--gpuperf-json=report.json"],
        cwd=folder, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S,
    )  # fmt: skip
    output = done.stdout + done.stderr
    print(output[-8000:])
    report = folder / "report.json"
    assert report.is_file(), output[-4000:]
    outcomes = {
        row["test_id"].split("::")[-1]: (row["outcome"], row["error"])
        for row in json.loads(report.read_text())["tests"]
    }
    tests = [test for block in blocks for test in sample_tests(block)]
    problems = sample_problems(tests, outcomes, done.stdout)
    assert not problems, "\n".join(problems)
    assert "Traceback" not in output, output[-4000:]


def test_the_torch_and_triton_samples_run_as_the_page_says(tmp_path, request):
    needs_cuda_torch_triton()
    run_blocks("torch", tmp_path / "torch", request.config.pluginmanager.has_plugin("gpuperf"))


def test_the_cupy_sample_runs_as_the_page_says(tmp_path, request):
    needs_cuda_cupy()
    run_blocks("cupy", tmp_path / "cupy", request.config.pluginmanager.has_plugin("gpuperf"))
