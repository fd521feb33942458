"""The device data path on a GPU (CUDA): every catalog kernel's inputs made by the hash kernel
agree bit for bit with NumPy's, its outputs pass the compare kernel, the float64 references
computed on the device agree with NumPy's, and spoiled elements are counted with the first
index. Skips without a GPU (tests/gpu/conftest.py)."""

from __future__ import annotations

import pytest

from pytest_gpuperf.session.catalog import KERNELS
from tests.device_checks import check_case_on


@pytest.mark.parametrize("size", [1, 4099, 3 * 2**16 + 5, 8 * 2**20 + 3])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_device_checks_on_a_gpu(cuda_backend, name, size):
    check_case_on(cuda_backend, name, size)
