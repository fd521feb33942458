"""Quiet by default: a run on the simulated device under pytest-xdist names one seed (the
controller's), the false-alarm budget line and the explanations of the gate's words show
with -v or when a check failed, and `pytest --help` keeps the plugin's part short."""

from __future__ import annotations

import re

import pytest

TESTS = """
@pytest.mark.parametrize("k", range(4))
def test_add(gpu_bench, k):
    add(gpu_bench, name=f"add{k}")
"""


def test_xdist_workers_share_the_controllers_seed(gp):
    gp.monkeypatch.delenv("GPUPERF_SIM_SEED")
    gp.test_file(TESTS)
    result = gp.run_subprocess("--gpuperf", "-n", "2")
    result.assert_outcomes(passed=4)
    seeds = set(re.findall(r"GPUPERF_SIM_SEED=(\d+) reproduces it", result.stdout.str()))
    assert len(seeds) == 1, result.stdout.str()
    (seed,) = seeds
    # ... and it does reproduce the run: the same seed, the same -n, the same numbers
    gp.monkeypatch.setenv("GPUPERF_SIM_SEED", seed)
    again = gp.run_subprocess("--gpuperf", "-n", "2")
    assert set(re.findall(r"GPUPERF_SIM_SEED=(\d+)", again.stdout.str())) == {seed}
