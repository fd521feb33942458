"""What does the throwaway git project hold? BASE committed (every kernel file the same vector
add), HEAD's edits in the work tree, a conftest for the simulated device and one test module."""

from __future__ import annotations

import subprocess
from pathlib import Path

from .kernels import BLOCK, KERNEL, kernel_source
from .plan import Plan
from .points import AA_OTHER, SLOWER, Point

CONFTEST = '''\
"""Written by bench/gate_quality.py.

The simulated device runs no kernel code: the model below computes what vector_add_more
computes (its time comes from each file's gpuperf-sim directive). On a GPU it is not used.
GATE_QUALITY_ORDER shuffles the tests per process, so a kernel's place in the process cannot
bias the learned-history scores.
"""

import os
import random
from pathlib import Path

from pytest_gpuperf import simulate


def _vector_add_more(args, launch):
    a, b, c, extra, n = args
    count = min(n, launch.threads_x)
    c[:count] = a[:count] + b[:count]


for _path in sorted(Path(__file__).parent.glob("*.hip")):
    simulate.register(_path, "vector_add_more", _vector_add_more)


def pytest_collection_modifyitems(items):
    order = os.environ.get("GATE_QUALITY_ORDER")
    if order:
        random.Random(int(order)).shuffle(items)
'''

TEST_MODULE = '''\
"""Written by bench/gate_quality.py: one measurement per kernel file, its output checked."""

import numpy as np
import pytest

SIZES = {sizes!r}
EXTRA_FLOATS = {extra}
BLOCK = {block}


@pytest.mark.parametrize("name", list(SIZES))
def test_kernel(gpu_bench, name):
    n = SIZES[name]
    kernel = gpu_bench.kernel(name + ".hip", "{kernel}")
    rng = np.random.default_rng(0)
    a = rng.random(n, dtype=np.float32)
    b = rng.random(n, dtype=np.float32)
    da, db = gpu_bench.to_device(a), gpu_bench.to_device(b)
    extra = gpu_bench.to_device(np.zeros(EXTRA_FLOATS, np.float32))  # zeros: c never changes
    dc = gpu_bench.empty(n)
    gpu_bench(
        kernel, grid=(n + BLOCK - 1) // BLOCK, block=BLOCK, args=(da, db, dc, extra, n),
        bytes=12 * n, name=name,
    )
    np.testing.assert_array_equal(gpu_bench.from_device(dc, np.float32, n), a + b)
'''


GIT_IDENTITY = ("-c", "user.name=gate-quality", "-c", "user.email=gate-quality@localhost")


def git(directory: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *GIT_IDENTITY, "-c", "commit.gpgsign=false", *args],
        cwd=directory,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def head_source(point: Point, plan: Plan) -> str | None:
    """HEAD's version of a point's kernel file (None: unchanged from BASE)."""
    if point.kind == AA_OTHER:
        return kernel_source(0, salt=2)
    if point.kind == SLOWER:
        return kernel_source(plan.permille[point.name])
    return None


def write_project(directory: Path, plan: Plan) -> None:
    """The project: BASE committed (every file the same vector add), HEAD's edits left in the
    work tree, as a pull request's checkout with --gpuperf-compare=<its base> sees them."""
    directory.mkdir(parents=True)
    sizes = {point.name: plan.elements(point.size) for point in plan.points}
    for point in plan.points:
        (directory / f"{point.name}.hip").write_text(kernel_source(0))
    (directory / "conftest.py").write_text(CONFTEST)
    (directory / "test_gate_quality.py").write_text(
        TEST_MODULE.format(sizes=sizes, extra=plan.extra_floats, block=BLOCK, kernel=KERNEL)
    )
    (directory / "pytest.ini").write_text("[pytest]\n")  # this directory is the rootdir
    git(directory, "init", "-q")
    git(directory, "add", "-A")
    git(directory, "commit", "-qm", "BASE: every kernel file the same vector add")
    for point in plan.points:
        text = head_source(point, plan)
        if text is not None:
            (directory / f"{point.name}.hip").write_text(text)
