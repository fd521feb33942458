"""Buffers as the fixture and the library hand them out and take them back: shapes checked,
outputs filled with POISON_BYTE so that an element a kernel never writes fails the output
check, and a device-to-device copy's buffers checked before it is queued."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.runtime.base import Backend, DeviceBuffer

POISON_BYTE = 0xFF  # every float type reads NaN, every integer -1: unwritten outputs show


def shape_dims(shape: Any, where: str) -> tuple[int, ...]:
    """`shape` (an int or a sequence of them) as a tuple; ConfigError naming `where` for
    anything else, or a negative dimension."""
    try:
        dims = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    except TypeError:  # a float or None: not a shape, and not iterable
        raise ConfigError(f"{where}: shape must be whole numbers, got {shape!r}") from None
    if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in dims):
        raise ConfigError(f"{where}: shape must be whole numbers, got {shape!r}")
    if any(int(d) < 0 for d in dims):
        raise ConfigError(f"{where}: shape must not be negative, got {shape!r}")
    return tuple(int(d) for d in dims)


def poisoned_buffer(
    backend: Backend, shape: int | Sequence[int], dtype: Any, where: str
) -> DeviceBuffer:
    """A new buffer of `shape` x `dtype` (at least one byte), filled with POISON_BYTE."""
    count = math.prod(shape_dims(shape, where))
    buffer = backend.alloc(max(int(count) * np.dtype(dtype).itemsize, 1))
    backend.fill(buffer, POISON_BYTE)
    return buffer


def shaped(flat: np.ndarray, shape: Any, buffer: DeviceBuffer, where: str) -> np.ndarray:
    """The first elements of `flat` (a buffer's contents) as a new array of `shape` (None:
    all of it); ConfigError naming `where` for a shape the buffer cannot fill."""
    if shape is None:
        return flat
    dims = shape_dims(shape, where)
    count = math.prod(dims)
    if count > flat.size:
        raise ConfigError(
            f"{where}: shape {tuple(dims)} needs {count} x {flat.dtype} but the "
            f"buffer holds {buffer.nbytes} bytes ({flat.size} elements)"
        )
    return flat[:count].reshape(dims).copy()


def check_copy(dst: Any, src: Any, where: str) -> None:
    """That `dst` and `src` are two live device buffers of one size, as a device-to-device
    copy of the whole buffer needs; ConfigError naming `where` and the way out otherwise."""
    ways_out = {
        "destination": "to read a buffer back, use gpu_bench.from_device(buffer)",
        "source": "put the array there once with gpu_bench.to_device(array), outside setup=, "
        "and copy from that buffer",
    }
    for role, buffer in (("destination", dst), ("source", src)):
        if isinstance(buffer, np.ndarray):
            raise ConfigError(
                f"{where}: the {role} is a host array ({buffer.dtype}, shape {buffer.shape}), "
                f"not a device buffer; copy copies on the device: {ways_out[role]}"
            )
        if not isinstance(buffer, DeviceBuffer):
            raise ConfigError(
                f"{where}: the {role} must be a device buffer (gpu_bench.to_device, "
                f"gpu_bench.empty), got {type(buffer).__name__}"
            )
        if buffer.freed:
            raise ConfigError(
                f"{where}: the {role} buffer was already freed (by .free(), or when the "
                "test that made it ended); copy between buffers of this test"
            )
    if dst is src:
        raise ConfigError(f"{where}: the source and the destination are the same buffer")
    if dst.nbytes != src.nbytes:
        raise ConfigError(
            f"{where}: the source holds {src.nbytes} bytes and the destination {dst.nbytes}; "
            "copy copies a whole buffer into one of the same size"
        )


@dataclass(frozen=True)
class Unwritten:
    """Output buffer `number` (the test's n-th `empty`) still has `count` of its `total`
    elements as they were made: every byte POISON_BYTE."""

    number: int
    count: int
    total: int


def unwritten_elements(number: int, buffer: DeviceBuffer, dtype: np.dtype) -> Unwritten:
    """How many of `buffer`'s `dtype` elements are still nothing but POISON_BYTE."""
    raw = buffer.download(np.uint8)
    whole = raw.size // dtype.itemsize * dtype.itemsize
    elements = raw[:whole].reshape(-1, dtype.itemsize)
    count = int(np.count_nonzero((elements == POISON_BYTE).all(axis=1)))
    return Unwritten(number, count, len(elements))


def unwritten_outputs(empties: Sequence[tuple[DeviceBuffer, np.dtype]]) -> list[Unwritten]:
    """Of the outputs `empties` (each buffer `empty` made, with its dtype, in order), those
    whose elements are not all written, numbered from 1 in that order; freed ones skipped."""
    found = (
        unwritten_elements(number, buffer, dtype)
        for number, (buffer, dtype) in enumerate(empties, 1)
        if not buffer.freed
    )
    return [u for u in found if u.count]
