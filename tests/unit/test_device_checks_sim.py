"""The device data path (inputs by the hash kernel, outputs by the compare kernel against
float64 references) on the simulated device, for every catalog kernel at sizes with tails;
tests/gpu/test_device_checks_on_gpu.py runs the same on a GPU."""

from __future__ import annotations

import pytest

from pytest_gpuperf.runtime import open_backend
from pytest_gpuperf.session.catalog import KERNELS
from tests.device_checks import check_case_on


@pytest.fixture(scope="module")
def sim_backend():
    backend = open_backend("sim", seed=1)
    yield backend
    backend.close()


@pytest.mark.parametrize("size", [1, 4099, 3 * 2**16 + 5])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_device_checks_on_the_simulated_device(sim_backend, name, size):
    check_case_on(sim_backend, name, size)
