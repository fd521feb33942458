"""What a runtime reports about a device and a compiled kernel: plain frozen dataclasses.

Kept apart from base.py (which needs NumPy) so that results, reports and the pytest layer can
name these types without importing the runtime: loading the plugin stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class DeviceInfo:
    """What the runtime reports about the device (no datasheet figures: see devices.py)."""

    backend: str  # "hip" | "cuda" | "sim"
    index: int
    name: str  # "AMD Instinct MI300X", "NVIDIA H100 80GB HBM3"
    arch: str  # "gfx942", "sm_90"
    compute_units: int  # CUs on AMD, SMs on NVIDIA
    l2_bytes: int
    memory_bytes: int
    warp_size: int
    max_threads_per_block: int
    shared_bytes_per_block: int
    clock_khz: int | None = None
    memory_clock_khz: int | None = None
    memory_bus_bits: int | None = None
    pci_bus_id: str | None = None
    uuid: str | None = (
        None  # "GPU-..." as nvidia-smi / rocm-smi show it, where the runtime gives one
    )
    runtime_version: str = ""
    driver_version: str = ""
    simulated: bool = False

    @property
    def reported_peak_bps(self) -> float | None:
        """Peak bandwidth from memory clock x bus width (x2 for DDR), when both are known.

        Only a fallback for unknown devices: on AMD HBM3 the reported memory clock times the
        bus width does not give the datasheet figure, so devices.py prefers its table.
        """
        if not self.memory_clock_khz or not self.memory_bus_bits:
            return None
        return 2.0 * self.memory_clock_khz * 1e3 * self.memory_bus_bits / 8


@dataclass(frozen=True)
class KernelResources:
    """The static resource report of one compiled kernel.

    `registers` is VGPRs per thread on AMD (arch VGPRs + AGPRs) and registers per thread on
    NVIDIA; `sgprs` exists on AMD only. Occupancy is a fraction of the maximum resident
    wavefronts/warps per CU/SM for `block_threads`, with the resource that limits it.
    """

    registers: int | None = None
    sgprs: int | None = None
    shared_bytes: int = 0
    scratch_bytes: int = 0
    spill_count: int | None = None
    max_threads_per_block: int | None = None
    block_threads: int | None = None
    occupancy: float | None = None
    occupancy_limiter: str | None = None
    waves_per_simd: int | None = None
    blocks_per_cu: int | None = None

    def summary(self) -> str:
        """One short line for reports: "32 VGPR, 0 B LDS, occ 100% (waves)"."""
        parts = []
        if self.registers is not None:
            parts.append(f"{self.registers} regs")
        if self.sgprs is not None:
            parts.append(f"{self.sgprs} sgprs")
        parts.append(f"{self.shared_bytes} B shared")
        if self.scratch_bytes:
            parts.append(f"{self.scratch_bytes} B scratch")
        if self.occupancy is not None:
            parts.append(occupancy_words(self.occupancy, self.occupancy_limiter))
        return ", ".join(parts)


def occupancy_words(
    occupancy: float, limiter: str | None, *, block_threads: int | None = None
) -> str:
    """One kernel's occupancy as the resource lines of reports and explain show it, in one
    place: "occupancy 62% at 256 threads (registers)" (the block size where a line has it)."""
    at = f" at {block_threads} threads" if block_threads is not None else ""
    limited = f" ({limiter})" if limiter else ""
    return f"occupancy {occupancy:.0%}{at}{limited}"


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


class _Informed(Protocol):
    @property
    def info(self) -> DeviceInfo: ...


class ReadsBackend:
    """What a holder of an opened backend (the API's Device, the session's OpenDevice) reads
    through it: the device's facts and whether it is the simulated device. (The backend is
    typed by what is read here: this module does not import base.py.)"""

    backend: _Informed

    @property
    def info(self) -> DeviceInfo:
        return self.backend.info

    @property
    def simulated(self) -> bool:
        return self.backend.info.simulated
