"""The JSON report's device records: what the runtime said about the device, beside the
device table's name, on the record of the backend that measured."""

from __future__ import annotations

from pytest_gpuperf.gate.decide import decide
from pytest_gpuperf.record.checks import BaselineCheck
from pytest_gpuperf.record.meta import ReportMeta
from pytest_gpuperf.record.verdict import Row
from pytest_gpuperf.report.devices import devices
from pytest_gpuperf.runtime.info import DeviceInfo
from tests import records

INFO = DeviceInfo(
    backend="hip",
    index=0,
    name="AMD Instinct MI300X OAM",
    arch="gfx942:sramecc+:xnack-",
    compute_units=304,
    l2_bytes=4 << 20,
    memory_bytes=192 << 30,
    warp_size=64,
    max_threads_per_block=1024,
    shared_bytes_per_block=64 << 10,
    pci_bus_id="0000:05:00.0",
    runtime_version="6.2.41133",
    driver_version="6.8.5",
)


def _row(backend: str) -> Row:
    verdict = decide(baseline=BaselineCheck(outcome="no-baseline"))
    return Row("t::x", records.measurement(0.8, time_s=1e-4, backend=backend), verdict)


def test_a_device_record_carries_the_runtimes_facts_under_their_own_names():
    (record,) = devices([_row("hip")], ReportMeta(device=INFO))
    assert record["name"] == "AMD Instinct MI300X"  # the table's
    assert record["runtime_name"] == "AMD Instinct MI300X OAM"
    assert {key: record[key] for key in ("arch", "compute_units", "l2_bytes")} == {
        "arch": "gfx942:sramecc+:xnack-",
        "compute_units": 304,
        "l2_bytes": 4 << 20,
    }
    assert (record["memory_bytes"], record["pci_bus_id"]) == (192 << 30, "0000:05:00.0")
    assert (record["runtime_version"], record["driver_version"]) == ("6.2.41133", "6.8.5")


def test_another_backends_facts_are_not_lent_to_a_device_record():
    (record,) = devices([_row("cuda")], ReportMeta(device=INFO))
    assert "runtime_name" not in record and "arch" not in record
