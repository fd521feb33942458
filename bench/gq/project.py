"""What does the throwaway git project hold? BASE committed (every kernel file the same vector
add), HEAD's edits in the work tree, the simulated device's model (a conftest that also
shuffles the tests per process) and one test module."""

from __future__ import annotations

from pathlib import Path

from lab import projects
from lab.kernels import BLOCK, KERNEL, kernel_source, vector_add_more_model

from .plan import Plan
from .points import AA_OTHER, SLOWER, Point

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
    sizes = {point.name: plan.elements(point.size) for point in plan.points}
    files = {f"{point.name}.hip": kernel_source(0) for point in plan.points}
    files["conftest.py"] = vector_add_more_model()
    files["test_gate_quality.py"] = TEST_MODULE.format(
        sizes=sizes, extra=plan.extra_floats, block=BLOCK, kernel=KERNEL
    )
    projects.write_project(directory, files, "BASE: every kernel file the same vector add")
    heads = {f"{point.name}.hip": head_source(point, plan) for point in plan.points}
    projects.write_files(directory, {name: text for name, text in heads.items() if text})
