"""The device table and matching a runtime's report to it (devices.py)."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.runtime.base import DeviceInfo
from pytest_gpuperf.runtime.devices import (
    KNOWN_DEVICES,
    GiB,
    MiB,
    get_device,
    match_device,
    normalize_arch,
)

# The names the runtimes report (hipDeviceProp_t.name / cuDeviceGetName) for each table entry.
REPORTED_NAMES = {
    "mi300x": "AMD Instinct MI300X",
    "mi325x": "AMD Instinct MI325X",
    "mi300a": "AMD Instinct MI300A",
    "mi250x": "AMD Instinct MI250X",
    "mi250": "AMD Instinct MI250",
    "mi210": "AMD Instinct MI210",
    "mi100": "AMD Instinct MI100",
    "h100-sxm": "NVIDIA H100 80GB HBM3",
    "h100-pcie": "NVIDIA H100 PCIe",
    "h100-nvl": "NVIDIA H100 NVL",
    "h200": "NVIDIA H200",
    "a100-sxm-80gb": "NVIDIA A100-SXM4-80GB",
    "a100-sxm-40gb": "NVIDIA A100-SXM4-40GB",
    "a100-pcie-80gb": "NVIDIA A100 80GB PCIe",
    "a100-pcie-40gb": "NVIDIA A100-PCIE-40GB",
    "b200": "NVIDIA B200",
}


def _info(
    name: str,
    arch: str,
    compute_units: int,
    memory_bytes: int = 80 * GiB,
    *,
    backend: str | None = None,
    memory_clock_khz: int | None = None,
    memory_bus_bits: int | None = None,
) -> DeviceInfo:
    amd = arch.startswith("gfx")
    return DeviceInfo(
        backend=backend or ("hip" if amd else "cuda"),
        index=0,
        name=name,
        arch=arch,
        compute_units=compute_units,
        l2_bytes=4 * MiB if amd else 50 * MiB,
        memory_bytes=memory_bytes,
        warp_size=64 if amd else 32,
        max_threads_per_block=1024,
        shared_bytes_per_block=65536,
        memory_clock_khz=memory_clock_khz,
        memory_bus_bits=memory_bus_bits,
    )


def _reported(key: str) -> DeviceInfo:
    """What a runtime reports for a table device: arch with target features, a little less
    memory than the nominal capacity."""
    spec = KNOWN_DEVICES[key]
    arch = f"{spec.arch}:sramecc+:xnack-" if spec.vendor == "amd" else spec.arch
    return _info(REPORTED_NAMES[key], arch, spec.compute_units, int(0.985 * spec.memory_bytes))


def test_every_table_device_has_a_reported_name_here():
    assert set(REPORTED_NAMES) == set(KNOWN_DEVICES)


@pytest.mark.parametrize("key", sorted(REPORTED_NAMES))
def test_every_table_device_is_matched_from_its_report(key):
    match = match_device(_reported(key))
    assert (match.spec.key, match.how, match.warning) == (key, "table", None)


@pytest.mark.parametrize("key", sorted(REPORTED_NAMES))
def test_the_simulated_name_matches_the_same_entry(key):
    info = dataclasses.replace(_reported(key), name=f"Simulated {KNOWN_DEVICES[key].name}")
    assert match_device(info).spec.key == key


@pytest.mark.parametrize(
    ("name", "arch", "compute_units", "memory_gib", "key"),
    [
        ("AMD Instinct MI300X", "gfx942", 304, 192, "mi300x"),
        ("AMD Instinct MI300X VF", "gfx942:sramecc+:xnack-", 304, 192, "mi300x"),
        ("AMD Instinct MI325", "gfx942", 304, 256, "mi325x"),
        ("AMD Instinct MI300A", "gfx942", 228, 128, "mi300a"),
        ("NVIDIA H100", "sm_90", 132, 80, "h100-sxm"),
        ("NVIDIA H100 PCIe", "sm_90", 114, 80, "h100-pcie"),
        ("NVIDIA H100", "sm_90", 114, 80, "h100-pcie"),  # the SM count tells them apart
        ("NVIDIA H100 NVL", "sm_90a", 132, 94, "h100-nvl"),
        ("NVIDIA H200", "sm_90", 132, 141, "h200"),
        ("NVIDIA H200 NVL", "sm_90", 132, 141, "h200"),
        ("NVIDIA A100 40GB", "sm_80", 108, 40, "a100-sxm-40gb"),  # memory breaks the tie
    ],
)
def test_matching_uses_arch_name_compute_units_and_memory(
    name, arch, compute_units, memory_gib, key
):
    info = _info(name, arch, compute_units, int(0.98 * memory_gib * GiB))
    assert match_device(info).spec.key == key


def test_design_table_figures():
    """The datasheet figures of the device table: arch, CUs/SMs, caches, peak bandwidth."""
    mi300x = get_device("mi300x")
    assert (mi300x.arch, mi300x.compute_units, mi300x.peak_bps) == ("gfx942", 304, 5.3e12)
    assert mi300x.l2_bytes == 8 * 4 * MiB and mi300x.llc_bytes == 256 * MiB
    assert mi300x.cache_bytes == 288 * MiB
    assert get_device("mi325x").peak_bps == 6.0e12
    assert (get_device("mi250x").compute_units, get_device("mi250x").peak_bps) == (110, 1.6e12)
    assert get_device("mi250x").cache_bytes == 8 * MiB
    h100 = get_device("h100-sxm")
    assert (h100.arch, h100.compute_units, h100.peak_bps) == ("sm_90", 132, 3.35e12)
    assert h100.cache_bytes == 50 * MiB
    assert (get_device("h200").peak_bps, get_device("h200").l2_bytes) == (4.8e12, 50 * MiB)


@pytest.mark.parametrize("spec", KNOWN_DEVICES.values(), ids=list(KNOWN_DEVICES))
def test_every_entry_is_consistent_and_cited(spec):
    assert spec.vendor in ("amd", "nvidia")
    assert spec.warp_size == (64 if spec.vendor == "amd" else 32)
    assert spec.arch.startswith("gfx" if spec.vendor == "amd" else "sm_")
    assert spec.peak_bps > 1e11 and spec.memory_bytes > 0 and spec.compute_units > 0
    assert spec.cache_bytes == spec.l2_bytes + spec.llc_bytes > 0
    assert spec.source.strip() and spec.name_tokens


def test_reported_memory_fields_reproduce_the_hbm_pitfall():
    """The report's clock x bus width gives the H100's datasheet peak but half of MI300X's."""
    for key, expected_ratio in (("h100-sxm", 1.0), ("mi300x", 0.5), ("a100-sxm-40gb", 1.0)):
        spec = get_device(key)
        reported_bps = 2 * spec.memory_clock_mhz * 1e6 * spec.memory_bus_bits / 8
        assert reported_bps / spec.peak_bps == pytest.approx(expected_ratio, rel=0.01)


