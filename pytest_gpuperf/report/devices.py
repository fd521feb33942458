"""The devices a set of rows was measured on, for headers and JSON."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from pytest_gpuperf.engine.plain import to_plain
from pytest_gpuperf.record.meta import ReportMeta
from pytest_gpuperf.record.plural import counted
from pytest_gpuperf.record.verdict import Row
from pytest_gpuperf.report.text import SIMULATED_BANNER


def devices(rows: Sequence[Row], meta: ReportMeta | None) -> list[dict[str, Any]]:
    """One record per GPU the rows were measured on (two equal GPUs are two records), with
    `meta.device`'s details where it matches, the workers that used it, their GPU-lock time
    and the degraded-GPU probe's finding (`meta.gpus`, `meta.probe`)."""
    info = meta.device if meta else None
    found: dict[tuple[Any, ...], dict[str, Any]] = {}
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
        model = (m.device_key, m.device_name, m.backend)
        key = (*model, _gpu_key(m.gpu.index, m.gpu.pci_bus_id) if m.gpu else None)
        if key in found:
            continue
        record: dict[str, Any] = {
            "key": m.device_key,
            "name": m.device_name,
            "backend": m.backend,
            "simulated": m.simulated,
            "peak_bps": to_plain(peaks[model].most_common(1)[0][0]),
        }
        # `name` is the device table's (what every line shows); the runtime calls the device
        # `runtime_name` ("NVIDIA H100 80GB HBM3" for the table's "NVIDIA H100 SXM 80GB")
        if info is not None and info.backend == m.backend:
            record["runtime_name"] = info.name
            record.update((field, getattr(info, field)) for field in _RUNTIME_FIELDS)
        if m.gpu is not None:
            record.update(index=m.gpu.index, pci_bus_id=m.gpu.pci_bus_id, uuid=m.gpu.uuid)
            record.update(_gpu_facts(meta, m.backend, m.gpu.index, m.gpu.pci_bus_id))
        found[key] = record
    return list(found.values())


# The DeviceInfo fields a device record carries under their own names (docs/json-schema.md).
_RUNTIME_FIELDS = (
    "arch",
    "compute_units",
    "l2_bytes",
    "memory_bytes",
    "runtime_version",
    "driver_version",
    "pci_bus_id",
)


def _gpu_key(index: int, pci_bus_id: str | None) -> tuple[Any, ...]:
    return (pci_bus_id,) if pci_bus_id else (index,)


def _gpu_facts(
    meta: ReportMeta | None, backend: str, index: int, pci_bus_id: str | None
) -> dict[str, Any]:
    """workers, GPU-lock time and the probe's finding for one GPU."""
    facts: dict[str, Any] = {"workers": []}
    if meta is None:
        return facts
    wanted = _gpu_key(index, pci_bus_id)
    for gpu in meta.gpus:
        if (
            gpu.get("backend") == backend
            and _gpu_key(gpu["index"], gpu.get("pci_bus_id")) == wanted
        ):
            facts.update(
                workers=sorted(gpu.get("workers", ())),
                lock_held_s=gpu.get("lock_held_s"),
                lock_waited_s=gpu.get("lock_waited_s"),
                lock_holds=gpu.get("lock_holds"),
            )
    probe = meta.probe
    if probe and probe.get("backend") == backend:
        for gpu in probe.get("gpus", ()):
            if _gpu_key(gpu["index"], gpu.get("pci_bus_id")) == wanted:
                facts["probe"] = {
                    "bandwidth_bps": gpu["bandwidth_bps"],
                    "spread": gpu["spread"],
                    "ratio": gpu.get("ratio"),
                    "degraded": bool(gpu.get("degraded")),
                    "undecided": bool(gpu.get("undecided")),
                    "refused": gpu["index"] in probe.get("refused", ()),
                    "probe_s": gpu["probe_s"],
                    "margin": probe.get("margin"),
                    "clocks": gpu.get("clocks"),
                }
    return facts


