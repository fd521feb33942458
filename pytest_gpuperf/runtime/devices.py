"""Known devices: datasheet peak bandwidth, cache sizes and the key baselines are filed under.

Efficiency is declared bytes / time / peak bandwidth, so the peak must be the datasheet figure
(5.3 TB/s for MI300X, AMD's data sheet and the figure of merit in "Making memory bound kernels
go brr on a MI300X"), not what the runtime reports: on AMD HBM3
the reported memory clock x bus width gives about half the datasheet peak. `match_device`
identifies the device from what the runtime reports (arch, name, compute units, memory) and
falls back, with a warning, to a spec derived from the report for devices not in the table.
Every entry cites its source (a data sheet, a vendor guide, or a measurement).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.runtime.info import DeviceInfo

KiB, MiB, GiB = 2**10, 2**20, 2**30
AMD, NVIDIA = "amd", "nvidia"


@dataclass(frozen=True)
class DeviceSpec:
    """One device model: what a measurement needs to turn a time into an efficiency.

    `l2_bytes` is the TOTAL L2 (MI300X: 8 XCDs x 4 MB); `llc_bytes` a last-level cache
    behind it (MI300X's 256 MB Infinity Cache), 0 where there is none. `name_tokens` are
    the words (whole-word, case-insensitive) that identify the device in the runtime's name.
    """

    key: str
    name: str
    vendor: str  # "amd" | "nvidia"
    arch: str  # "gfx942", "sm_90"
    compute_units: int  # CUs on AMD (per GCD for MI200), SMs on NVIDIA
    l2_bytes: int
    llc_bytes: int
    peak_bps: float
    memory_bytes: int  # nominal capacity; runtimes report slightly less
    warp_size: int
    source: str
    name_tokens: tuple[str, ...] = ()
    clock_mhz: float | None = None  # peak engine clock
    memory_clock_mhz: float | None = None  # as the runtime reports it (hipDeviceProp/CUDA)
    memory_bus_bits: int | None = None

    @property
    def cache_bytes(self) -> int:
        """All cache a kernel's data can hide in: what a cold flush or rotation must beat."""
        return self.l2_bytes + self.llc_bytes


@dataclass(frozen=True)
class DeviceMatch:
    """The spec used for a device and how it was found.

    `how`: "table" (identified in KNOWN_DEVICES), "override" (a device key or peak given by
    the user), "reported" (not in the table: derived from the runtime's report, untrusted).
    """

    spec: DeviceSpec
    how: str
    warning: str | None = None


_DESIGN = "pytest-gpuperf device table"

# One row per device, in the order matching tries them. The vendor sets the warp size.
# key, vendor, arch, compute units, L2 MiB, LLC MiB, peak B/s, memory GiB, clock MHz,
# memory clock MHz, memory bus bits
_Row = tuple[str, str, str, int, int, int, float, int, float | None, float | None, int | None]
_ROWS: tuple[_Row, ...] = (
    ("mi300x", AMD, "gfx942", 304, 8 * 4, 256, 5.3e12, 192, 2100.0, 1300.0, 8192),
    ("mi325x", AMD, "gfx942", 304, 8 * 4, 256, 6.0e12, 256, 2100.0, None, None),
    ("mi300a", AMD, "gfx942", 228, 6 * 4, 256, 5.3e12, 128, 2100.0, None, None),
    ("mi250x", AMD, "gfx90a", 110, 8, 0, 1.6e12, 64, 1700.0, 1600.0, 4096),
    ("mi250", AMD, "gfx90a", 104, 8, 0, 1.6e12, 64, 1700.0, 1600.0, 4096),
    ("mi210", AMD, "gfx90a", 104, 8, 0, 1.6e12, 64, 1700.0, 1600.0, 4096),
    ("mi100", AMD, "gfx908", 120, 8, 0, 1.2288e12, 32, 1502.0, 1200.0, 4096),
    ("h100-sxm", NVIDIA, "sm_90", 132, 50, 0, 3.35e12, 80, 1980.0, 2619.0, 5120),
    ("h100-pcie", NVIDIA, "sm_90", 114, 50, 0, 2.0e12, 80, 1755.0, None, None),
    ("h100-nvl", NVIDIA, "sm_90", 132, 50, 0, 3.9e12, 94, 1785.0, None, None),
    ("h200", NVIDIA, "sm_90", 132, 50, 0, 4.8e12, 141, 1980.0, None, None),
    ("a100-sxm-80gb", NVIDIA, "sm_80", 108, 40, 0, 2.039e12, 80, 1410.0, 1593.0, 5120),
    ("a100-sxm-40gb", NVIDIA, "sm_80", 108, 40, 0, 1.555e12, 40, 1410.0, 1215.0, 5120),
    ("a100-pcie-80gb", NVIDIA, "sm_80", 108, 40, 0, 1.935e12, 80, 1410.0, None, None),
    ("a100-pcie-40gb", NVIDIA, "sm_80", 108, 40, 0, 1.555e12, 40, 1410.0, 1215.0, 5120),
    ("b200", NVIDIA, "sm_100", 148, 126, 0, 7.7e12, 180, None, None, None),
)

# key: (name, name tokens, source)
_IDENTITY: dict[str, tuple[str, tuple[str, ...], str]] = {
    "mi300x": (
        "AMD Instinct MI300X",
        ("MI300X",),
        f"{_DESIGN}; AMD Instinct MI300X data sheet; 'Making memory bound kernels go "
        "brr on a MI300X' (5.3 TB/s figure of merit, 4 MB L2 per XCD, 256 MB Infinity "
        "Cache) and the AMD Triton Performance Optimization Guide",
    ),
    "mi325x": (
        "AMD Instinct MI325X",
        ("MI325X", "MI325"),
        f"{_DESIGN}; AMD Instinct MI325X data sheet (256 GB HBM3E, 6 TB/s)",
    ),
    "mi300a": (
        "AMD Instinct MI300A",
        ("MI300A",),
        "AMD Instinct MI300A data sheet (228 CUs on 6 XCDs, 128 GB unified HBM3, "
        "5.3 TB/s, 256 MB Infinity Cache); L2 = 6 x 4 MB as on MI300X",
    ),
    "mi250x": (
        "AMD Instinct MI250X (one GCD)",
        ("MI250X",),
        f"{_DESIGN} (per GCD); AMD Instinct MI250X data sheet: 220 CUs, 128 GB "
        "HBM2e, 3.2 TB/s for both GCDs; each GCD is one HIP device",
    ),
    "mi250": (
        "AMD Instinct MI250 (one GCD)",
        ("MI250",),
        "AMD Instinct MI250 data sheet: 2 x 104 CUs, 128 GB HBM2e, 3.2 TB/s for both "
        "GCDs; each GCD is one HIP device",
    ),
    "mi210": (
        "AMD Instinct MI210",
        ("MI210",),
        "AMD Instinct MI210 data sheet: 104 CUs, 64 GB HBM2e (4096-bit), 1.6 TB/s",
    ),
    "mi100": (
        "AMD Instinct MI100",
        ("MI100",),
        "AMD Instinct MI100 data sheet: 120 CUs, 32 GB HBM2 (4096-bit), 1.23 TB/s",
    ),
    "h100-sxm": (
        "NVIDIA H100 SXM 80GB",
        ("H100", "H100 SXM", "H100 80GB HBM3"),
        f"{_DESIGN}; NVIDIA H100 data sheet (SXM5: 132 SMs, 80 GB HBM3, 3.35 TB/s, "
        "50 MB L2); the project's H100 reported 3.352 TB/s (2619 MHz x 5120 bits)",
    ),
    "h100-pcie": (
        "NVIDIA H100 PCIe 80GB",
        ("H100", "H100 PCIe"),
        "NVIDIA H100 data sheet (PCIe: 114 SMs, 80 GB HBM2e, 2.0 TB/s, 50 MB L2)",
    ),
    "h100-nvl": (
        "NVIDIA H100 NVL",
        ("H100", "H100 NVL"),
        "NVIDIA H100 NVL data sheet (132 SMs, 94 GB HBM3, 3.9 TB/s)",
    ),
    "h200": (
        "NVIDIA H200",
        ("H200",),
        f"{_DESIGN} (50 MB L2; PyTorch reports 60); NVIDIA H200 data sheet "
        "(141 GB HBM3e, 4.8 TB/s)",
    ),
    "a100-sxm-80gb": (
        "NVIDIA A100 SXM4 80GB",
        ("A100", "A100-SXM4-80GB", "A100 SXM4 80GB"),
        "NVIDIA A100 data sheet (SXM4 80GB: 108 SMs, 2,039 GB/s, 40 MB L2)",
    ),
    "a100-sxm-40gb": (
        "NVIDIA A100 SXM4 40GB",
        ("A100", "A100-SXM4-40GB", "A100 SXM4 40GB"),
        "NVIDIA A100 data sheet (SXM4 40GB: 108 SMs, 1,555 GB/s, 40 MB L2)",
    ),
    "a100-pcie-80gb": (
        "NVIDIA A100 PCIe 80GB",
        ("A100", "A100 80GB PCIe", "A100-PCIE-80GB", "A100 PCIe 80GB"),
        "NVIDIA A100 data sheet (PCIe 80GB: 108 SMs, HBM2e, 1,935 GB/s, 40 MB L2)",
    ),
    "a100-pcie-40gb": (
        "NVIDIA A100 PCIe 40GB",
        ("A100", "A100-PCIE-40GB", "A100 PCIe 40GB"),
        "NVIDIA A100 data sheet (PCIe 40GB: 108 SMs, 1,555 GB/s, 40 MB L2)",
    ),
    "b200": (
        "NVIDIA B200",
        ("B200",),
        "NVIDIA HGX B200 specifications (one Blackwell GPU: 180 GB HBM3E, 7.7 TB/s); 148 SMs "
        "and 126 MB of L2 as Chips and Cheese's 'Nvidia's B200: Keeping the CUDA Juggernaut "
        "Rolling' reports them (the runtime's larger L2, if it reports one, sizes the flush)",
    ),
}

_WARP_SIZE = {AMD: 64, NVIDIA: 32}

KNOWN_DEVICES: dict[str, DeviceSpec] = {
    key: DeviceSpec(
        key=key,
        name=_IDENTITY[key][0],
        vendor=vendor,
        arch=arch,
        compute_units=compute_units,
        l2_bytes=l2_mib * MiB,
        llc_bytes=llc_mib * MiB,
        peak_bps=peak_bps,
        memory_bytes=memory_gib * GiB,
        warp_size=_WARP_SIZE[vendor],
        source=_IDENTITY[key][2],
        name_tokens=_IDENTITY[key][1],
        clock_mhz=clock_mhz,
        memory_clock_mhz=memory_clock_mhz,
        memory_bus_bits=memory_bus_bits,
    )
    for (
        key,
        vendor,
        arch,
        compute_units,
        l2_mib,
        llc_mib,
        peak_bps,
        memory_gib,
        clock_mhz,
        memory_clock_mhz,
        memory_bus_bits,
    ) in _ROWS
}

# A device's reported memory is its nominal capacity less what the driver reserves; this
# window tells e.g. an MI300X (192 GB) from an MI325X (256 GB) when the name does not.
_MEMORY_WINDOW = (0.85, 1.05)


def get_device(key: str) -> DeviceSpec:
    """The spec for a device key; `ConfigError` listing the known keys otherwise."""
    try:
        return KNOWN_DEVICES[key]
    except KeyError:
        raise ConfigError(
            f"unknown device key {key!r}; known keys: {', '.join(KNOWN_DEVICES)}"
        ) from None


def normalize_arch(arch: str) -> str:
    """The base arch: target features and arch-specific suffixes do not change the device.

    "gfx942:sramecc+:xnack-" -> "gfx942", "sm_90a" -> "sm_90".
    """
    base = arch.strip().lower().split(":", 1)[0]
    return re.sub(r"^(sm_\d+)[a-z]$", r"\1", base)


def vendor_of(info: DeviceInfo) -> str | None:
    """The vendor ("amd" | "nvidia") from the arch (gfx*, sm_*), else from the backend name."""
    arch = normalize_arch(info.arch)
    if arch.startswith("gfx"):
        return AMD
    if arch.startswith(("sm_", "compute_")):
        return NVIDIA
    return {"hip": AMD, "cuda": NVIDIA}.get(info.backend)


def _name_score(spec: DeviceSpec, name: str) -> int:
    """Length of the longest name token found as whole words (0: none): "H100 NVL" beats
    "H100", and "H200" is not found in "GH200"."""
    best = 0
    for token in spec.name_tokens:
        pattern = r"(?<![A-Za-z0-9])" + re.escape(token) + r"(?![A-Za-z0-9])"
        if re.search(pattern, name, re.IGNORECASE):
            best = max(best, len(token))
    return best


def _memory_fits(spec: DeviceSpec, info: DeviceInfo) -> bool:
    low, high = _MEMORY_WINDOW
    return low * spec.memory_bytes <= info.memory_bytes <= high * spec.memory_bytes


def _from_table(info: DeviceInfo, vendor: str | None) -> tuple[DeviceSpec | None, list[DeviceSpec]]:
    """The table entry whose arch and compute units agree and whose name token the reported
    name contains (memory size breaks ties), plus the arch/CU look-alikes when none does.

    A name is required: arch + CU count alone would take a GH200 (132 SMs, 96 GB) for an
    H100 NVL, and a wrong datasheet peak is worse than an acknowledged unknown.
    """
    arch = normalize_arch(info.arch)
    candidates = [
        spec
        for spec in KNOWN_DEVICES.values()
        if spec.arch == arch
        and spec.compute_units == info.compute_units
        and (vendor is None or spec.vendor == vendor)
    ]
    scored = [(score, spec) for spec in candidates if (score := _name_score(spec, info.name))]
    if not scored:
        return None, candidates
    top = max(score for score, _ in scored)
    best = [spec for score, spec in scored if score == top]
    if len(best) > 1:
        best = [spec for spec in best if _memory_fits(spec, info)] or best
    return best[0], []


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _derived_spec(info: DeviceInfo, vendor: str | None, peak_bps: float) -> DeviceSpec:
    arch = normalize_arch(info.arch)
    return DeviceSpec(
        key=_slug(info.name) or f"{arch}-{info.compute_units}cu",
        name=info.name or f"unknown {arch} device",
        vendor=vendor or "unknown",
        arch=arch,
        compute_units=info.compute_units,
        l2_bytes=info.l2_bytes,
        llc_bytes=0,
        peak_bps=peak_bps,
        memory_bytes=info.memory_bytes,
        warp_size=info.warp_size,
        source=f"derived from the {info.backend} runtime's device report (not in the device table)",
    )


def _describe(info: DeviceInfo) -> str:
    return f"{info.name!r} ({normalize_arch(info.arch)}, {info.compute_units} compute units)"


def _keys_for(vendor: str | None) -> str:
    return ", ".join(k for k, s in KNOWN_DEVICES.items() if vendor in (None, s.vendor))


def match_device(
    info: DeviceInfo, *, key: str | None = None, peak_bps: float | None = None
) -> DeviceMatch:
    """The spec to measure `info`'s device against.

    An explicit `key` picks a table entry (it must be the same vendor); otherwise the table
    is searched by arch + compute units + name (memory size breaks ties). A device not in
    the table gets a spec derived from the report, with a warning: its peak comes from the
    reported memory clock x bus width, which is not trustworthy (on AMD HBM3 it is about
    half the datasheet figure). `peak_bps` always wins over any table or derived peak.
    """
    if peak_bps is not None and not (math.isfinite(peak_bps) and peak_bps > 0):
        raise ConfigError(
            f"peak bandwidth override must be a positive number of bytes/s, got {peak_bps!r}"
        )
    vendor = vendor_of(info)
    if key is not None:
        spec, warning = _by_key(info, vendor, key)
        how = "override"
    else:
        found, look_alikes = _from_table(info, vendor)
        if found is not None:
            spec, how, warning = found, "table", None
        else:
            spec, how, warning = _unknown(info, vendor, peak_bps, look_alikes)
    if peak_bps is not None and spec.peak_bps != peak_bps:
        spec = replace(
            spec, peak_bps=peak_bps, source=f"{spec.source}; peak bandwidth given by the user"
        )
    if peak_bps is not None:
        how = "override"
    return DeviceMatch(spec=spec, how=how, warning=warning)


def _by_key(info: DeviceInfo, vendor: str | None, key: str) -> tuple[DeviceSpec, str | None]:
    spec = get_device(key)
    if vendor is not None and spec.vendor != vendor:
        raise ConfigError(
            f"device key {key!r} is an {spec.vendor.upper()} device, but the runtime reports "
            f"the {vendor.upper()} device {_describe(info)}; choose one of: {_keys_for(vendor)}"
        )
    arch = normalize_arch(info.arch)
    if spec.arch != arch:
        return spec, (
            f"device key {key!r} is a {spec.arch} device but the runtime reports {arch}; "
            f"using {key!r}'s datasheet figures as asked"
        )
    return spec, None


def _unknown(
    info: DeviceInfo,
    vendor: str | None,
    peak_bps: float | None,
    look_alikes: list[DeviceSpec],
) -> tuple[DeviceSpec, str, str]:
    """A spec derived from the report for a device the table does not know, and the warning."""
    hint = ""
    if look_alikes:
        keys = ", ".join(repr(spec.key) for spec in look_alikes)
        hint = f" (arch and compute units match {keys}: pass that device key if it is one)"
    if peak_bps is not None:
        return (
            _derived_spec(info, vendor, peak_bps),
            "override",
            f"device {_describe(info)} is not in the device table{hint}; using the given peak "
            f"and the reported L2 ({info.l2_bytes / MiB:.0f} MiB) as its only cache, since "
            "runtimes do not report a last-level cache such as AMD's Infinity Cache",
        )
    reported = info.reported_peak_bps
    if reported is None:
        raise ConfigError(
            f"device {_describe(info)} is not in the device table{hint} and its runtime "
            "reports no memory clock and bus width, so no peak bandwidth can be derived; "
            "give one: a peak bandwidth override in bytes/s (e.g. 5.3e12) or a device key "
            f"({_keys_for(vendor)})"
        )
    return (
        _derived_spec(info, vendor, reported),
        "reported",
        f"device {_describe(info)} is not in the device table{hint}; its peak bandwidth "
        f"{reported / 1e12:.3f} TB/s is derived from the reported memory clock x bus width "
        "and is not trusted (on AMD HBM3 that product does not give the datasheet peak), so "
        "efficiencies may be off; pass a peak bandwidth override (bytes/s) or a device key "
        f"({_keys_for(vendor)})",
    )
