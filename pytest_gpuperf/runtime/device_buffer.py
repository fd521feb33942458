"""A buffer of device memory: the one runtime type that both the backend interface (base.py)
and the launch-argument check (signature.py) need, so it lives below both of them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from pytest_gpuperf.runtime.base import Backend


@dataclass(eq=False)
class DeviceBuffer:
    """Device memory owned by a backend; `ptr` is the device address as an integer."""

    backend: Backend = field(repr=False)
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
