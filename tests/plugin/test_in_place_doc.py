"""The worked example of docs/writing-perf-tests.md, "A kernel that updates its input in
place", run as written on the simulated device: its kernel and its test, with a model of the
kernel that reads what it writes. With the setup's copy it passes, measured cold and hot;
without it the check fails and says why (the setup is what makes it right)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/doc_samples.py

from doc_samples import ROOT, section_code

DOC = ROOT / "docs" / "writing-perf-tests.md"
SECTION = "### A kernel that updates its input in place"
SETUP = "        setup=lambda: gpu_bench.copy(dy, pristine),  # before every timed launch, untimed"

MODEL = """
import numpy as np

from pytest_gpuperf import simulate


def traffic(args):
    a, x, y, n = args
    return 4 * n * 3  # x read, y read and written


@simulate.model("axpy.hip", "axpy", reads_outputs=True, traffic_bytes=traffic)
def axpy(args, launch):
    a, x, y, n = args
    count = min(n, launch.threads_x)  # one element per thread, as the kernel
    y[:count] = np.float32(a) * x[:count] + y[:count]
"""


def doc_blocks() -> tuple[str, str]:
    """The section's kernel (cpp) and test (python), as the docs show them."""
    return section_code(DOC, SECTION, "cpp"), section_code(DOC, SECTION, "python")


@pytest.fixture
def example(gp):
    kernel, test = doc_blocks()
    (gp.path / "axpy.hip").write_text(kernel)
    conftest = gp.path / "conftest.py"
    conftest.write_text(conftest.read_text() + MODEL)
    return gp, test


@pytest.mark.parametrize("cache", ["cold", "hot"])
def test_the_docs_in_place_example_passes_as_written(example, cache):
    gp, test = example
    gp.pytester.makepyfile(test_axpy=test)
    result = gp.run("--gpuperf", f"--gpuperf-cache={cache}", "--gpuperf-json=report.json")
    result.assert_outcomes(passed=1)
    (row,) = gp.report()["results"]
    assert row["measurement"]["cache"] == cache and len(row["measurement"]["samples_s"]) > 1
    gp.run().assert_outcomes(passed=1)  # smoke mode: the setup, then one launch


def test_without_the_setup_the_example_fails_and_says_why(example):
    gp, test = example
    assert SETUP in test, "the example's setup line changed: update SETUP"
    gp.pytester.makepyfile(test_axpy=test.replace(SETUP + "\n", ""))
    result = gp.run("--gpuperf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*under --gpuperf each kernel runs many times on the same*"])
