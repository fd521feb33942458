"""An efficiency the device cannot reach fails its test ("declared bytes exceed what the device
can move", with the numbers) and is not saved; the other tests' rows are still saved.

The simulated MI300X (peak 5.3 TB/s, 8 x 4 MB L2 + 256 MB Infinity Cache) times vadd.hip from
its model, so a test that declares eight times the bytes reads eight times as fast as it is.
"""

from __future__ import annotations

import json
import math

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from pytest_gpuperf.gate.peak import efficiency_limit

MiB = 1 << 20
MI300X_CACHES = 8 * 4 * MiB + 256 * MiB

TESTS = """
N = 1 << 22


def launch(gpu_bench, declared, cache="cold"):
    kernel = gpu_bench.kernel("vadd.hip", "vector_add")
    a = gpu_bench.to_device(np.ones(N, np.float32))
    c = gpu_bench.empty(N)
    gpu_bench(kernel, grid=N // 256, block=256, args=(a, a, c, N), bytes=declared, cache=cache)


def test_a_good(gpu_bench):
    add(gpu_bench)


def test_b_eightfold(gpu_bench):
    launch(gpu_bench, 8 * N * 12)


def test_c_astronomical(gpu_bench):
    launch(gpu_bench, 10**30)


def test_d_good_too(gpu_bench):
    add(gpu_bench, name="again")
"""


def test_an_impossible_efficiency_fails_and_the_other_rows_are_saved(gp):
    gp.test_file(TESTS)
    result = gp.run("--gpuperf-save", "--gpuperf-json=report.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    output = result.stdout.str()
    assert "Traceback" not in output
    result.stdout.fnmatch_lines(
        [
            "*test_b_eightfold*",
            "vector_add: declared bytes exceed what the device can move: *% of peak (* GB/s "
            "against the peak 5,300 GB/s), above the 100.00% a cold measurement can reach",
            "  declared: 402,653,184 bytes",
            "  limit:    cold: every declared byte comes from HBM, so at most 100% of peak",
        ]
    )
    result.stdout.fnmatch_lines(["*declared bytes exceed what the device can move: *e+24%*"])
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(["gpuperf: saved 2 measurements to baselines/mi300x-sim.toml"])
    saved = tomllib.loads((gp.path / "baselines" / "mi300x-sim.toml").read_text())
    assert sorted(e["id"] for e in saved["entry"]) == [
        "test_perf.py::test_a_good",
        "test_perf.py::test_d_good_too",
    ]
    rows = {r["test_id"]: r for r in json.loads((gp.path / "report.json").read_text())["results"]}
    bad = rows["test_perf.py::test_b_eightfold"]["verdict"]
    assert bad["status"] == "fail"
    assert bad["save"]["saved"] is False and bad["save"]["why_not"] == "beyond-peak"
    low, high = bad["beyond_peak"]["efficiency_ci"]
    assert 1.0 < low <= high and bad["beyond_peak"]["limit"] == 1.0
    assert rows["test_perf.py::test_a_good"]["verdict"]["beyond_peak"] is None
    assert rows["test_perf.py::test_a_good"]["verdict"]["save"]["saved"] is True


def test_hot_may_beat_the_hbm_peak_only_while_the_caches_hold_the_working_set(gp):
    gp.test_file(
        TESTS
        + """

def test_f_hot_small(gpu_bench):
    launch(gpu_bench, 2 * N * 12, cache="hot")  # 100 MB: the caches (288 MiB) hold it


def test_g_hot_astronomical(gpu_bench):
    launch(gpu_bench, 10**30, cache="hot")
"""
    )
    result = gp.run("--gpuperf", "-k", "hot", "--gpuperf-json=report.json")
    result.stdout.fnmatch_lines(
        [
            "*hot, but 1,000,000,000,000,000,000,000,000,000,000 declared bytes exceed the "
            f"device's caches ({MI300X_CACHES:,} bytes)*",
        ]
    )
    rows = {r["test_id"]: r for r in json.loads((gp.path / "report.json").read_text())["results"]}
    small = rows["test_perf.py::test_f_hot_small"]
    assert small["measurement"]["efficiency"] > 1.0  # beats the HBM peak, from cache
    assert small["verdict"]["status"] == "pass" and small["verdict"]["beyond_peak"] is None
    huge = rows["test_perf.py::test_g_hot_astronomical"]["verdict"]
    assert huge["status"] == "fail" and huge["beyond_peak"]["cache"] == "hot"


def test_the_limit_of_each_cache_mode():
    assert efficiency_limit("cold", 10**12, MI300X_CACHES) == 1.0
    assert efficiency_limit("rotate", 10**12, MI300X_CACHES) == 1.0
    assert efficiency_limit("hot", MI300X_CACHES, MI300X_CACHES) == math.inf
    assert efficiency_limit("hot", 2 * MI300X_CACHES, MI300X_CACHES) == 2.0
    assert efficiency_limit("hot", 10**30, MI300X_CACHES) == pytest.approx(1.0)
