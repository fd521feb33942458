"""Inputs made on the device and outputs checked on the device (kernels/gpuperf_check.hip).

A perf test's host work used to dwarf its GPU work: 32M-element random inputs drawn and
uploaded by NumPy, every output downloaded and compared in float64 on the host (on the H100
about 4.5 s of a 12 s main job, for 1.3 s of GPU time). Here the inputs come from a
counter-based hash on the device, reproducible by seed, the same bits on every backend and in
NumPy (`Values.host`), and a compare kernel counts the elements outside the tolerance against
a float64 reference computed on the device, returning the count and the first bad index.
NumPy runs only to explain a failure (the caller recomputes the bad elements on the host).

The simulated device runs the same kernels in NumPy (catalog.emulate; bit for bit for the
hash), so a suite that uses them runs without a GPU.
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

CHECK_SOURCE = "gpuperf_check.hip"
CHECK_KERNELS = frozenset(
    {
        "gpuperf_fill_values",
        "gpuperf_ref_axpby",
        "gpuperf_ref_silu_and_mul",
        "gpuperf_ref_rmsnorm",
        "gpuperf_ref_rope",
        "gpuperf_ref_dot_partials",
        "gpuperf_ref_sum",
        "gpuperf_compare",
    }
)
BLOCK = 256  # threads per block of every check kernel (gpuperf_ref_rmsnorm's shared array)
MAX_BLOCKS = 65535  # grid-stride kernels: any grid covers everything
NO_INDEX = 2**64 - 1  # the compare kernel's "no bad element" (~0ull)
_MIX1, _MIX2, _GOLDEN = np.uint32(0x7FEB352D), np.uint32(0x846CA68B), np.uint32(0x9E3779B9)
_CHUNK = 1 << 22  # elements per pass of the NumPy hash: its temporaries stay small


# -- the hash, in NumPy: bit for bit what gpuperf_check.hip computes -----------------------------


def _mix32(x: np.ndarray) -> np.ndarray:
    """lowbias32 on uint32 words, in place (wrapping multiplies, as on the device)."""
    x ^= x >> np.uint32(16)
    x *= _MIX1
    x ^= x >> np.uint32(15)
    x *= _MIX2
    x ^= x >> np.uint32(16)
    return x


def hash_bits(seed: int, count: int, start: int = 0) -> np.ndarray:
    """gp_hash(i, seed) for i in [start, start + count), as uint32."""
    out = np.empty(count, dtype=np.uint32)
    done = 0
    while done < count:  # per run of indices that share their high 32 bits: one stream word
        first = start + done
        high, low = first >> 32, first & 0xFFFFFFFF
        size = min(count - done, 2**32 - low)
        word = _mix32(np.array([(high + 0x9E3779B9) & 0xFFFFFFFF], dtype=np.uint32))
        word ^= np.uint32(seed & 0xFFFFFFFF)
        stream = _mix32(word)[0]
        part = out[done : done + size]
        part[:] = np.arange(low, low + size, dtype=np.uint32)
        part ^= stream
        _mix32(part)
        done += size
    return out


@dataclass(frozen=True)
class Values:
    """`count` float32 inputs made by gpuperf_fill_values from `seed`: magnitudes in
    [low, low + width), uniform on a grid of width / 2^24, negative at random when `signed`.
    `width` is a power of two, so the device's arithmetic (fused or not) and NumPy's agree
    exactly; `low` > 0 keeps every value away from zero (relative tolerances hold)."""

    count: int
    seed: int
    low: float = 0.1
    width: float = 1.0
    signed: bool = True

    def __post_init__(self) -> None:
        if not (self.width > 0 and math.frexp(self.width)[0] == 0.5):
            raise ConfigError(f"Values: width {self.width} is not a power of two")
        if not self.low >= 0:
            raise ConfigError(f"Values: low {self.low} must be >= 0 (the sign is drawn)")
        if self.count < 0 or not 0 <= self.seed < 2**32:
            raise ConfigError(f"Values: count {self.count} and seed {self.seed} must fit uint")

    @property
    def scale(self) -> float:
        return self.width / 2**24

    def host(self) -> np.ndarray:
        """The same values made by NumPy (to explain a failure, and for the tests)."""
        out = np.empty(self.count, dtype=np.float32)
        for start in range(0, self.count, _CHUNK):
            bits = hash_bits(self.seed, min(_CHUNK, self.count - start), start)
            out[start : start + bits.size] = values_from_bits(
                bits, self.low, self.scale, self.signed
            )
        return out


def values_from_bits(bits: np.ndarray, low: float, scale: float, signed: bool) -> np.ndarray:
    """What gpuperf_fill_values makes of hash words: float32 arithmetic, as on the device.
    The sign: negation flips the sign bit alone, so setting it from the hash's lowest bit is
    the same (magnitudes are >= low >= 0)."""
    values = (bits >> np.uint32(8)).astype(np.float32)
    values *= np.float32(scale)
    values += np.float32(low)
    if signed:
        values.view(np.uint32)[...] |= bits << np.uint32(31)
    return values


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
