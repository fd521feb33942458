"""The simulated device's compute roof: a launch lasts at least its FLOPs at the declared math
type's dense peak times a compute efficiency (docs/simulated-device.md, "Kernel time").

Its FLOPs come from a registered model's `flops` (kernel_models.py), else from what the test
declared (`gpu_bench(..., flops=, math=)`, handed over through `Backend.declare_work`); a
kernel with neither is timed from its bytes alone, as before. The peaks are the device
table's (runtime/compute_peaks.py: MI300X 1307.4 TFLOP/s bf16 dense, AMD's data sheet). The
efficiency is the kernel's `// gpuperf-sim: compute_efficiency=` directive, else its model's
`compute_efficiency`, else DEFAULT_COMPUTE_EFFICIENCY: an
assumption, not a measurement (no AMD GPU has run these kernels), chosen between what a
plain tiled kernel and a vendor GEMM reach. Like every number of the simulated device, the
result is the model's, never a device's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.runtime.compute_peaks import peaks_of
from pytest_gpuperf.runtime.devices import DeviceSpec
from pytest_gpuperf.simulate import kernel_models
from pytest_gpuperf.simulate.execute import SimKernel

DEFAULT_COMPUTE_EFFICIENCY = 0.70


class ComputeTimes:
    """The compute part of the simulated device's kernel times, for one device."""

    def __init__(self, spec: DeviceSpec) -> None:
        self.spec = spec
        # (source file, kernel name) -> (flops, math): every build of the file's kernel (a
        # base revision's, a module loaded again) does the same work
        self._declared: dict[tuple[Path | None, str], tuple[int, str]] = {}

    def declare(self, handle: SimKernel, flops: int, math: str) -> None:
        """What a test declared a kernel computes (the fixture checked it against the
        device's peaks)."""
        self._declared[(handle.source, handle.name)] = (int(flops), math)

    def seconds(self, handle: SimKernel, views: Callable[[], list[Any]]) -> float:
        """The least time one launch's FLOPs take (0.0: no FLOPs known, bytes alone time it);
        `views` gives the launch's arguments as a model sees them."""
        model = handle.model()
        if model is not None and model.flops is not None and model.math is not None:
            flops, math = kernel_models.counted(model, "flops", views()), model.math
        elif (handle.source, handle.name) in self._declared:
            flops, math = self._declared[(handle.source, handle.name)]
        else:
            return 0.0
        peak = peaks_of(self.spec.key).get(math)
        if peak is None:
            what = model.describe() if model is not None else handle.name
            raise ConfigError(
                f"simulated kernel model {what}: no {math} peak known for {self.spec.name}, "
                "so its FLOPs cannot be timed; declare a type the device has a peak for"
            )
        return flops / (peak * compute_efficiency(handle))


def compute_efficiency(handle: SimKernel) -> float:
    """The fraction of the type's peak the kernel computes at: its gpuperf-sim directive,
    else its model's, else DEFAULT_COMPUTE_EFFICIENCY."""
    if handle.compute_efficiency is not None:
        return handle.compute_efficiency
    model = handle.model()
    if model is not None and model.compute_efficiency is not None:
        return model.compute_efficiency
    return DEFAULT_COMPUTE_EFFICIENCY


__all__ = ["DEFAULT_COMPUTE_EFFICIENCY", "ComputeTimes"]
