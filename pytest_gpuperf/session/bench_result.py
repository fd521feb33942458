"""`BenchResult`: what one `gpu_bench(...)` call hands back to the test.

A plain frozen value: the measurement (under --gpuperf) or, in smoke mode, the launch facts
and a note saying why nothing was timed; its properties read the timing from the measurement.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar, overload

from pytest_gpuperf.engine.results import Measurement, PairedComparison
from pytest_gpuperf.engine.roofline import Roofline
from pytest_gpuperf.runtime.base import KernelResources
from pytest_gpuperf.runtime.info import ClockReport

T = TypeVar("T")


class _Timed(Generic[T]):
    """A `BenchResult` property read from its measurement along `path` (dotted: the
    roofline's figures), divided by `per` (GB/s from B/s): None in smoke mode, where nothing
    was timed, and where a step on the path is None (no roofline without declared work)."""

    def __init__(self, path: str, *, per: float = 1.0, doc: str = "") -> None:
        self._steps = path.split(".")
        self._per = per
        self.__doc__ = doc or f"The measurement's {path}; None in smoke mode."

    @overload
    def __get__(self, result: None, owner: type) -> _Timed[T]: ...
    @overload
    def __get__(self, result: BenchResult, owner: type) -> T | None: ...
    def __get__(self, result: BenchResult | None, owner: type) -> _Timed[T] | T | None:
        if result is None:
            return self
        value: Any = result.measurement
        for step in self._steps:
            if value is None:
                return None
            value = getattr(value, step)
        return value if value is None or self._per == 1.0 else value / self._per


@dataclass(frozen=True)
class BenchResult:
    """What one `gpu_bench(...)` call produced.

    Measured (under --gpuperf): `measurement` holds the median time, its interval, the samples,
    clocks and the device; the properties below read from it. In smoke mode only the launch
    facts are known and the timing properties are None; `note` says why.
    """

    name: str
    kernel: str
    bytes_moved: int
    cache: str
    measurement: Measurement | None = None
    resources: KernelResources | None = None
    note: str = ""
    comparison: PairedComparison | None = None  # head vs base under --gpuperf-compare

    @property
    def measured(self) -> bool:
        return self.measurement is not None

    time_s = _Timed[float]("time_s")
    time_ci_s = _Timed[tuple[float, float]]("time_ci_s")
    bandwidth_bps = _Timed[float]("bandwidth_bps")
    gbps = _Timed[float]("bandwidth_bps", per=1e9)
    efficiency = _Timed[float]("efficiency")
    efficiency_ci = _Timed[tuple[float, float]]("efficiency_ci")
    roofline = _Timed[Roofline](
        "roofline", doc="Where it stands on the roofline (flops=, math= declared), else None."
    )
    flops_per_s = _Timed[float]("roofline.flops_per_s")
    tflops = _Timed[float]("roofline.tflops")
    compute_efficiency = _Timed[float](
        "roofline.compute_efficiency",
        doc="Achieved FLOP/s over the device's dense peak for the declared math type.",
    )
    roofline_efficiency = _Timed[float](
        "roofline.roofline_efficiency",
        doc="Achieved FLOP/s over the roof that binds at the declared intensity.",
    )

    @property
    def samples(self) -> int:
        return len(self.measurement.samples_s) if self.measurement else 0

    @property
    def samples_s(self) -> tuple[float, ...]:
        return self.measurement.samples_s if self.measurement else ()

    @property
    def clocks(self) -> ClockReport | None:
        return self.measurement.clocks if self.measurement else None

    @property
    def simulated(self) -> bool:
        return bool(self.measurement and self.measurement.simulated)

    def __str__(self) -> str:
        m = self.measurement
        if m is None:
            return f"{self.name}: {self.note}"
        low_s, high_s = m.time_ci_s
        text = (
            f"{self.name}: {m.time_s * 1e6:.2f} us [{low_s * 1e6:.2f}, {high_s * 1e6:.2f}], "
            f"{m.bandwidth_bps / 1e9:.1f} GB/s, {m.efficiency:.1%} of {m.peak_bps / 1e12:.2f} "
            f"TB/s ({m.cache}, {len(m.samples_s)} samples, {m.device_key})"
        )
        if m.roofline is not None:
            text += "; " + roofline_words(m.roofline)
        return text + (" SIMULATED" if m.simulated else "")


def roofline_words(roofline: Roofline) -> str:
    """'612.3 TFLOP/s, 46.8% of the bf16 peak 1307.4 TFLOP/s (compute-bound)'."""
    return (
        f"{roofline.tflops:.1f} TFLOP/s, {roofline.compute_efficiency:.1%} of the "
        f"{roofline.math} peak {roofline.peak_flops_per_s / 1e12:.1f} TFLOP/s "
        f"({roofline.bound}-bound, {roofline.roofline_efficiency:.1%} of its roof)"
    )


def progress_line(test_id: str, result: BenchResult) -> str:
    """The -v line a measurement prints as it completes: 'gpuperf: measured <test> [name,
    cold]: 145.66 us, 82.7% of peak (29 samples, 0.35 s)', with its TFLOP/s where it
    declared work and its ratio to base's time where it was paired."""
    m = result.measurement
    assert m is not None
    compared = ""
    if result.comparison is not None:
        compared = f", {result.comparison.ratio:.4f}x base's time"
    work = ""
    if m.roofline is not None:
        work = f", {roofline_words(m.roofline)}"
    return (
        f"gpuperf: measured {test_id} [{m.name}, {m.cache}]: {m.time_s * 1e6:.2f} us, "
        f"{m.efficiency:.1%} of peak{work}{compared} ({len(m.samples_s)} samples, "
        f"{m.wall_s:.2f} s)"
    )
