"""Clock readings and the throttle flag, with fake NVML / amdsmi modules (no GPU needed)."""

from __future__ import annotations

import types
from dataclasses import dataclass

import pytest

from pytest_gpuperf.engine import clocks
from pytest_gpuperf.runtime.info import ClockReport


@pytest.fixture(autouse=True)
def _fresh_vendor_libraries():
    """The vendor modules are initialised once per process; each test starts afresh."""
    clocks._nvml.cache_clear()
    clocks._amdsmi.cache_clear()
    yield
    clocks._nvml.cache_clear()
    clocks._amdsmi.cache_clear()


@dataclass
class _Info:
    backend: str
    index: int = 0
    pci_bus_id: str | None = "0000:19:00.0"


class _Backend:
    def __init__(self, info: _Info) -> None:
        self.info = info


def _fake_nvml(*, sm_mhz=1980, max_mhz=1980, mask=0, bus_ids=("00000000:19:00.0",), fail=()):
    """A pynvml stand-in with the calls clocks.py makes; `fail` names calls that raise."""
    module = types.ModuleType("pynvml")
    module.NVML_CLOCK_SM, module.NVML_CLOCK_MEM, module.NVML_TEMPERATURE_GPU = 1, 2, 0

    def maybe_fail(name):
        if name in fail:
            raise RuntimeError(f"{name} not supported")

    module.nvmlInit = lambda: maybe_fail("init")
    module.nvmlDeviceGetCount = lambda: len(bus_ids)
    module.nvmlDeviceGetHandleByIndex = lambda index: index
    module.nvmlDeviceGetPciInfo = lambda handle: types.SimpleNamespace(
        busId=bus_ids[handle].encode()
    )

    def clock(handle, kind):
        maybe_fail("clock")
        return sm_mhz if kind == 1 else 2619

    module.nvmlDeviceGetClockInfo = clock
    module.nvmlDeviceGetMaxClockInfo = lambda handle, kind: max_mhz
    module.nvmlDeviceGetTemperature = lambda handle, sensor: 61
    module.nvmlDeviceGetPowerUsage = lambda handle: 412_000

    def reasons(handle):
        maybe_fail("reasons")
        return mask

    module.nvmlDeviceGetCurrentClocksEventReasons = reasons
    return module


def _read_cuda(monkeypatch, module, bus_id="0000:19:00.0"):
    monkeypatch.setitem(__import__("sys").modules, "pynvml", module)
    return clocks.read_clocks(_Backend(_Info("cuda", pci_bus_id=bus_id)))


def test_full_clocks_under_load_are_not_throttled(monkeypatch):
    report = _read_cuda(monkeypatch, _fake_nvml())
    assert report == ClockReport(
        sm_clock_mhz=1980.0,
        sm_clock_max_mhz=1980.0,
        memory_clock_mhz=2619.0,
        temperature_c=61.0,
        power_w=412.0,
        throttled=False,
        throttle_reasons=(),
        source="nvml",
    )


@pytest.mark.parametrize(
    ("mask", "reasons"),
    [
        (0x4, ("sw-power-cap",)),
        (0x40, ("hw-thermal-slowdown",)),
        (0x20 | 0x80, ("sw-thermal-slowdown", "hw-power-brake")),
        (0x8, ("hw-slowdown",)),
    ],
)
def test_a_cap_reason_flags_throttling_even_at_full_clock(monkeypatch, mask, reasons):
    report = _read_cuda(monkeypatch, _fake_nvml(mask=mask))
    assert report.throttled
    assert report.throttle_reasons == reasons


def test_a_low_clock_under_load_is_throttled_without_a_reason(monkeypatch):
    assert _read_cuda(monkeypatch, _fake_nvml(sm_mhz=1700, max_mhz=1980)).throttled  # 86%
    clocks._nvml.cache_clear()
    assert not _read_cuda(monkeypatch, _fake_nvml(sm_mhz=1800, max_mhz=1980)).throttled  # 91%


def test_an_idle_gpu_at_low_clock_is_not_throttled(monkeypatch):
    # Idle (0x1) and application clocks (0x2) are not caps; the clock says nothing then.
    report = _read_cuda(monkeypatch, _fake_nvml(sm_mhz=345, mask=0x1 | 0x2))
    assert not report.throttled
    assert report.throttle_reasons == ()


