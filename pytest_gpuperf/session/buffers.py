"""Output buffers as the fixture and the library hand them out: shapes checked, and filled
with POISON_BYTE so that an element a kernel never writes fails the output check."""

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


def shaped_download(buffer: DeviceBuffer, dtype: Any, shape: Any, where: str) -> np.ndarray:
    """The buffer's contents as a host array of `dtype` and `shape` (None: all of it, flat);
    ConfigError naming `where` when the shape needs more than the buffer holds."""
    flat = buffer.download(dtype)
    if shape is None:
        return flat
    dims = shape_dims(shape, where)
    count = math.prod(dims)
    if count > flat.size:
        raise ConfigError(
            f"{where}: shape {tuple(dims)} needs {count} x {np.dtype(dtype)} but the "
            f"buffer holds {buffer.nbytes} bytes ({flat.size} elements)"
        )
    return flat[:count].reshape(dims).copy()


def unwritten_outputs(empties: Sequence[tuple[DeviceBuffer, np.dtype]]) -> list[Unwritten]:
    """The outputs among `empties` (the test's `empty` buffers, in order) that still hold
    elements of the poison fill alone (freed ones are skipped)."""
    found = (
        unwritten_elements(number, buffer, dtype)
        for number, (buffer, dtype) in enumerate(empties, 1)
        if not buffer.freed
    )
    return [u for u in found if u.count]
