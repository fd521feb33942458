"""The perf suite checks its outputs on the device (kernels/gpuperf_check.hip): a catalog
kernel that computes a wrong element, or leaves one unwritten, still fails its test, and the
failure names how many elements are wrong, the first index and, from NumPy, the values.
Through real inner pytest runs of the shipped tests/perf/conftest.py on the simulated
device, measuring and in the one-launch smoke mode."""

from __future__ import annotations

import re

import pytest

from tests.plugin.conftest import REPO

PERF_CONFTEST = (REPO / "tests" / "perf" / "conftest.py").read_text()

# The simulated device computes the plugin's vector_add from the catalog; a model registered
# for the same file takes precedence: this one gets element 1234 wrong and never writes the
# last element (it stays NaN, the poison of an unwritten output).
WRONG_KERNEL = """

from pytest_gpuperf import simulate
from pytest_gpuperf.runtime.compile import KERNELS_DIR


@simulate.model(KERNELS_DIR / "vector_add.hip", "vector_add")
def wrong_vector_add(args, launch):
    a, b, c, n = args
    c[: n - 1] = a[: n - 1] + b[: n - 1]
    c[1234] += 0.5
"""

TEST = """
def test_add(catalog_bench):
    catalog_bench.measure("vector_add", 4099)
"""


@pytest.mark.parametrize("mode", [["--gpuperf"], []], ids=["measuring", "smoke"])
def test_a_wrong_kernel_fails_with_the_first_bad_index_and_the_values(gp, mode):
    gp.pytester.makeconftest(PERF_CONFTEST + WRONG_KERNEL)
    gp.pytester.makepyfile(test_wrong=TEST)
    result = gp.run(*mode)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*output 2 of test_wrong.py::test_add: 2 of 4099 elements wrong (checked on the "
            "device), the first at index 1234; NumPy: [[]1234[]] got *, expected *; "
            "[[]4098[]] got nan, expected *",
        ]
    )
    # then NumPy's own report of those elements: 'ACTUAL: array(' (NumPy >= 2) or
    # 'x: array(' (1.x)
    assert re.search(r"(ACTUAL|x): array\(.*nan", result.stdout.str()), result.stdout.str()


def test_the_right_kernel_passes_its_device_check(gp):
    gp.pytester.makeconftest(PERF_CONFTEST)
    gp.pytester.makepyfile(test_right=TEST)
    result = gp.run("--gpuperf")
    result.assert_outcomes(passed=1)
