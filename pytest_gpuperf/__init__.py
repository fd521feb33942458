"""pytest-gpuperf: GPU kernel performance as pass/fail pytest tests.

The library front door, loaded on first use so that the pytest plugin stays cheap to import:

    import pytest_gpuperf as gp
    with gp.open_device() as device:
        m = device.measure(kernel, grid=..., block=..., args=..., bytes=...)

`open_device`, `Device` (api.py), `Measurement`, `PairedComparison` (results.py),
`MeasureSettings`, `measure_kernel`, `measure_callable`, `measure_pair` (measure.py) and
`DeviceSpec` (devices.py) are importable from here.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from pytest_gpuperf.errors import (
    CompileError,
    ConfigError,
    DeviceUnavailable,
    GpuPerfError,
    LaunchError,
)
from pytest_gpuperf.record.meta import VERSION as __version__
from pytest_gpuperf.runtime import register_backend as _register_backend
from pytest_gpuperf.runtime.lazy import lazy_getattr as _lazy_getattr

# The backends that live above the runtimes are registered here, at the package's root (the
# one module that stands over every layer), so the runtime never names a layer above it: the
# simulated device, opened by its name "sim" and imported only then.
_register_backend("sim", "pytest_gpuperf.simulate.device", "SimBackend")

# The commands' old module paths (`python -m pytest_gpuperf.compare`, ...: now `gpuperf
# compare`) live on for one release as shims in commands/old_paths/, found as submodules of
# this package through a second folder on its __path__: no name of the top level, which holds
# the layers. They go in the next release.
__path__.append(os.path.join(os.path.dirname(__file__), "commands", "old_paths"))

_LAZY = {
    "open_device": "session.api",
    "Device": "session.api",
    "Measurement": "engine.results",
    "PairedComparison": "engine.results",
    "MeasureSettings": "engine.measure",
    "measure_kernel": "engine.measure",
    "measure_callable": "engine.measure",
    "measure_pair": "engine.measure",
    "DeviceSpec": "runtime.devices",
}

if TYPE_CHECKING:
    from pytest_gpuperf.engine.measure import (
        MeasureSettings,
        measure_callable,
        measure_kernel,
        measure_pair,
    )
    from pytest_gpuperf.engine.results import Measurement, PairedComparison
    from pytest_gpuperf.runtime.devices import DeviceSpec
    from pytest_gpuperf.session.api import Device, open_device


__getattr__ = _lazy_getattr(__name__, _LAZY)


__all__ = [
    "CompileError",
    "ConfigError",
    "Device",
    "DeviceSpec",
    "DeviceUnavailable",
    "GpuPerfError",
    "LaunchError",
    "MeasureSettings",
    "Measurement",
    "PairedComparison",
    "__version__",
    "measure_callable",
    "measure_kernel",
    "measure_pair",
    "open_device",
]
