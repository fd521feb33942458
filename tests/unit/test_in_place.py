"""session/in_place.py: which declared inputs can be watched for updates in place.

A tensor is watched through `__cuda_array_interface__` (PyTorch's and CuPy's CUDA tensors).
PyTorch refuses that interface for a tensor that requires grad (a training op's logits do):
its detached view, the same memory, is read instead. On the H200 the plain read raised
RuntimeError out of the fixture (2026-11-29)."""

from __future__ import annotations

import types

import numpy as np

from pytest_gpuperf.runtime.base import DeviceBuffer
from pytest_gpuperf.session.in_place import BorrowedBuffer, device_views

GPU = types.SimpleNamespace(info=types.SimpleNamespace(simulated=False))
SIM = types.SimpleNamespace(info=types.SimpleNamespace(simulated=True))


class Tensor:
    """A CUDA tensor as the interface shows it: float32, C-contiguous unless strided."""

    def __init__(self, ptr: int, shape: tuple[int, ...], *, grad: bool = False, strides=None):
        self.ptr, self.shape, self.grad, self.strides = ptr, shape, grad, strides

    @property
    def __cuda_array_interface__(self) -> dict:
        if self.grad:
            raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad")
        return {"data": (self.ptr, False), "shape": self.shape, "typestr": "<f4",
                "strides": self.strides, "version": 3}  # fmt: skip

    def detach(self) -> Tensor:
        return Tensor(self.ptr, self.shape, strides=self.strides)


def test_a_tensor_that_requires_grad_is_read_through_its_detached_view():
    ((name, view),) = device_views(GPU, (Tensor(4096, (8, 1024), grad=True),))
    assert name == "reads[0]" and isinstance(view, BorrowedBuffer)
    assert (view.ptr, view.nbytes) == (4096, 8 * 1024 * 4)
    view.free()  # never the owner's memory: only marked
    assert view.freed


def test_strided_host_and_simulated_inputs_are_not_watched():
    transposed = Tensor(0, (8, 1024), strides=(4, 32))
    contiguous = Tensor(0, (8, 1024), strides=(4096, 4))
    found = device_views(GPU, (transposed, contiguous, np.zeros(4), 12))
    assert [name for name, _ in found] == ["reads[1]"]
    assert device_views(SIM, (contiguous,)) == []


def test_the_tests_own_device_buffers_are_watched_as_they_are():
    buffer = DeviceBuffer(SIM, 1, 64)
    assert device_views(SIM, buffer) == [("reads[0]", buffer)]
    buffer.freed = True
    assert device_views(SIM, buffer) == []