def test_nvidia_reports_never_match_amd_entries_and_vice_versa():
    impostor = _info(
        "AMD Instinct MI300X",
        "sm_90",
        304,
        192 * GiB,
        memory_clock_khz=1_300_000,
        memory_bus_bits=8192,
    )
    assert match_device(impostor).how == "reported"
    impostor = _info(
        "NVIDIA H100 80GB HBM3",
        "gfx942",
        132,
        80 * GiB,
        memory_clock_khz=2_619_000,
        memory_bus_bits=5120,
    )
    assert match_device(impostor).how == "reported"


@pytest.mark.parametrize(
    ("reported", "key", "listed"),
    [("h100-sxm", "mi300x", "h100-sxm"), ("mi300x", "h100-sxm", "mi325x")],
)
def test_a_key_of_the_other_vendor_is_refused(reported, key, listed):
    with pytest.raises(ConfigError, match=key) as error:
        match_device(_reported(reported), key=key)
    assert listed in str(error.value)


def test_an_explicit_key_overrides_the_table():
    match = match_device(_reported("mi300x"), key="mi325x")
    assert (match.spec.key, match.how, match.warning) == ("mi325x", "override", None)


def test_a_key_of_another_arch_is_used_with_a_warning():
    match = match_device(_reported("mi300x"), key="mi210")
    assert match.spec.key == "mi210" and "gfx90a" in match.warning