def gpu_lines(rows: Sequence[Row], meta: ReportMeta | None) -> list[str]:
    """A line per GPU the run used (index, bus id, workers, GPU-lock time, probe), the probe's
    verdict on degraded GPUs with their clocks, and which results came from one."""
    lines = []
    records = sorted(
        (d for d in devices(rows, meta) if "index" in d), key=lambda d: (d["backend"], d["index"])
    )
    for record in records:
        where = f"GPU {record['index']}" + (
            f" ({record['pci_bus_id']})" if record.get("pci_bus_id") else ""
        )
        parts = [f"{where} [{record['key']}]"]
        if record.get("workers"):
            parts.append(f"workers {', '.join(record['workers'])}")
        if record.get("lock_held_s") is not None:
            parts.append(
                f"GPU lock held {record['lock_held_s']:.2f} s in {record['lock_holds']} holds"
                f" (waited {record['lock_waited_s']:.2f} s)"
            )
        probe = record.get("probe")
        if probe and probe.get("ratio") is not None:
            state = (
                "DEGRADED"
                if probe["degraded"]
                else ("undecided" if probe.get("undecided") else "ok")
            )
            parts.append(
                f"probe {probe['bandwidth_bps'] / 1e9:.0f} GB/s, {probe['ratio']:.3f}x its "
                f"peers (+-{probe['spread']:.1%}): {state}"
            )
        lines.append("; ".join(parts))
    probe_report = meta.probe if meta else None
    if probe_report:
        if probe_report.get("skipped"):
            lines.append(f"degraded-GPU probe: {probe_report['skipped']}")
        for gpu in probe_report.get("gpus", ()):
            if gpu.get("undecided"):
                lines.append(
                    f"degraded-GPU probe: GPU {gpu['index']} undecided: {gpu['ratio']:.3f}x its "
                    f"peers, +-{gpu['spread']:.1%} after "
                    f"{counted(gpu.get('probes', 1), 'probe')}, across "
                    f"the margin {probe_report['margin']:.1%}; not marked"
                )
            if not gpu.get("degraded"):
                continue
            clocks = _clock_text(gpu.get("clocks"))
            refused = gpu["index"] in probe_report.get("refused", ())
            lines.append(
                f"DEGRADED GPU {gpu['index']}"
                + (f" ({gpu['pci_bus_id']})" if gpu.get("pci_bus_id") else "")
                + f": its streaming bandwidth is {gpu['ratio']:.3f}x the median of its peers "
                f"(margin {probe_report['margin']:.1%}, --gpuperf-gpu-margin){clocks}; "
                + (
                    "refused: no worker measured on it (--gpuperf-refuse-degraded)"
                    if refused
                    else "its results are marked; --gpuperf-refuse-degraded keeps workers off it"
                )
            )
    marked = [row for row in rows if row.measurement.gpu and row.measurement.gpu.degraded]
    if marked:
        shown = ", ".join(dict.fromkeys(row.test_id for row in marked[:5]))
        more = f" and {len(marked) - 5} more" if len(marked) > 5 else ""
        lines.append(f"{len(marked)} result(s) measured on a DEGRADED GPU: {shown}{more}")
    return lines


def _clock_text(clocks: dict[str, Any] | None) -> str:
    if not clocks:
        return "; clocks: not readable"
    parts = []
    if clocks.get("sm_clock_mhz"):
        top = f"/{clocks['sm_clock_max_mhz']:.0f}" if clocks.get("sm_clock_max_mhz") else ""
        parts.append(f"SM clock {clocks['sm_clock_mhz']:.0f}{top} MHz")
    if clocks.get("memory_clock_mhz"):
        parts.append(f"memory clock {clocks['memory_clock_mhz']:.0f} MHz")
    if clocks.get("temperature_c") is not None:
        parts.append(f"{clocks['temperature_c']:.0f} C")
    reasons = clocks.get("throttle_reasons") or ()
    parts.append(
        f"throttle reasons: {', '.join(reasons)}" if reasons else "no throttle reason reported"
    )
    return "; " + ", ".join(parts)


def device_lines(rows: Sequence[Row], meta: ReportMeta | None = None) -> list[str]:
    """'AMD Instinct MI300X [mi300x] via hip, peak 5.30 TB/s', one per device model, a line
    per GPU used (gpu_lines), then the simulated banner when any row is simulated."""
    lines: list[str] = []
    for device in devices(rows, meta):
        line = f"{device['name']} [{device['key']}] via {device['backend']}"
        if device.get("arch"):
            line += f", {device['arch']}"
        line += f", peak {device['peak_bps'] / 1e12:.2f} TB/s"
        if line not in lines:  # two GPUs of one model: one line for the model
            lines.append(line)
    lines += gpu_lines(rows, meta)
    if any(row.measurement.simulated for row in rows):
        lines.append(SIMULATED_BANNER)
    return lines
