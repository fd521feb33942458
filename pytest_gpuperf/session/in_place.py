"""A callable that updates the test's own tensors in place: seen, and undone.

Under --gpuperf a callable runs hundreds of times on the same tensors. One that writes into
what it reads (Liger-Kernel's cross-entropy stores its gradient in its logits, an optimizer
step adds to its parameters, `x.add_(y)`) leaves them changed by every call: work that depends
on the data (a mask, a sort, `nonzero`) then times other data than the test's, values drift
towards overflow, and the test's own output check after the measurement sees hundreds of
applications instead of one.

So the tensors a test declares it reads (`reads=`: device buffers, and arrays that expose
`__cuda_array_interface__`, as PyTorch's and CuPy's CUDA tensors do) are copied on the device
before the first call, and compared with those copies after it. A tensor the call changed is
restored from its copy before every timed call (untimed: the engine's setup slot, before the
cache flush) and once more before a last call after the measurement, so the test checks one
application on its own inputs. An A/B pair's captures each run on tensors of their own, so
there the copies only put the test's tensors back at the end (both sides drift alike).
Tensors beyond WATCH_MAX_BYTES in all are not watched, and the measurement says so.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from pytest_gpuperf.engine.results import Measurement
from pytest_gpuperf.errors import GpuPerfError, OutOfDeviceMemory
from pytest_gpuperf.runtime.base import Backend, DeviceBuffer

# The declared inputs watched at most: each is copied on the device and, once, compared on the
# host (read back in full), which costs host memory and a second or so per GiB.
WATCH_MAX_BYTES = 1 << 30


class BorrowedBuffer(DeviceBuffer):
    """A view of device memory that another library owns (a PyTorch or CuPy tensor's):
    copied to and from, never freed here."""

    def free(self) -> None:
        self.freed = True


def device_views(backend: Backend, declared: Any) -> list[tuple[str, DeviceBuffer]]:
    """(a name, a device view) of each declared object that lives on the device in one
    contiguous piece: the test's DeviceBuffers, and tensors with `__cuda_array_interface__`
    on a real GPU (the simulated device's memory is its own)."""
    items = declared if isinstance(declared, (list, tuple)) else [declared]
    views: list[tuple[str, DeviceBuffer]] = []
    for position, item in enumerate(items):
        name = f"reads[{position}]"
        if isinstance(item, DeviceBuffer):
            if not item.freed and item.backend is backend:
                views.append((name, item))
            continue
        interface = None if backend.info.simulated else _interface(item)
        if interface is None:
            continue
        nbytes = _contiguous_bytes(interface)
        if nbytes:
            views.append((name, BorrowedBuffer(backend, int(interface["data"][0]), nbytes)))
    return views


def _interface(item: Any) -> dict[str, Any] | None:
    """`item.__cuda_array_interface__`, or its detached view's (PyTorch refuses the interface
    of a tensor that requires grad; its data is the same memory); None where there is none."""
    for candidate in (item, _detached(item)):
        try:
            interface = getattr(candidate, "__cuda_array_interface__", None)
        except Exception:  # a library's own refusal: try the next, never an error here
            continue
        if isinstance(interface, dict):
            return interface
    return None


def _detached(item: Any) -> Any:
    detach = getattr(item, "detach", None)
    try:
        return detach() if callable(detach) else None
    except Exception:
        return None


def _contiguous_bytes(interface: dict[str, Any]) -> int:
    """The bytes of a C-contiguous array's interface (0: not contiguous, or not readable)."""
    try:
        shape = tuple(int(n) for n in interface["shape"])
        itemsize = np.dtype(interface["typestr"]).itemsize
        strides = interface.get("strides")
    except (KeyError, TypeError, ValueError):
        return 0
    if strides is not None:
        expected, step = [], itemsize
        for extent in reversed(shape):
            expected.append(step)
            step *= extent
        if tuple(int(s) for s in strides) != tuple(reversed(expected)):
            return 0
    return itemsize * math.prod(shape)


@dataclass(eq=False)
class Watch:
    """Device copies of the declared inputs, taken before the first call."""

    backend: Backend
    views: list[tuple[str, DeviceBuffer]]
    copies: list[DeviceBuffer]
    changed: list[int] = field(default_factory=list)  # positions the first call changed
    not_watched: str = ""  # why some inputs were not watched ("" when all were)

    def compare(self) -> list[str]:
        """The names of the inputs the call(s) since the copies changed."""
        self.changed = [
            position
            for position, ((_, view), copy) in enumerate(zip(self.views, self.copies, strict=True))
            if not np.array_equal(view.download(), copy.download())
        ]
        return [self.views[position][0] for position in self.changed]

    def restore(self) -> None:
        """Queue (without waiting) the copies back into the inputs the call changed."""
        for position in self.changed:
            self.backend.copy(self.views[position][1], self.copies[position])

    def words(self) -> str:
        """What the measurement says about it (for its `extra`)."""
        restored = ", ".join(
            f"{self.views[p][0]} ({self.views[p][1].nbytes / 1e6:,.1f} MB)" for p in self.changed
        )
        return f"the call updates {restored} in place: restored from a copy, untimed"

    def free(self) -> None:
        for copy in self.copies:
            with contextlib.suppress(GpuPerfError):
                copy.free()
        self.copies.clear()


def watch(backend: Backend, reads: Any) -> Watch | None:
    """Device copies of the declared inputs `reads` (None when none lives on the device)."""
    views = device_views(backend, reads)
    if not views:
        return None
    kept: list[tuple[str, DeviceBuffer]] = []
    total, skipped = 0, []
    for name, view in views:
        if total + view.nbytes > WATCH_MAX_BYTES:
            skipped.append(name)
            continue
        total += view.nbytes
        kept.append((name, view))
    copies: list[DeviceBuffer] = []
    try:
        for _, view in kept:
            copy = backend.alloc(view.nbytes)
            copies.append(copy)
            backend.copy(copy, view)
    except OutOfDeviceMemory:
        for copy in copies:
            copy.free()
        return Watch(backend, [], [], not_watched="the device had no room for their copies")
    not_watched = (
        f"{', '.join(skipped)} not watched for updates in place (beyond "
        f"{WATCH_MAX_BYTES / 2**30:g} GiB)"
        if skipped
        else ""
    )
    return Watch(backend, kept, copies, not_watched=not_watched)


def first_call(
    backend: Backend, reads: Any, fn: Callable[[], Any], setup: Callable[[], Any] | None
) -> Watch | None:
    """The declared inputs copied, one call made (the engine's first, untimed: compiles and
    autotuning), and the inputs it changed found; None when no input lives on the device."""
    found = watch(backend, reads) if reads is not None else None
    if found is None or not found.views:
        return found
    if setup is not None:
        setup()
    fn()
    backend.synchronize()
    found.compare()
    return found


def noted(measurement: Measurement, found: Watch | None) -> Measurement:
    """The measurement with what the watch found in its `extra` ("in_place")."""
    if found is None or not (found.changed or found.not_watched):
        return measurement
    words = "; ".join(w for w in (found.words() if found.changed else "", found.not_watched) if w)
    return replace(measurement, extra={**measurement.extra, "in_place": words})


def with_restore(setup: Callable[[], Any] | None, found: Watch | None) -> Callable[[], Any] | None:
    """The setup a measurement runs before each call: the test's, then the restoring copies
    of the inputs the first call changed (none changed: the test's setup as it was)."""
    if found is None or not found.changed:
        return setup

    def restore_then_setup() -> None:
        found.restore()
        if setup is not None:
            setup()

    return restore_then_setup


def last_call(
    backend: Backend,
    fn: Callable[[], Any],
    setup: Callable[[], Any] | None,
    found: Watch | None,
) -> None:
    """After the measurement: the inputs restored and one more call, so the test's output
    check sees one application on its own inputs."""
    if found is None or not found.changed:
        return
    found.restore()
    if setup is not None:
        setup()
    fn()
    backend.synchronize()


__all__ = [
    "WATCH_MAX_BYTES",
    "BorrowedBuffer",
    "Watch",
    "device_views",
    "first_call",
    "last_call",
    "noted",
    "watch",
    "with_restore",
]
