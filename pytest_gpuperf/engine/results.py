"""What the measurement engine hands up: one measurement, an A/B pair measured interleaved,
and the GPU they ran on.

Frozen dataclasses with units in their names; efficiency is a fraction. What the gate makes of
them (the verdict and its checks) is `pytest_gpuperf.record`'s vocabulary, one layer up: the
engine measures and never judges. `pytest_gpuperf.engine.plain` converts every class here to
plain data and back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pytest_gpuperf.engine.roofline import Roofline, Work, roofline_of
from pytest_gpuperf.engine.student_t import t_interval
from pytest_gpuperf.runtime.info import ClockReport, KernelResources

CACHE_MODES = ("cold", "hot", "rotate")
# Where an A/B pair's drift between module loads came from (PairedComparison.drift_basis,
# stats.nested_trimmed_mean; the gate's ComparisonCheck carries it on): measured from 3 or
# more loads, assumed (the gate's figure), or none.
DRIFT_MEASURED, DRIFT_ASSUMED, DRIFT_NONE = "measured", "assumed", "none"


@dataclass(frozen=True)
class GpuIdentity:
    """Which GPU produced a measurement: its index in this process's runtime (after the
    visible-device mask), its PCI bus id and UUID where the runtime gives them, and whether the
    run's probe found it degraded (slower than its peers by more than --gpuperf-gpu-margin)."""

    index: int
    pci_bus_id: str | None = None
    uuid: str | None = None
    degraded: bool = False
    probe_ratio: float | None = None  # its probe bandwidth / the median of its peers'

    def describe(self) -> str:
        """'GPU 1 (0000:07:00.0)', with 'DEGRADED' and the probe ratio when it is."""
        text = f"GPU {self.index}" + (f" ({self.pci_bus_id})" if self.pci_bus_id else "")
        if self.degraded:
            ratio = f", {self.probe_ratio:.3f}x its peers" if self.probe_ratio else ""
            text += f" [DEGRADED{ratio}]"
        return text


@dataclass(frozen=True)
class Measurement:
    """One named measurement of one kernel (or callable) in one cache mode.

    `time_s` is the median per-launch kernel time; `time_ci_s` the distribution-free
    confidence interval of that median. Efficiency = bytes_moved / time_s / peak_bps.
    `fingerprint` identifies the kernel's code object ("" for callables): two measurements
    with the same fingerprint ran byte-identical machine code. `work`, where the test
    declared FLOPs, puts it on the roofline (`roofline`: TFLOP/s, the roof that binds).
    """

    name: str
    kernel: str
    cache: str
    bytes_moved: int
    time_s: float
    time_ci_s: tuple[float, float]
    samples_s: tuple[float, ...]
    peak_bps: float
    device_key: str
    device_name: str
    backend: str
    simulated: bool
    queue_method: str  # how the device queue was kept ahead of the host for this mode
    warmup_count: int = 0
    stopped_by: str = ""  # "precision" | "budget" | "max_samples" | "decided" | "horizon"
    wall_s: float = 0.0
    rotation_copies: int = 0
    calibrated_efficiency: float | None = None
    reference_efficiency: float | None = None
    clocks: ClockReport | None = None
    resources: KernelResources | None = None
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    shared_bytes: int = 0
    outliers: int = 0
    fingerprint: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    gpu: GpuIdentity | None = None
    # Unix time (s) when the measurement's GPU work began and ended (warm-up included): on
    # one GPU no two measurements' intervals overlap, the GPU lock sees to that.
    started_s: float | None = None
    ended_s: float | None = None
    # The FLOPs the test declared (flops=, math=) and the device's peak for that type: None
    # for a measurement judged on bandwidth alone (engine/roofline.py).
    work: Work | None = None

    @property
    def roofline(self) -> Roofline | None:
        """Where the measurement stands against the roofline of its declared work (None
        when it declared none)."""
        if self.work is None:
            return None
        return roofline_of(self.work, self.bytes_moved, self.time_s, self.time_ci_s, self.peak_bps)

    @property
    def bandwidth_bps(self) -> float:
        return self.bytes_moved / self.time_s

    @property
    def efficiency(self) -> float:
        return self.bandwidth_bps / self.peak_bps

    @property
    def efficiency_ci(self) -> tuple[float, float]:
        """Efficiency interval: the slow end of the time interval gives the low end."""
        low_s, high_s = self.time_ci_s
        return (self.bytes_moved / high_s / self.peak_bps, self.bytes_moved / low_s / self.peak_bps)

    @property
    def relative_ci(self) -> float:
        """Half-width of the time interval relative to the median (0.005 is +-0.5%)."""
        low_s, high_s = self.time_ci_s
        return (high_s - low_s) / 2 / self.time_s


@dataclass(frozen=True)
class PairedComparison:
    """Head against base, measured interleaved in one run (measure.measure_pair).

    Each pair is one head and one base sample taken back to back, in random order, on the
    same buffers, on one of `loads` separately loaded modules per side (`pair_loads[i]` is
    pair i's). `ratio` is exp of the mean over loads of the 10%-trimmed mean of the pairs'
    log(head time / base time) (> 1: head is slower), `ratio_ci` its interval at
    `confidence`: log_ratio +- t(df) log_ratio_se, which carries the drift between loads
    as this run measured it (`drift`, +-95% per side's load; `drift_basis` "measured" with
    3 or more loads, "none" below). Load j ran on buffer set j % `buffer_sets`, so with a
    set per load the drift includes where the buffers landed. `within_se` is what the pairs
    alone would say.
    `median_ratio` is the median of the pair ratios, for reference. `head` and `base`
    summarise each side; their samples are in pair order.
    """

    head: Measurement
    base: Measurement
    ratio: float
    ratio_ci: tuple[float, float]
    pairs: int
    confidence: float = 0.95
    stopped_by: str = ""
    loads: int = 1
    pair_loads: tuple[int, ...] = ()
    log_ratio: float = 0.0
    log_ratio_se: float = 0.0
    df: float = 0.0
    within_se: float = 0.0
    drift: float = 0.0
    drift_basis: str = ""
    median_ratio: float | None = None
    # Load j ran on buffer set j % buffer_sets (set 0: the caller's buffers); fewer sets than
    # asked for, and why, in `buffer_sets_note` (a setup=, device memory).
    buffer_sets: int = 1
    buffer_sets_note: str = ""

    def ratio_ci_at(self, confidence: float) -> tuple[float, float]:
        """The interval at another `confidence` (a suite-wide false-alarm budget sets a
        per-test level): the same estimate and error, another t quantile."""
        low, high = t_interval(self.log_ratio, self.log_ratio_se, self.df, confidence)
        return math.exp(low), math.exp(high)
