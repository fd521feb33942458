"""GPU clocks, temperature, power and throttling, read around a measurement.

A kernel timed while the GPU is power- or thermally capped is slower for reasons that have
nothing to do with the kernel, so every measurement carries the clocks read before and after
sampling and a `throttled` flag. Sources, all optional: NVML (`pynvml`, from nvidia-ml-py) for
CUDA devices, amdsmi for AMD devices, and the simulated device's own `read_clocks()`. When
nothing can be read the answer is None, never an error: clocks are evidence, not a gate.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pytest_gpuperf.runtime.info import ClockReport

# A clock below this fraction of its maximum while the GPU is busy counts as throttled even
# when the driver names no reason (the reasons are not reported on every board).
THROTTLE_CLOCK_FRACTION = 0.9

# NVML "clocks event" (formerly "throttle") reason bits that mean a cap held the clock down.
# Idle (0x1), application clocks (0x2), sync boost (0x10) and display clock (0x100) are not
# throttling; idle also means the clock reading says nothing about the kernel.
NVML_IDLE = 0x1
NVML_CAP_REASONS = {
    0x4: "sw-power-cap",
    0x8: "hw-slowdown",
    0x20: "sw-thermal-slowdown",
    0x40: "hw-thermal-slowdown",
    0x80: "hw-power-brake",
}


def is_throttled(
    clock_mhz: float | None,
    clock_max_mhz: float | None,
    cap_reasons: tuple[str, ...],
    *,
    busy: bool = True,
) -> bool:
    """True when a cap reason is active, or a busy GPU runs below 90% of its max clock."""
    if cap_reasons:
        return True
    if not busy or not clock_mhz or not clock_max_mhz:
        return False
    return clock_mhz < THROTTLE_CLOCK_FRACTION * clock_max_mhz


def nvml_cap_reasons(mask: int) -> tuple[str, ...]:
    """Names of the capping reasons set in an NVML clocks-event bit mask."""
    return tuple(name for bit, name in NVML_CAP_REASONS.items() if mask & bit)


def merge(before: ClockReport | None, after: ClockReport | None) -> ClockReport | None:
    """One report for a measurement: the later readings, throttled if either reading was.

    The lower of the two SM clocks is kept: a throttle at the start matters as much as one
    at the end.
    """
    if before is None or after is None:
        return after or before
    clocks = [c for c in (before.sm_clock_mhz, after.sm_clock_mhz) if c is not None]
    reasons = tuple(dict.fromkeys(before.throttle_reasons + after.throttle_reasons))
    return replace(
        after,
        sm_clock_mhz=min(clocks) if clocks else None,
        throttled=before.throttled or after.throttled,
        throttle_reasons=reasons,
    )


def read_clocks(backend: Any) -> ClockReport | None:
    """The device's clocks now, from the best source for its backend; None if none works."""
    own = getattr(backend, "read_clocks", None)
    if callable(own):  # the simulated device models its own clocks
        return own()
    info = backend.info
    if info.backend == "cuda":
        return _read_nvml(info.pci_bus_id, info.index)
    if info.backend == "hip":
        return _read_amdsmi(info.pci_bus_id, info.index)
    return None


def _bus_key(bus_id: str | bytes | None) -> tuple[int, ...] | None:
    """PCI bus id as (domain, bus, device, function), so "0000:19:00.0" (CUDA, HIP) matches
    NVML's "00000000:19:00.0"."""
    if not bus_id:
        return None
    text = bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id)
    try:
        domain, bus, rest = text.strip().lower().split(":")
        device, function = rest.split(".")
        return (int(domain, 16), int(bus, 16), int(device, 16), int(function, 16))
    except ValueError:
        return None


def _optional(call: Any, *args: Any) -> Any:
    """One vendor query; a sensor the board does not expose gives None, not an error."""
    try:
        return call(*args)
    except Exception:
        return None


# -- NVML ------------------------------------------------------------------------------


def _initialised_once(module: str, init: str) -> Callable[[], Any]:
    """The reader of `module` (pynvml, amdsmi) with its `init` called once per process
    (nvmlInit costs tens of ms): the module, or None if it is missing or will not start."""

    @functools.lru_cache(maxsize=1)
    def initialised() -> Any:
        try:
            loaded = importlib.import_module(module)
            getattr(loaded, init)()
        except Exception:
            return None
        return loaded

    return initialised


def _device_handle(
    library: Callable[[], Any],
    find: Callable[[Any, str | None, int], Any],
    pci_bus_id: str | None,
    index: int,
) -> tuple[Any, Any] | None:
    """The started vendor library (`_nvml`, `_amdsmi`) and the device's handle in it, found
    by `find`; None when the library is missing or does not find the device."""
    module = library()
    if module is None:
        return None
    handle = _optional(find, module, pci_bus_id, index)
    return None if handle is None else (module, handle)


_nvml = _initialised_once("pynvml", "nvmlInit")


