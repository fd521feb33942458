"""The example of docs/writing-perf-tests.md, "Inputs made and outputs checked on the device",
run as written on the simulated device: it passes for a right kernel and fails for a wrong
one (its check is real)."""

from __future__ import annotations

import re

import pytest

from tests.plugin.conftest import REPO

DOC = REPO / "docs" / "writing-perf-tests.md"
SECTION = "## Inputs made and outputs checked on the device"

SCALE = """\
#include "gpuperf.h"
GPUPERF_KERNEL void scale(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
"""
MODEL = """\
from pytest_gpuperf import simulate


@simulate.model("scale.hip", "scale")
def scale(args, launch):
    x, y, a, n = args
    y[:n] = {factor} * x[:n]
"""


def doc_example() -> str:
    text = DOC.read_text()
    section = text[text.index(SECTION) :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.parametrize(("factor", "passes"), [("a", True), ("(a + 1)", False)])
def test_the_docs_example_checks_on_the_device(gp, factor, passes):
    gp.pytester.makeconftest(MODEL.format(factor=factor))
    (gp.path / "scale.hip").write_text(SCALE)
    gp.pytester.makepyfile(test_doc_example=doc_example())
    result = gp.run("--gpuperf")
    if passes:
        result.assert_outcomes(passed=1)
    else:
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(["*33554432 wrong, the first at 0*"])
