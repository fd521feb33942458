"""The devices a set of rows was measured on, for headers and JSON."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from pytest_gpuperf.plain import to_plain
from pytest_gpuperf.report.text import SIMULATED_BANNER, ReportMeta
from pytest_gpuperf.results import Row


def devices(rows: Sequence[Row], meta: ReportMeta | None) -> list[dict[str, Any]]:
    """One record per device seen in the rows, with `meta.device`'s details where it matches."""
    info = meta.device if meta else None
    found: dict[tuple[str, str, str], dict[str, Any]] = {}
    # A test may measure against its own peak (gpuperf(peak_gbps=...)): the device's is the
    # one most of its measurements used.
    peaks: dict[tuple[str, str, str], Counter[float]] = {}
    known = dict(meta.device_peaks) if meta else {}
    for row in rows:
        m = row.measurement
        peaks.setdefault((m.device_key, m.device_name, m.backend), Counter())[
            known.get(m.device_key, m.peak_bps)
        ] += 1
    for row in rows:
        m = row.measurement
        key = (m.device_key, m.device_name, m.backend)
        if key in found:
            continue
        record: dict[str, Any] = {
            "key": m.device_key,
            "name": m.device_name,
            "backend": m.backend,
            "simulated": m.simulated,
            "peak_bps": to_plain(peaks[key].most_common(1)[0][0]),
        }
        # `name` is the device table's (what every line shows); the runtime calls the device
        # `runtime_name` ("NVIDIA H100 80GB HBM3" for the table's "NVIDIA H100 SXM 80GB")
        if info is not None and info.backend == m.backend:
            record.update(
                runtime_name=info.name,
                arch=info.arch,
                compute_units=info.compute_units,
                l2_bytes=info.l2_bytes,
                memory_bytes=info.memory_bytes,
                runtime_version=info.runtime_version,
                driver_version=info.driver_version,
                pci_bus_id=info.pci_bus_id,
            )
        found[key] = record
    return list(found.values())


def device_lines(rows: Sequence[Row], meta: ReportMeta | None = None) -> list[str]:
    """'AMD Instinct MI300X [mi300x] via hip, peak 5.30 TB/s', one per device, then the
    simulated banner when any row is simulated."""
    lines = []
    for device in devices(rows, meta):
        line = f"{device['name']} [{device['key']}] via {device['backend']}"
        if device.get("arch"):
            line += f", {device['arch']}"
        line += f", peak {device['peak_bps'] / 1e12:.2f} TB/s"
        lines.append(line)
    if any(row.measurement.simulated for row in rows):
        lines.append(SIMULATED_BANNER)
    return lines