def test_the_device_is_found_by_pci_bus_id_not_by_index(monkeypatch):
    module = _fake_nvml(bus_ids=("00000000:05:00.0", "00000000:19:00.0"))
    seen = []
    original = module.nvmlDeviceGetClockInfo
    module.nvmlDeviceGetClockInfo = lambda handle, kind: (
        seen.append(handle) or original(handle, kind)
    )
    assert _read_cuda(monkeypatch, module, bus_id="0000:19:00.0") is not None
    assert set(seen) == {1}


def test_an_unknown_bus_id_or_missing_nvml_gives_none(monkeypatch):
    assert _read_cuda(monkeypatch, _fake_nvml(), bus_id="0000:aa:00.0") is None
    clocks._nvml.cache_clear()
    assert _read_cuda(monkeypatch, _fake_nvml(fail=("init",))) is None
    clocks._nvml.cache_clear()
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)  # import fails
    assert clocks.read_clocks(_Backend(_Info("cuda"))) is None


def test_a_missing_sensor_leaves_a_partial_report(monkeypatch):
    report = _read_cuda(monkeypatch, _fake_nvml(fail=("clock", "reasons")))
    assert report.sm_clock_mhz is None
    assert report.temperature_c == 61.0
    assert not report.throttled


def _fake_amdsmi(*, gfx_mhz=2100, max_mhz=2100, throttle_status=0, key="clk"):
    module = types.ModuleType("amdsmi")
    module.AmdSmiClkType = types.SimpleNamespace(GFX="gfx", MEM="mem")
    module.AmdSmiTemperatureType = types.SimpleNamespace(HOTSPOT="hotspot")
    module.AmdSmiTemperatureMetric = types.SimpleNamespace(CURRENT="current")
    module.amdsmi_init = lambda *flags: None
    module.amdsmi_get_processor_handles = lambda: ["gpu0", "gpu1"]
    module.amdsmi_get_gpu_device_bdf = {"gpu0": "0000:05:00.0", "gpu1": "0000:19:00.0"}.get
    module.amdsmi_get_clock_info = lambda handle, kind: (
        {key: gfx_mhz, "max_clk": max_mhz} if kind == "gfx" else {key: 1300, "max_clk": 1300}
    )
    module.amdsmi_get_temp_metric = lambda handle, sensor, metric: 70
    module.amdsmi_get_power_info = lambda handle: {
        "current_socket_power": "N/A",
        "average_socket_power": 650,
    }
    module.amdsmi_get_gpu_metrics_info = lambda handle: {"throttle_status": throttle_status}
    return module


def _read_hip(monkeypatch, module):
    monkeypatch.setitem(__import__("sys").modules, "amdsmi", module)
    return clocks.read_clocks(_Backend(_Info("hip")))


@pytest.mark.parametrize("key", ["clk", "cur_clk"])  # amdsmi renamed the field
def test_amdsmi_readings(monkeypatch, key):
    report = _read_hip(monkeypatch, _fake_amdsmi(key=key))
    assert report.source == "amdsmi"
    assert (report.sm_clock_mhz, report.memory_clock_mhz) == (2100.0, 1300.0)
    assert (report.temperature_c, report.power_w) == (70.0, 650.0)
    assert not report.throttled


def test_amdsmi_throttle_status_or_low_clock_flags_throttling(monkeypatch):
    assert _read_hip(monkeypatch, _fake_amdsmi(throttle_status=0x2)).throttled
    clocks._amdsmi.cache_clear()
    assert _read_hip(monkeypatch, _fake_amdsmi(gfx_mhz=1500)).throttled


def test_a_backend_with_its_own_clocks_is_asked_directly():
    own = ClockReport(sm_clock_mhz=2100.0, throttled=True, source="sim")
    backend = types.SimpleNamespace(read_clocks=lambda: own, info=None)
    assert clocks.read_clocks(backend) is own


def test_other_backends_have_no_clocks():
    assert clocks.read_clocks(_Backend(_Info("opencl"))) is None


def test_merge_is_throttled_when_either_reading_was():
    before = ClockReport(sm_clock_mhz=1500.0, throttled=True, throttle_reasons=("x",))
    after = ClockReport(sm_clock_mhz=1980.0, temperature_c=70.0, source="nvml")
    merged = clocks.merge(before, after)
    assert merged.throttled and merged.throttle_reasons == ("x",)
    assert merged.sm_clock_mhz == 1500.0  # the worse of the two
    assert merged.temperature_c == 70.0
    assert clocks.merge(None, after) is after
    assert clocks.merge(before, None) is before
    assert clocks.merge(None, None) is None
