"""Trying the next backend of `--gpuperf-backend` is the list doing its job: on an NVIDIA
machine with hip-python installed, the README's own command printed `*** FELL BACK to cuda:
hip: hipErrorNoDevice`, an alarm for the normal path. The alarm is kept for the one fallback
that changes what the numbers are: to the simulated device.

Through the real selection (session/device.py's `open_device`): the hip backend fails as it
fails on this machine (its real runtime and ROCm libraries, or their absence), and the CUDA
driver is a stub that shows one GPU (this machine has none)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from pytest_gpuperf.config.settings import Settings
from pytest_gpuperf.errors import Attempt, DeviceUnavailable
from pytest_gpuperf.runtime import open_backend
from pytest_gpuperf.session import device as session_device


class StubCuda:
    """A CUDA GPU as the driver would show it: an H100 (the simulated one's facts)."""

    def __init__(self) -> None:
        self._sim = open_backend("sim", 0, device="h100-sxm")
        self.info = dataclasses.replace(
            self._sim.info, backend="cuda", name="NVIDIA H100 80GB HBM3", simulated=False
        )

    def close(self) -> None:
        self._sim.close()


@pytest.fixture
def stub_cuda_driver(monkeypatch, tmp_path):
    """The CUDA driver shows one GPU; hip and sim are the real ones."""
    monkeypatch.setenv("GPUPERF_LOCK_DIR", str(tmp_path / "locks"))
    real_count = session_device.device_count

    def count(name: str, **options: Any) -> int:
        return 1 if name == "cuda" else real_count(name, **options)

    def opener(name: str, index: int, **options: Any) -> Any:
        return StubCuda() if name == "cuda" else open_backend(name, index, **options)

    monkeypatch.setattr(session_device, "device_count", count)
    return opener


def _open(opener: Any, backends: tuple[str, ...]) -> session_device.OpenDevice:
    return session_device.open_device(Settings(backends=backends), opener=opener)


def test_the_next_listed_gpu_backend_is_no_alarm(stub_cuda_driver):
    opened = _open(stub_cuda_driver, ("hip", "cuda", "sim"))
    try:
        assert opened.info.backend == "cuda" and [a.backend for a in opened.passed_over] == ["hip"]
        quiet = opened.describe()
        assert len(quiet) == 1 and "via cuda" in quiet[0]  # the device line, nothing else
        assert not any(
            "FELL BACK" in line or "***" in line for line in opened.describe(verbose=True)
        )
        (tried,) = [line for line in opened.describe(verbose=True) if "tried before" in line]
        assert tried.startswith("gpuperf device: tried before cuda: hip: ")
    finally:
        opened.backend.close()


def test_falling_back_to_the_simulated_device_is_still_the_alarm(stub_cuda_driver, monkeypatch):
    def no_cuda(name: str, index: int, **options: Any) -> Any:
        if name == "cuda":
            raise DeviceUnavailable([Attempt("cuda", "CUDA_ERROR_NO_DEVICE: no GPU")])
        return stub_cuda_driver(name, index, **options)

    opened = _open(no_cuda, ("hip", "cuda", "sim"))
    try:
        assert opened.simulated
        (alarm,) = [line for line in opened.describe() if "FELL BACK" in line]
        assert alarm.startswith("gpuperf device: *** FELL BACK to sim: hip: ")
        assert "; cuda: CUDA_ERROR_NO_DEVICE" in alarm
    finally:
        opened.backend.close()