def _nvml_handle(pynvml: Any, pci_bus_id: str | None, index: int) -> Any:
    wanted = _bus_key(pci_bus_id)
    if wanted is None:
        # Without a bus id the runtime's index is the best guess (CUDA_VISIBLE_DEVICES may
        # renumber devices, which is why the bus id is preferred).
        return pynvml.nvmlDeviceGetHandleByIndex(index)
    for position in range(pynvml.nvmlDeviceGetCount()):
        handle = pynvml.nvmlDeviceGetHandleByIndex(position)
        if _bus_key(pynvml.nvmlDeviceGetPciInfo(handle).busId) == wanted:
            return handle
    return None


def _read_nvml(pci_bus_id: str | None, index: int) -> ClockReport | None:
    opened = _device_handle(_nvml, _nvml_handle, pci_bus_id, index)
    if opened is None:
        return None
    pynvml, handle = opened
    sm_mhz = _optional(pynvml.nvmlDeviceGetClockInfo, handle, pynvml.NVML_CLOCK_SM)
    sm_max_mhz = _optional(pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_SM)
    memory_mhz = _optional(pynvml.nvmlDeviceGetClockInfo, handle, pynvml.NVML_CLOCK_MEM)
    temperature_c = _optional(pynvml.nvmlDeviceGetTemperature, handle, pynvml.NVML_TEMPERATURE_GPU)
    power_mw = _optional(pynvml.nvmlDeviceGetPowerUsage, handle)
    reasons_call = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )
    mask = _optional(reasons_call, handle) if reasons_call else None
    reasons = nvml_cap_reasons(mask) if mask is not None else ()
    busy = mask is None or not mask & NVML_IDLE
    return ClockReport(
        sm_clock_mhz=_float(sm_mhz),
        sm_clock_max_mhz=_float(sm_max_mhz),
        memory_clock_mhz=_float(memory_mhz),
        temperature_c=_float(temperature_c),
        power_w=power_mw / 1000.0 if power_mw is not None else None,
        throttled=is_throttled(_float(sm_mhz), _float(sm_max_mhz), reasons, busy=busy),
        throttle_reasons=reasons,
        source="nvml",
    )


# -- amdsmi ----------------------------------------------------------------------------


_amdsmi = _initialised_once("amdsmi", "amdsmi_init")


def _amdsmi_handle(amdsmi: Any, pci_bus_id: str | None, index: int) -> Any:
    handles = amdsmi.amdsmi_get_processor_handles()
    wanted = _bus_key(pci_bus_id)
    if wanted is None:
        return handles[index] if index < len(handles) else None
    for handle in handles:
        if _bus_key(_optional(amdsmi.amdsmi_get_gpu_device_bdf, handle)) == wanted:
            return handle
    return None


def _amd_clock(amdsmi: Any, handle: Any, kind: str) -> tuple[float | None, float | None]:
    """(current, max) MHz of one clock; amdsmi renamed "cur_clk" to "clk" across versions."""
    info = _optional(amdsmi.amdsmi_get_clock_info, handle, getattr(amdsmi.AmdSmiClkType, kind))
    if not isinstance(info, dict):
        return None, None
    return _float(info.get("clk", info.get("cur_clk"))), _float(info.get("max_clk"))


def _read_amdsmi(pci_bus_id: str | None, index: int) -> ClockReport | None:
    opened = _device_handle(_amdsmi, _amdsmi_handle, pci_bus_id, index)
    if opened is None:
        return None
    amdsmi, handle = opened
    gfx_mhz, gfx_max_mhz = _amd_clock(amdsmi, handle, "GFX")
    memory_mhz, _ = _amd_clock(amdsmi, handle, "MEM")
    temperature_type = amdsmi.AmdSmiTemperatureType
    sensor = getattr(temperature_type, "HOTSPOT", None) or temperature_type.JUNCTION
    temperature_c = _optional(
        amdsmi.amdsmi_get_temp_metric, handle, sensor, amdsmi.AmdSmiTemperatureMetric.CURRENT
    )
    power = _optional(amdsmi.amdsmi_get_power_info, handle) or {}
    readings = (_float(power.get(key)) for key in ("current_socket_power", "average_socket_power"))
    power_w = next((watts for watts in readings if watts is not None), None)
    metrics = _optional(amdsmi.amdsmi_get_gpu_metrics_info, handle) or {}
    status = _float(metrics.get("indep_throttle_status", metrics.get("throttle_status")))
    reasons = (f"throttle-status-{int(status):#x}",) if status else ()
    return ClockReport(
        sm_clock_mhz=gfx_mhz,
        sm_clock_max_mhz=gfx_max_mhz,
        memory_clock_mhz=memory_mhz,
        temperature_c=_float(temperature_c),
        power_w=power_w,
        throttled=is_throttled(gfx_mhz, gfx_max_mhz, reasons),
        throttle_reasons=reasons,
        source="amdsmi",
    )


def _float(value: Any) -> float | None:
    """A number from a vendor query; "N/A" and other non-numbers become None."""
    if isinstance(value, bool):
        return float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
