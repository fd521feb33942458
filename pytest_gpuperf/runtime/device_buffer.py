"""A buffer of device memory: the one runtime type that both the backend interface (base.py)
and the launch-argument check (signature.py) need, so it lives below both of them. What it
asks of its backend is the three copies and frees of `BufferOwner`, which every Backend
(base.py) provides; naming that here, not the Backend, keeps this module below base.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np


class BufferOwner(Protocol):
    """The backend calls a buffer makes (runtime.base.Backend has them all)."""

    def upload(self, buffer: DeviceBuffer, array: np.ndarray) -> None: ...

    def download(self, out: np.ndarray, buffer: DeviceBuffer) -> None: ...

    def free(self, buffer: DeviceBuffer) -> None: ...


@dataclass(eq=False)
class DeviceBuffer:
    """Device memory owned by a backend; `ptr` is the device address as an integer."""

    backend: BufferOwner = field(repr=False)
    ptr: int
    nbytes: int
    freed: bool = False

    def upload(self, array: np.ndarray) -> None:
        self.backend.upload(self, array)

    def download(
        self, dtype: Any = np.uint8, shape: Sequence[int] | int | None = None
    ) -> np.ndarray:
        """Copy the buffer back to the host as a new array of `dtype` and `shape`."""
        dtype = np.dtype(dtype)
        count = self.nbytes // dtype.itemsize
        out = np.empty(count, dtype=dtype)
        self.backend.download(out, self)
        return out.reshape(shape) if shape is not None else out

    def free(self) -> None:
        self.backend.free(self)
