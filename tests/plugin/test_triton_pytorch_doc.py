"""docs/triton-pytorch.md's python blocks are test modules, and each runs as the page writes
it: the simulated-device block here, on the simulated device (so CI runs it), the torch,
Triton and CuPy blocks on a GPU (tests/gpu/test_triton_pytorch_doc_on_gpu.py). Every block
must have a runner and say what each of its tests prints or fails with, so a new sample that
no test would run, or one whose output the page does not state, fails here."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/doc_samples.py

from doc_samples import ROOT, block_runner, python_blocks, sample_problems, sample_tests

from tests.gpu import test_triton_pytorch_doc_on_gpu as on_gpu

PAGE = ROOT / "docs" / "triton-pytorch.md"


def blocks_for(runner: str) -> list[str]:
    return [block for block in python_blocks(PAGE) if block_runner(block) == runner]


def test_every_python_block_of_the_page_is_run_by_a_test():
    blocks = python_blocks(PAGE)
    assert blocks, "docs/triton-pytorch.md has no python block"
    names = []
    for block in blocks:
        first = block.strip().splitlines()[0]
        compile(block, f"docs/triton-pytorch.md block {first!r}", "exec")  # a module as written
        runner = block_runner(block)
        tests = sample_tests(block)
        assert tests, f"a block without a test function, run by nothing: {first!r}"
        names += [test.name for test in tests]
        # sim: run below; torch, cupy: by the GPU module, one test each
        assert runner == "sim" or runner in on_gpu.RUNNERS, (runner, [t.name for t in tests])
    assert len(names) == len(set(names)), "two blocks define a test of the same name"
    assert blocks_for("sim"), "the page shows no simulated-device sample, which CI can run"
    for runner, test in on_gpu.RUNNERS.items():
        assert callable(getattr(on_gpu, test, None)), (runner, test)


def test_the_simulated_device_samples_run_as_the_page_says(gp):
    blocks = blocks_for("sim")
    for position, block in enumerate(blocks):
        gp.pytester.makepyfile(**{f"test_sample_{position}": block})
    result = gp.run("--gpuperf", "-rA", "--gpuperf-json=report.json")
    tests = [test for block in blocks for test in sample_tests(block)]
    outcomes = {
        row["test_id"].split("::")[-1]: (row["outcome"], row["error"])
        for row in gp.report()["tests"]
    }
    problems = sample_problems(tests, outcomes, result.stdout.str())
    assert not problems, "\n".join(problems) + "\n" + result.stdout.str()[-4000:]
