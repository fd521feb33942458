"""Backend.copy on the vendor backends (cuda.py over cuda.bindings.driver, hip.py over
hip-python's hip.hip, both with only the calls they make answered: tests/unit/conftest.py):
one asynchronous device-to-device copy on the default stream, the stream launches and the
measurement's events use, and no call that waits. `gpu_bench.copy` in a `setup=` relies on
it: a copy that waited would leave the timed launch an idle GPU."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_gpuperf.errors import ArgumentError
from pytest_gpuperf.runtime.device_buffer import DeviceBuffer


class Recording:
    """A driver module whose calls (names starting with `prefix`) are logged, then made."""

    def __init__(self, module: Any, prefix: str) -> None:
        self._module, self._prefix = module, prefix
        self.calls: list[tuple[str, tuple]] = []

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if not name.startswith(self._prefix) or isinstance(value, type) or not callable(value):
            return value

        def call(*args: Any) -> Any:
            self.calls.append((name, args))
            return value(*args)

        return call


def _buffers(backend: Any) -> tuple[DeviceBuffer, DeviceBuffer]:
    return DeviceBuffer(backend, 0x7000_0000, 4096), DeviceBuffer(backend, 0x7000_2000, 4096)


def test_cuda_copies_on_the_legacy_default_stream_without_waiting(driver, monkeypatch):
    from pytest_gpuperf.runtime import cuda

    monkeypatch.setattr(
        driver, "cuMemcpyDtoDAsync", lambda *args: (driver.CUresult.CUDA_SUCCESS,), raising=False
    )
    backend = cuda.open(0)
    recording = Recording(backend._d, "cu")
    backend._d = recording
    dst, src = _buffers(backend)
    backend.copy(dst, src)
    # stream 0: what launches and events get for the default stream (cuda._stream(None))
    assert recording.calls == [("cuMemcpyDtoDAsync", (dst.ptr, src.ptr, 4096, 0))]
    assert cuda._stream(None) == 0


def test_hip_copies_on_the_null_stream_without_waiting(hip_runtime, monkeypatch):
    from pytest_gpuperf.runtime import hip

    ok = hip_runtime.hipError_t.hipSuccess
    monkeypatch.setattr(hip_runtime, "hipMemcpyAsync", lambda *args: (ok,))
    backend = hip.open(0)
    recording = Recording(backend._hip, "hip")
    backend._hip = recording
    dst, src = _buffers(backend)
    backend.copy(dst, src)
    device_to_device = hip_runtime.hipMemcpyKind.hipMemcpyDeviceToDevice
    # stream None: the null stream, where launches and events go when given no stream
    assert recording.calls == [("hipMemcpyAsync", (dst.ptr, src.ptr, 4096, device_to_device, None))]


@pytest.mark.parametrize("backend_name", ["cuda", "hip"])
def test_the_vendor_backends_refuse_a_freed_buffer_or_a_copy_too_large(
    backend_name, request, monkeypatch
):
    if backend_name == "cuda":
        request.getfixturevalue("driver")
        from pytest_gpuperf.runtime import cuda as module
    else:
        request.getfixturevalue("hip_runtime")
        from pytest_gpuperf.runtime import hip as module  # type: ignore[no-redef]
    backend = module.open(0)
    dst, src = _buffers(backend)
    with pytest.raises(ArgumentError, match=r"copy of 8192 bytes: source has 4096, destination"):
        backend.copy(dst, src, 8192)
    src.freed = True
    with pytest.raises(ArgumentError, match=r"copy \(source\): the device buffer was already"):
        backend.copy(dst, src)
