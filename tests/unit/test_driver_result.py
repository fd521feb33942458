"""One funnel for a driver call's (status, *values) tuple, for CUDA and HIP alike
(runtime/driver_result.py): before, runtime/cuda.py's `_ok` and `HipBackend._ok` each wrote
the same unpacking, error and sticky-fault rule."""

from __future__ import annotations

import enum
from types import SimpleNamespace

import pytest

from pytest_gpuperf.errors import DeviceFault, GpuPerfError, LaunchError
from pytest_gpuperf.runtime import cuda, hip
from pytest_gpuperf.runtime.driver_result import StatusCodes, call_values


class Status(enum.IntEnum):
    OK = 0
    BAD_VALUE = 1
    ILLEGAL_ADDRESS = 700


CODES = StatusCodes(
    succeeded=lambda status: status == Status.OK,
    words=lambda status: status.name,
    sticky=lambda status: status == Status.ILLEGAL_ADDRESS,
    sticky_advice="; the device is gone",
)


def test_a_success_gives_its_values():
    assert call_values((Status.OK,), "nothing", CODES) is None
    assert call_values((Status.OK, 7), "one", CODES) == 7
    assert call_values((Status.OK, 7, "b"), "two", CODES) == (7, "b")


def test_a_failure_names_the_call_and_the_status_in_the_error_asked_for():
    with pytest.raises(LaunchError, match=r"^cuLaunchKernel failed: BAD_VALUE$"):
        call_values((Status.BAD_VALUE,), "cuLaunchKernel", CODES)
    with pytest.raises(GpuPerfError, match="cuDeviceGet failed") as raised:
        call_values((Status.BAD_VALUE, 0), "cuDeviceGet", CODES, GpuPerfError)
    assert not isinstance(raised.value, LaunchError)


def test_a_sticky_fault_is_recorded_and_raised_as_a_device_fault():
    seen: list[str] = []
    with pytest.raises(DeviceFault) as raised:
        call_values((Status.ILLEGAL_ADDRESS,), "sync", CODES, on_fault=seen.append)
    assert str(raised.value) == "sync failed: ILLEGAL_ADDRESS; the device is gone"
    assert seen == [str(raised.value)]


def test_cuda_ends_its_calls_through_the_funnel(monkeypatch):
    class CUresult(enum.IntEnum):
        CUDA_SUCCESS = 0
        CUDA_ERROR_INVALID_VALUE = 1
        CUDA_ERROR_ILLEGAL_ADDRESS = 700

    driver = SimpleNamespace(
        CUresult=CUresult,
        cuGetErrorName=lambda err: (CUresult.CUDA_SUCCESS, err.name.encode()),
        cuGetErrorString=lambda err: (CUresult.CUDA_SUCCESS, b"what it means"),
    )
    monkeypatch.setattr(cuda, "_driver", lambda: driver)
    monkeypatch.setattr(cuda, "_STICKY_FAULT", [])
    assert cuda._ok((CUresult.CUDA_SUCCESS, 3), "cuDeviceGet") == 3
    with pytest.raises(LaunchError, match=r"CUDA_ERROR_INVALID_VALUE \(what it means\)"):
        cuda._ok((CUresult.CUDA_ERROR_INVALID_VALUE,), "cuLaunchKernel")
    assert cuda._STICKY_FAULT == []
    with pytest.raises(DeviceFault, match="the CUDA context is unusable"):
        cuda._ok((CUresult.CUDA_ERROR_ILLEGAL_ADDRESS,), "cuCtxSynchronize")
    assert len(cuda._STICKY_FAULT) == 1 and "cuCtxSynchronize" in cuda._STICKY_FAULT[0]


def test_hip_ends_its_calls_through_the_funnel():
    class hipError_t(enum.IntEnum):
        hipSuccess = 0
        hipErrorInvalidValue = 1
        hipErrorIllegalAddress = 700

    faults: list[str] = []
    module = type("hip", (), {"hipError_t": hipError_t})  # hashable, as a module is
    backend = SimpleNamespace(_hip=module, _mark_fault=faults.append)
    ok = hip.HipBackend._ok
    assert ok(backend, (hipError_t.hipSuccess, 1, 2), "hipMemGetInfo") == (1, 2)
    with pytest.raises(LaunchError, match=r"^hipModuleLaunchKernel failed: hipErrorInvalidValue$"):
        ok(backend, (hipError_t.hipErrorInvalidValue,), "hipModuleLaunchKernel")
    assert faults == []
    with pytest.raises(DeviceFault, match="the device is unusable after this fault"):
        ok(backend, (hipError_t.hipErrorIllegalAddress,), "hipDeviceSynchronize")
    assert len(faults) == 1 and faults[0].startswith("hipDeviceSynchronize failed")