def test_an_unknown_key_lists_the_known_ones():
    with pytest.raises(ConfigError, match="unknown device key 'mi999'") as error:
        match_device(_reported("mi300x"), key="mi999")
    assert all(key in str(error.value) for key in KNOWN_DEVICES)
    with pytest.raises(ConfigError, match="h100-sxm"):
        get_device("h100")


def test_a_peak_override_always_wins():
    match = match_device(_reported("mi300x"), peak_bps=4.0e12)
    assert (match.spec.key, match.spec.peak_bps, match.how) == ("mi300x", 4.0e12, "override")
    assert match.spec.cache_bytes == get_device("mi300x").cache_bytes
    assert "given by the user" in match.spec.source
    match = match_device(_reported("h100-sxm"), key="h200", peak_bps=4.5e12)
    assert (match.spec.key, match.spec.peak_bps, match.how) == ("h200", 4.5e12, "override")


@pytest.mark.parametrize("peak", [0.0, -1.0, float("nan"), float("inf")])
def test_a_bad_peak_override_is_refused(peak):
    with pytest.raises(ConfigError, match="peak bandwidth override"):
        match_device(_reported("mi300x"), peak_bps=peak)


def test_an_unknown_device_gets_the_reported_peak_with_a_warning():
    info = _info(
        "AMD Instinct MI400",
        "gfx950",
        256,
        288 * GiB,
        memory_clock_khz=2_000_000,
        memory_bus_bits=8192,
    )
    match = match_device(info)
    assert match.how == "reported"
    assert match.spec.peak_bps == pytest.approx(4.096e12)
    assert (match.spec.key, match.spec.vendor, match.spec.llc_bytes) == (
        "amd-instinct-mi400",
        "amd",
        0,
    )
    assert match.spec.cache_bytes == info.l2_bytes
    for words in ("not in the device table", "not trusted", "HBM3", "override", "device key"):
        assert words in match.warning


def test_an_unknown_device_with_a_given_peak_needs_no_report():
    info = _info("NVIDIA GH200 480GB", "sm_90", 132, 96 * GiB)
    match = match_device(info, peak_bps=4.0e12)
    assert (match.spec.peak_bps, match.how) == (4.0e12, "override")
    assert "not in the device table" in match.warning


def test_look_alikes_are_named_but_never_taken_without_a_name_match():
    """A GH200 has an H100/H200's arch and SM count: it must not get their datasheet peak."""
    info = _info(
        "NVIDIA GH200 480GB",
        "sm_90",
        132,
        96 * GiB,
        memory_clock_khz=2_619_000,
        memory_bus_bits=6144,
    )
    match = match_device(info)
    assert match.how == "reported"
    assert "'h100-nvl'" in match.warning and "'h200'" in match.warning


def test_an_unknown_device_without_any_peak_says_how_to_give_one():
    info = _info("AMD Instinct MI300X", "gfx942", 38, 24 * GiB)  # one XCD in CPX mode
    with pytest.raises(ConfigError) as error:
        match_device(info)
    message = str(error.value)
    assert "no peak bandwidth can be derived" in message
    assert "peak bandwidth override" in message and "mi300x" in message
    assert "h100-sxm" not in message  # only keys of the same vendor are offered


def test_normalize_arch_drops_target_features():
    assert normalize_arch("gfx942:sramecc+:xnack-") == "gfx942"
    assert normalize_arch("sm_90a") == "sm_90"
    assert normalize_arch("gfx90a") == "gfx90a"
