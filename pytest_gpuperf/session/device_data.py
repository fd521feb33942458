"""Inputs made on the device and outputs checked on the device (kernels/gpuperf_check.hip).

A perf test's host work used to dwarf its GPU work: 32M-element random inputs drawn and
uploaded by NumPy, every output downloaded and compared in float64 on the host (on the H100
about 4.5 s of a 12 s main job, for 1.3 s of GPU time). Here the inputs come from a
counter-based hash on the device, reproducible by seed, the same bits on every backend and in
NumPy (`Values.host`), and a compare kernel counts the elements outside the tolerance against
a float64 reference computed on the device, returning the count and the first bad index.
NumPy runs only to explain a failure (the caller recomputes the bad elements on the host).

The simulated device runs the same kernels in NumPy (`simulate/shipped_kernels.py`; the hash
is `simulate/input_hash.py`'s, bit for bit), so a suite that uses them runs without a GPU.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.runtime.base import Backend, DeviceBuffer, Kernel
from pytest_gpuperf.runtime.compile import KERNELS_DIR
from pytest_gpuperf.simulate.input_hash import Values

CHECK_SOURCE = "gpuperf_check.hip"
BLOCK = 256  # threads per block of every check kernel (gpuperf_ref_rmsnorm's shared array)
MAX_BLOCKS = 65535  # grid-stride kernels: any grid covers everything
NO_INDEX = 2**64 - 1  # the compare kernel's "no bad element" (~0ull)


# -- the kernels on a backend ------------------------------------------------------------------


@dataclass(frozen=True)
class Mismatch:
    """What the compare kernel found: how many elements are wrong and the first of them."""

    wrong: int
    first_index: int | None


def grid_for(work_items: int) -> int:
    """Blocks of BLOCK threads for a grid-stride kernel over `work_items`."""
    return max(1, min(MAX_BLOCKS, math.ceil(work_items / BLOCK)))


# Kept on the backend itself, as the measurement engine keeps its kernels (timing.engine_for).
_ATTRIBUTE = "_gpuperf_device_data"


class DeviceData:
    """gpuperf_check.hip loaded on one backend: fill, reference launches, compare."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.module = backend.compile(KERNELS_DIR / CHECK_SOURCE)
        self._kernels: dict[str, Kernel] = {}

    def kernel(self, name: str) -> Kernel:
        if name not in self._kernels:
            self._kernels[name] = self.module.kernel(name)
        return self._kernels[name]

    def fill(self, buffer: DeviceBuffer, values: Values) -> None:
        """Write `values` into the start of `buffer` (asynchronously, default stream)."""
        if values.count * 4 > buffer.nbytes:
            raise ConfigError(
                f"fill: {values.count} float32 values overrun the {buffer.nbytes}-byte buffer"
            )
        args = (buffer, values.count, values.seed, values.low, values.scale, int(values.signed))
        self.launch("gpuperf_fill_values", values.count, args)

    def launch(self, name: str, work_items: int, args: Sequence[Any], grid: int | None = None):
        """Launch check kernel `name` over `work_items` (grid-stride; `grid` overrides)."""
        blocks = grid if grid is not None else grid_for(work_items)
        self.backend.launch(self.kernel(name), blocks, BLOCK, tuple(args))

    def compare(
        self, got: DeviceBuffer, expected: DeviceBuffer, count: int, rtol: float, atol: float
    ) -> Mismatch:
        """Count the float32 elements of `got` outside atol + rtol |expected| of the float64
        `expected` (NaN counts as wrong), on the device; waits for the answer (16 bytes)."""
        result = self.backend.to_device(np.array([0, NO_INDEX], dtype=np.uint64))
        try:
            self.launch("gpuperf_compare", count, (got, expected, count, rtol, atol, result))
            found = np.empty(2, dtype=np.uint64)
            self.backend.synchronize()
            self.backend.download(found, result)
        finally:
            result.free()
        wrong = int(found[0])
        return Mismatch(wrong, int(found[1]) if wrong else None)


def device_data(backend: Backend) -> DeviceData:
    """The check kernels on `backend`, compiled (through the compile cache) on first use."""
    loaded = getattr(backend, _ATTRIBUTE, None)
    if loaded is None:
        loaded = DeviceData(backend)
        setattr(backend, _ATTRIBUTE, loaded)
    return loaded
