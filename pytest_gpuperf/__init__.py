"""pytest-gpuperf: GPU kernel performance as pass/fail pytest tests."""

from pytest_gpuperf.errors import (
    CompileError,
    DeviceUnavailable,
    GpuPerfError,
    LaunchError,
)

__version__ = "0.1.0"

__all__ = ["CompileError", "DeviceUnavailable", "GpuPerfError", "LaunchError", "__version__"]
