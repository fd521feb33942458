"""Counting devices and naming a GPU go through the real backend code: cuda.py and hip.py run
against their driver modules (cuda.bindings.driver, hip.hip) with only the driver functions
they call replaced, and the plugin's one question, session_device.device_count, reaches them."""

from __future__ import annotations

import inspect

import pytest

from pytest_gpuperf.config.settings import Settings, gpu_index_for
from pytest_gpuperf.errors import DeviceUnavailable
from pytest_gpuperf.runtime import BACKEND_CLASSES, BACKENDS, backend_class
from pytest_gpuperf.runtime.base import Backend
from pytest_gpuperf.session import device as session_device


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


def test_cuda_records_an_event_in_a_graph_as_an_external_node(driver, monkeypatch):
    """The engine's cold graph batches time their samples with events recorded inside the
    graph: a plain cuEventRecord on a capturing stream is never replayed."""
    from pytest_gpuperf.runtime import cuda

    recorded = []

    def record(event, stream, flags):
        recorded.append((event, stream, flags))
        return (driver.CUresult.CUDA_SUCCESS,)

    monkeypatch.setattr(driver, "cuEventRecordWithFlags", record)
    backend = cuda.open(0)
    assert backend.supports_graphs and backend.supports_graph_events
    backend.record_event_in_graph("event", "capturing stream")
    external = driver.CUevent_record_flags.CU_EVENT_RECORD_EXTERNAL
    assert recorded == [("event", "capturing stream", external)]


# -- hip through hip-python's hip.hip ----------------------------------------------------


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
