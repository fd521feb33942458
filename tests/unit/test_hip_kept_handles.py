"""HipBackend's events and streams (runtime/hip.py `_create_kept`): each one made is kept and
destroyed at close(); a closed backend makes none. A fake hip-python module stands in, so no
GPU is needed."""

from __future__ import annotations

import enum

import pytest

from pytest_gpuperf.errors import GpuPerfError, LaunchError
from pytest_gpuperf.runtime import hip
from pytest_gpuperf.runtime.base import Backend


class hipError_t(enum.IntEnum):
    hipSuccess = 0
    hipErrorOutOfMemory = 2


class FakeHip:
    """The calls create_event, create_stream and close() make, with a log of destroys."""

    hipError_t = hipError_t

    def __init__(self) -> None:
        self.made = 0
        self.destroyed: list[str] = []
        self.refuse = False

    def _new(self, kind: str) -> tuple:
        if self.refuse:
            return (hipError_t.hipErrorOutOfMemory, None)
        self.made += 1
        return (hipError_t.hipSuccess, f"{kind}{self.made}")

    def hipEventCreate(self) -> tuple:
        return self._new("event")

    def hipStreamCreate(self) -> tuple:
        return self._new("stream")

    def hipDeviceSynchronize(self) -> tuple:
        return (hipError_t.hipSuccess,)

    def hipEventDestroy(self, event: str) -> tuple:
        self.destroyed.append(event)
        return (hipError_t.hipSuccess,)

    def hipStreamDestroy(self, stream: str) -> tuple:
        self.destroyed.append(stream)
        return (hipError_t.hipSuccess,)

    def __hash__(self) -> int:  # hashable, as a module is (the status-code table is cached)
        return id(self)


def _backend(module: FakeHip) -> hip.HipBackend:
    """A HipBackend past its device queries (hip.HipBackend.__init__ asks the device)."""
    backend = object.__new__(hip.HipBackend)
    Backend.__init__(backend, 0)
    backend._hip = module  # type: ignore[assignment]
    backend._events, backend._streams, backend._graphs = [], [], []
    backend._sync_event = None
    backend._closed = False
    return backend


def test_events_and_streams_made_are_destroyed_at_close():
    module = FakeHip()
    backend = _backend(module)
    assert backend.create_event() == "event1"
    assert backend.create_stream() == "stream2"
    assert backend.create_event() == "event3"
    backend.close()
    assert sorted(module.destroyed) == ["event1", "event3", "stream2"]


def test_a_refused_create_names_the_call_and_keeps_nothing():
    module = FakeHip()
    module.refuse = True
    backend = _backend(module)
    with pytest.raises(LaunchError, match=r"^hipStreamCreate failed: hipErrorOutOfMemory$"):
        backend.create_stream()
    assert backend._streams == [] and backend._events == []


def test_a_closed_backend_makes_no_event():
    backend = _backend(FakeHip())
    backend.close()
    with pytest.raises(GpuPerfError, match="was closed"):
        backend.create_event()
