"""Counting devices and naming a GPU go through the real backend code: cuda.py and hip.py run
against their driver modules (cuda.bindings.driver, hip.hip) with only the driver functions
they call replaced, and the plugin's one question, session_device.device_count, reaches them."""

from __future__ import annotations

import ctypes
import inspect
import types

import pytest

from pytest_gpuperf.config.settings import Settings, gpu_index_for
from pytest_gpuperf.errors import DeviceUnavailable
from pytest_gpuperf.runtime import BACKEND_CLASSES, BACKENDS, backend_class
from pytest_gpuperf.runtime.base import Backend
from pytest_gpuperf.session import device as session_device

PCI = b"0000:07:00.0\0"
UUID = bytes(range(0xA0, 0xB0))


def test_every_registered_backend_counts_its_devices():
    assert set(BACKEND_CLASSES) == set(BACKENDS)
    for name in BACKENDS:
        cls = backend_class(name)
        assert issubclass(cls, Backend) and not inspect.isabstract(cls), name
        assert "device_count" in vars(cls), f"{name} inherits device_count instead of answering"


def test_a_backend_without_device_count_cannot_be_made():
    class Partial(backend_class("sim")):  # type: ignore[misc,valid-type]
        device_count = Backend.device_count  # the abstract one

    with pytest.raises(TypeError, match="device_count"):
        Partial(0, None)  # type: ignore[arg-type]


# -- cuda through cuda.bindings.driver -------------------------------------------------


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


def test_cuda_counts_with_the_driver(driver):
    from pytest_gpuperf.runtime.cuda import CudaBackend

    assert CudaBackend.device_count() == 3
    assert driver.calls[:2] == ["cuInit", "cuDeviceGetCount"]
    assert session_device.device_count("cuda") == 3


def test_cuda_without_a_visible_gpu_says_so(driver, monkeypatch):
    from pytest_gpuperf.runtime.cuda import CudaBackend

    no_device = driver.CUresult.CUDA_ERROR_NO_DEVICE
    monkeypatch.setattr(driver, "cuInit", lambda flags: (no_device,))
    with pytest.raises(DeviceUnavailable, match="CUDA_ERROR_NO_DEVICE"):
        CudaBackend.device_count()
    monkeypatch.setattr(driver, "cuInit", lambda flags: (driver.CUresult.CUDA_SUCCESS,))
    monkeypatch.setattr(driver, "cuDeviceGetCount", lambda: (driver.CUresult.CUDA_SUCCESS, 0))
    with pytest.raises(DeviceUnavailable, match="found no GPU"):
        session_device.device_count("cuda")


def test_cuda_names_its_gpu(driver):
    from pytest_gpuperf.runtime import cuda

    backend = cuda.open(2)
    info = backend.info
    assert (info.index, info.pci_bus_id) == (2, "0000:07:00.0")
    assert info.uuid == "GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf"
    with pytest.raises(DeviceUnavailable, match="out of range: 3 CUDA"):
        cuda.open(3)


# -- hip through hip-python's hip.hip ----------------------------------------------------


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


def test_hip_counts_with_hipGetDeviceCount(hip_runtime):
    from pytest_gpuperf.runtime.hip import HipBackend

    assert HipBackend.device_count() == 2
    assert session_device.device_count("hip") == 2


def test_hip_without_a_device_says_so(hip_runtime, monkeypatch):
    from pytest_gpuperf.runtime.hip import HipBackend

    no_device = hip_runtime.hipError_t.hipErrorNoDevice
    monkeypatch.setattr(hip_runtime, "hipGetDeviceCount", lambda: (no_device, 0))
    with pytest.raises(DeviceUnavailable, match="hipErrorNoDevice"):
        HipBackend.device_count()


def test_hip_names_its_gpu(hip_runtime, monkeypatch):
    from pytest_gpuperf.runtime import hip

    info = hip.open(1).info
    assert (info.index, info.pci_bus_id, info.arch) == (1, "0000:19:00.0", "sm_90")
    assert info.uuid == "GPU-58bc6dc4d1b4f2b2"

    def missing(index):
        raise RuntimeError("failed to dlsym 'hipDeviceGetUuid'")

    monkeypatch.setattr(hip_runtime, "hipDeviceGetUuid", missing)
    assert hip.open(0).info.uuid is None  # a runtime without the (beta) call: no UUID


# -- sim and the worker mapping ----------------------------------------------------------


def test_sim_counts_its_gpus():
    speeds = (1.0, 1.0, 0.95)
    assert session_device.device_count("sim", gpu_speeds=speeds) == 3
    settings = Settings(backends=("sim",), sim_gpu_speeds=speeds)
    assert (
        session_device.device_count("sim", **session_device.backend_options(settings, "sim")) == 3
    )


def test_workers_spread_over_the_gpus_and_skip_refused_ones():
    settings = Settings()
    assert [gpu_index_for(settings, 2, k) for k in range(4)] == [0, 1, 0, 1]
    assert [gpu_index_for(settings, 3, k, refused=(1,)) for k in range(4)] == [0, 2, 0, 2]
    assert gpu_index_for(settings, 2, None) == 0
    pinned = Settings(gpu_index=1)
    assert gpu_index_for(pinned, 4, 3) == 1


def test_open_device_puts_worker_k_on_gpu_k_mod_n():
    settings = Settings(backends=("sim",), sim_gpu_speeds=(1.0, 1.0))
    indices = []
    for worker in range(4):
        device = session_device.open_device(settings, worker=worker)
        indices.append(device.info.index)
        device.backend.close()
    assert indices == [0, 1, 0, 1]


def test_simulated_gpus_share_the_runs_drift_and_differ_by_their_speed():
    import math

    from pytest_gpuperf.errors import ConfigError
    from pytest_gpuperf.simulate import device as sim

    speeds = (1.0, 0.95)
    first, second = (sim.open(i, seed=9, gpu_speeds=speeds) for i in range(2))
    gap = second._noise.common_log - first._noise.common_log
    # -log(0.95) = 0.0513, give or take the GPU-to-GPU spread (+-0.5% per GPU at 95%)
    assert abs(gap - math.log(1 / 0.95)) < 0.02
    assert second.info.index == 1 and second.settings.gpu_speed == 0.95
    with pytest.raises(ConfigError, match="gpu_speed"):
        sim.open(0, gpu_speeds=(0.0,))
    with pytest.raises(DeviceUnavailable, match="out of range: 2 simulated GPU"):
        sim.open(2, gpu_speeds=speeds)
