"""Fixtures of the unit tests: the vendor backends over their real driver modules
(cuda.bindings.driver, hip-python's hip.hip) with only the calls they make answered, so
cuda.py and hip.py run as written without a GPU."""

from __future__ import annotations

import ctypes
import types

import pytest

PCI = b"0000:07:00.0\0"
UUID = bytes(range(0xA0, 0xB0))


@pytest.fixture
def driver(monkeypatch):
    """cuda.bindings.driver with the calls cuda.py makes answered for 3 GPUs."""
    driver = pytest.importorskip("cuda.bindings.driver")
    ok = driver.CUresult.CUDA_SUCCESS
    calls = []

    def answer(name, *values):
        def call(*args):
            calls.append(name)
            return (ok, *values)

        monkeypatch.setattr(driver, name, call)

    answer("cuInit")
    answer("cuDeviceGetCount", 3)
    answer("cuDeviceGet", 1)
    answer("cuDevicePrimaryCtxRetain", object())
    answer("cuCtxSetCurrent")
    answer("cuDeviceGetAttribute", 0)
    answer("cuDeviceGetName", b"NVIDIA H100 80GB HBM3\0")
    answer("cuDeviceGetPCIBusId", PCI)
    answer("cuDeviceGetUuid", types.SimpleNamespace(bytes=UUID))
    answer("cuDeviceTotalMem", 80 * 2**30)
    answer("cuDriverGetVersion", 13000)
    monkeypatch.setattr(driver, "cuGetErrorName", lambda err: (ok, err.name.encode()))
    monkeypatch.setattr(driver, "cuGetErrorString", lambda err: (ok, b"(stub)"))
    driver.calls = calls  # type: ignore[attr-defined]
    return driver


@pytest.fixture
def hip_runtime(monkeypatch):
    """hip.hip with the calls hip.py makes answered for 2 GPUs (an NVIDIA-named one, whose
    arch comes from the compute-capability attributes)."""
    hip = pytest.importorskip("hip.hip")
    from pytest_gpuperf.runtime import hip as hip_backend
    from pytest_gpuperf.runtime.hip_compiler import RocmLibraries

    ok = hip.hipError_t.hipSuccess
    uuid = ctypes.create_string_buffer(b"58bc6dc4d1b4f2b2", 16)

    class Uuid:  # hip-python's hipUUID_t: a pointer to the struct
        def __int__(self):
            return ctypes.addressof(uuid)

    answers = {
        "hipInit": (),
        "hipGetDeviceCount": (2,),
        "hipSetDevice": (),
        "hipDeviceGetName": ("NVIDIA H100 80GB HBM3",),
        "hipDeviceGetPCIBusId": ("0000:19:00.0",),
        "hipDeviceGetUuid": (Uuid(),),
        "hipDeviceTotalMem": (80 * 2**30,),
        "hipRuntimeGetVersion": (60200000,),
        "hipDriverGetVersion": (60200000,),
    }
    for name, values in answers.items():
        monkeypatch.setattr(hip, name, lambda *args, _values=values: (ok, *_values))

    def attribute(which, index):
        return (
            ok,
            {"ComputeCapabilityMajor": 9, "ComputeCapabilityMinor": 0}.get(
                which.name.removeprefix("hipDeviceAttribute"), 0
            ),
        )

    monkeypatch.setattr(hip, "hipDeviceGetAttribute", attribute)
    libraries = RocmLibraries("/opt/rocm/lib/libamdhip64.so", "/opt/rocm/lib/libhiprtc.so")
    monkeypatch.setattr(hip_backend, "load_hip_python", lambda: (hip, None, libraries))
    return hip
