"""Backends behind one interface, registered by name and imported only when asked for.

`open_backend("auto")` tries hip, then cuda; the simulated device is used only when named,
so a machine without a GPU never measures a fake device by accident. Importing this package
imports no backend and no NumPy: the interface types load on first use.

The vendors' backends (hip, cuda) live here; a backend from a layer above (the simulated
device, `pytest_gpuperf.simulate`) is registered with `register_backend` by the package's root
(`pytest_gpuperf/__init__.py`, imported before any of its modules), so nothing here names a
layer above it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from pytest_gpuperf.errors import Attempt, DeviceUnavailable
from pytest_gpuperf.runtime.info import DeviceInfo, KernelResources
from pytest_gpuperf.runtime.lazy import lazy_getattr

if TYPE_CHECKING:
    from pytest_gpuperf.runtime.base import Backend, DeviceBuffer, Kernel, Module

# name -> module exposing `open(device_index: int, **options) -> Backend`, which raises
# DeviceUnavailable carrying one Attempt that says why (library missing, no device, ...).
BACKENDS = {
    "hip": "pytest_gpuperf.runtime.hip",
    "cuda": "pytest_gpuperf.runtime.cuda",
}
# name -> the Backend subclass in that module: its device_count() is part of the interface.
BACKEND_CLASSES = {"hip": "HipBackend", "cuda": "CudaBackend"}
AUTO_ORDER = ("hip", "cuda")
# the interface types, loaded on first use (they import NumPy)
_LAZY = {name: "base" for name in ("Backend", "DeviceBuffer", "Kernel", "Module")}


def register_backend(name: str, module: str, class_name: str) -> None:
    """Make backend `name` openable: `module` (imported when the backend is asked for)
    exposes `open(device_index, **options)` and the Backend subclass `class_name`. Never
    among AUTO_ORDER's: a registered backend is used only when named."""
    BACKENDS[name] = module
    BACKEND_CLASSES[name] = class_name


def open_backend(name: str = "auto", device_index: int = 0, **options: object) -> Backend:
    """Open device `device_index` on the named backend, or the first that works for "auto"."""
    if name != "auto" and name not in BACKENDS:
        known = ", ".join(["auto", *BACKENDS])
        raise DeviceUnavailable([Attempt(name, "unknown backend")], hint=f"choose one of: {known}")
    attempts: list[Attempt] = []
    for candidate in AUTO_ORDER if name == "auto" else (name,):
        module = importlib.import_module(BACKENDS[candidate])
        try:
            backend: Backend = module.open(device_index, **options)
            return backend
        except DeviceUnavailable as unavailable:
            attempts.extend(unavailable.attempts)
    hint = "pass --gpuperf-backend=sim to run on the simulated device" if name == "auto" else ""
    raise DeviceUnavailable(attempts, hint=hint)


def backend_class(name: str) -> type[Backend]:
    """The Backend subclass registered as `name` (imports its module)."""
    cls: type[Backend] = getattr(importlib.import_module(BACKENDS[name]), BACKEND_CLASSES[name])
    return cls


__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = [
    "BACKENDS",
    "Backend",
    "DeviceBuffer",
    "DeviceInfo",
    "Kernel",
    "KernelResources",
    "Module",
    "backend_class",
    "open_backend",
    "register_backend",
]
