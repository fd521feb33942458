"""Several GPUs on the simulated device (--gpuperf-sim-gpus): xdist workers spread over them,
each result names its GPU and the interval of its GPU work, devices[] has one entry per GPU
with its workers and lock time, and the degraded-GPU probe names a slow GPU."""

from __future__ import annotations

import itertools
import os

import pytest

EIGHT_TESTS = """
@pytest.mark.parametrize("case", range(8))
def test_add(gpu_bench, case):
    add(gpu_bench)
"""


def xdist_args() -> list[str]:
    pytest.importorskip("xdist")
    return ["-p", "xdist.plugin"] if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD") else []


@pytest.mark.slow
def test_workers_spread_over_the_gpus_and_never_overlap_on_one(gp):
    gp.test_file(EIGHT_TESTS)
    result = gp.run_subprocess(
        *xdist_args(), "-n", "2", "--gpuperf", "--gpuperf-sim-gpus=2", "--gpuperf-json=out.json"
    )
    result.assert_outcomes(passed=8)
    document = gp.report("out.json")
    devices = {d["index"]: d for d in document["devices"]}
    assert set(devices) == {0, 1}  # two equal GPUs are two entries
    assert {tuple(d["workers"]) for d in devices.values()} == {("gw0",), ("gw1",)}
    for device in devices.values():
        assert device["lock_held_s"] > 0 and device["lock_holds"] >= 1
        assert device["probe"]["degraded"] is False
        assert abs(device["probe"]["ratio"] - 1) < 0.03
    assert document["timing"]["gpu_lock_held_s"] > 0
    assert document["timing"]["wall_s"] >= document["timing"]["gpu_lock_held_s"] / 2
    spans: dict[int, list[tuple[float, float]]] = {}
    for row in document["results"]:
        measurement = row["measurement"]
        assert measurement["started_s"] < measurement["ended_s"]
        spans.setdefault(measurement["gpu"]["index"], []).append(
            (measurement["started_s"], measurement["ended_s"])
        )
    assert set(spans) == {0, 1}
    for intervals in spans.values():
        for (_, end), (start, _) in itertools.pairwise(sorted(intervals)):
            assert start >= end
    result.stdout.fnmatch_lines(
        ["*GPU 0 [[]mi300x[]]; workers gw0; GPU lock held *", "*GPU 1 [[]mi300x[]]; workers gw1;*"]
    )
    assert "Benchmarks are automatically disabled" not in result.stdout.str() + result.stderr.str()


@pytest.mark.slow
def test_a_slow_gpu_is_named_and_its_results_marked(gp):
    gp.test_file(EIGHT_TESTS.replace("add(gpu_bench)", "add(gpu_bench)\n    assert False"))
    result = gp.run_subprocess(
        *xdist_args(),
        "-n",
        "2",
        "--gpuperf",
        "--gpuperf-sim-gpus=1,0.95",
        "--gpuperf-json=out.json",
    )
    result.assert_outcomes(failed=8)
    result.stdout.fnmatch_lines(
        [
            "*DEGRADED GPU 1: its streaming bandwidth is 0.9*x the median of its peers "
            "(margin 3.0%*throttle reason*its results are marked*",
            "*result(s) measured on a DEGRADED GPU*",
        ]
    )
    document = gp.report("out.json")
    devices = {d["index"]: d for d in document["devices"]}
    assert devices[1]["probe"]["degraded"] and not devices[0]["probe"]["degraded"]
    assert devices[1]["probe"]["ratio"] < 0.97
    marked = {
        r["measurement"]["gpu"]["index"]: r["measurement"]["gpu"] for r in document["results"]
    }
    assert marked[1]["degraded"] and not marked[0]["degraded"]
    assert document["probe"]["margin"] == 0.03


@pytest.mark.parametrize(
    "workers, refused, used",
    [
        ("2", [], {0, 1}),  # -n 2 uses GPUs 0 and 1 only: the slow GPU 2 is not probed
        ("3", [2], {0, 1}),  # -n 3 would use GPU 2: its worker measures on a healthy one
    ],
)
@pytest.mark.slow
def test_refuse_degraded_keeps_workers_off_the_slow_gpu(gp, workers, refused, used):
    gp.test_file(EIGHT_TESTS)
    result = gp.run_subprocess(
        *xdist_args(),
        "-n",
        workers,
        "--gpuperf",
        "--gpuperf-sim-gpus=1,1,0.9",
        "--gpuperf-refuse-degraded",
        "--gpuperf-json=out.json",
    )
    result.assert_outcomes(passed=8)
    document = gp.report("out.json")
    assert document["probe"]["refused"] == refused
    assert {r["measurement"]["gpu"]["index"] for r in document["results"]} == used
    if refused:
        result.stdout.fnmatch_lines(["*DEGRADED GPU 2*refused: no worker measured on it*"])


def test_a_serial_run_names_its_gpu_in_the_failure_text(gp):
    gp.test_file(
        """
        @pytest.mark.min_bw(0.99)
        def test_slow(gpu_bench):
            add(gpu_bench)
        """
    )
    result = gp.run("--gpuperf", "--gpuperf-sim-gpus=2", "--gpuperf-gpu=1")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*gpu*GPU 1 SIM-*, measured *-* UTC*"])


@pytest.mark.parametrize(
    "value, message",
    [
        ("0", "expected a number of simulated GPUs (1 to 64)"),
        ("1,fast", "expected a number of simulated GPUs"),
        ("1,0", "speed '0' must be in (0, 10]"),
        ("1.5", "expected a number of simulated GPUs"),
    ],
)
def test_a_bad_sim_gpus_value_is_a_usage_error(gp, value, message):
    gp.test_file(EIGHT_TESTS)
    result = gp.run("--gpuperf", f"--gpuperf-sim-gpus={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--gpuperf-sim-gpus: {message}*"])


def test_a_bad_margin_is_a_usage_error(gp):
    gp.test_file(EIGHT_TESTS)
    result = gp.run("--gpuperf", "--gpuperf-gpu-margin=1.5")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpuperf-gpu-margin: * must be in [[]0, 0.5]*"])
