"""The run-to-run spread a first save records (session.default_run_spread)."""

from __future__ import annotations

import pytest

from pytest_gpuperf.session import DEFAULT_RUN_SPREAD, default_run_spread


def test_long_kernels_keep_the_backends_figure():
    assert default_run_spread("cuda", 145e-6) == pytest.approx(0.02, abs=0.001)
    assert default_run_spread("hip", 145e-6) == pytest.approx(0.07, abs=0.0005)


def test_kernels_of_a_few_microseconds_get_the_launch_jitter():
    # 8 us: 1.96 x 0.2 us / 8 us = 4.9%, with the 2% of cuda -> 5.3%.
    assert default_run_spread("cuda", 8e-6) == pytest.approx(0.053, abs=0.001)
    assert default_run_spread("cuda", 4e-6) > default_run_spread("cuda", 8e-6)


def test_the_simulated_device_keeps_its_model():
    assert default_run_spread("sim", 1e-6) == DEFAULT_RUN_SPREAD["sim"]


def test_hot_launches_keep_the_backends_figure():
    # Back to back (replayed on CUDA), no launch ramps up on an idle device: on the H100 a
    # 3.5 us hot vector add moved by under 2% between runs.
    assert default_run_spread("cuda", 3.5e-6, "hot") == DEFAULT_RUN_SPREAD["cuda"]
    assert default_run_spread("cuda", 3.5e-6, "rotate") > 0.1
