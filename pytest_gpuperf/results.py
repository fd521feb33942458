"""The values that flow from the measurement engine to verdicts and reports.

Frozen dataclasses with units in their names (STYLE.md). Efficiency is a fraction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_gpuperf.runtime.base import KernelResources

CACHE_MODES = ("cold", "hot", "rotate")


@dataclass(frozen=True)
class ClockReport:
    """GPU clocks and temperature read around a measurement (NVML / amdsmi / simulated)."""

    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    memory_clock_mhz: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    throttled: bool = False
    throttle_reasons: tuple[str, ...] = ()
    source: str = ""  # "nvml", "amdsmi", "sim", "" when nothing could be read


@dataclass(frozen=True)
class Measurement:
    """One named measurement of one kernel (or callable) in one cache mode.

    `time_s` is the median per-launch kernel time; `time_ci_s` the distribution-free
    confidence interval of that median. Efficiency = bytes_moved / time_s / peak_bps.
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
    stopped_by: str = ""  # "precision" | "budget" | "max_samples"
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
    extra: dict = field(default_factory=dict)

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


# Verdict statuses. FAIL fails the test; MARGINAL passes with a warning (undecided at the
# budget, decided on the median); the baseline outcome is reported alongside.
PASS, FAIL, MARGINAL = "pass", "fail", "marginal"
# Baseline outcomes.
NO_BASELINE, OTHER_DEVICE, WITHIN_NOISE, REGRESSED, IMPROVED = (
    "no-baseline",
    "other-device",
    "within-noise",
    "regressed",
    "improved",
)


@dataclass(frozen=True)
class BaselineRef:
    """The stored baseline a measurement was compared with (a view of one TOML table)."""

    efficiency: float
    efficiency_ci: tuple[float, float]
    run_spread: float  # relative run-to-run spread recorded with it (0.07 is +-7%)
    bandwidth_bps: float
    time_s: float
    cache: str
    source: str  # "measured" | "reported"
    provenance: str  # one line: when, commit, device, or the document it was reported in
    path: str


@dataclass(frozen=True)
class Verdict:
    """What the gate decided for one measurement, and the sentence that explains it.

    `reason` is the full, human message (measured vs expected, difference, noise allowance,
    cache mode, device, and how to update the baseline when it failed).
    """

    status: str  # PASS | FAIL | MARGINAL
    reason: str
    floor: float | None = None  # min_bw, as efficiency
    floor_status: str | None = None  # PASS | FAIL | MARGINAL | None (no floor)
    baseline_status: str = NO_BASELINE
    baseline: BaselineRef | None = None
    delta: float | None = None  # relative change of efficiency vs baseline (-0.05 = 5% slower)
    allowance: float | None = None  # relative drop tolerated before failing
    notes: tuple[str, ...] = ()  # e.g. "faster than baseline: consider --gpuperf-save"
