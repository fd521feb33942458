"""What a gpuperf session reports: a terminal table, JSON, Markdown, JUnit properties.

Renderers take `Row`s (test id, measurement, verdict) and never touch pytest, so a script can
render a report from measurements it made itself. Two JSON shapes: our own, versioned and
complete (docs/json-schema.md), and pytest-benchmark's, so that `pytest-benchmark compare`
and tools built on its files can read gpuperf results.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import re
import statistics
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_gpuperf import __version__
from pytest_gpuperf.baseline import utc_now
from pytest_gpuperf.results import (
    FAIL,
    IMPROVED,
    MARGINAL,
    OTHER_DEVICE,
    PASS,
    REGRESSED,
    Measurement,
    Verdict,
)
from pytest_gpuperf.runtime.base import DeviceInfo

REPORT_SCHEMA = "pytest-gpuperf-report"
REPORT_SCHEMA_VERSION = 1
# The pytest-benchmark file layout we write (its "version" field): 5.x, read by 3.1 and later.
PYTEST_BENCHMARK_FORMAT = "5.1.0"
SIMULATED_BANNER = "SIMULATED device — numbers are not measurements"
TABLE_WIDTH = 160
MIN_TEST_WIDTH = 24
MAX_KERNEL_WIDTH = 24


@dataclass(frozen=True)
class Row:
    """One measurement of one test and what the gate decided about it."""

    test_id: str
    measurement: Measurement
    verdict: Verdict


@dataclass(frozen=True)
class ReportMeta:
    """Facts about the run that the rows do not carry (all optional).

    `device` adds arch and runtime/driver versions to what the measurements already say.
    """

    device: DeviceInfo | None = None
    project: str = ""
    commit: str = ""
    commit_time: str = ""
    branch: str = ""
    dirty: bool = False
    created: str = ""  # ISO 8601 UTC; the time of rendering when empty
    command: str = ""  # the command line, so a reader can rerun it
    plugin_version: str = __version__


# -- shared formatting ----------------------------------------------------------------------


def format_time(seconds: float) -> str:
    """Four significant digits in the unit that keeps the number in [1, 1000): '105.7 µs',
    '97.00 µs' (fixed decimals, so a column of times lines up)."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if abs(seconds) >= scale or unit == "ns":
            value = seconds / scale
            decimals = 1 if abs(value) >= 100 else 2 if abs(value) >= 10 else 3
            return f"{value:.{decimals}f} {unit}"
    raise AssertionError("unreachable")


def format_gbps(bandwidth_bps: float) -> str:
    gbps = bandwidth_bps / 1e9
    return f"{gbps:,.0f}" if gbps >= 100 else f"{gbps:.3g}"


def failure_causes(verdict: Verdict) -> list[str]:
    """Why a verdict failed: 'floor', 'regression', or nothing recognisable."""
    causes = []
    if verdict.floor_status == FAIL:
        causes.append("floor")
    if verdict.baseline_status == REGRESSED:
        causes.append("regression")
    return causes


def verdict_label(verdict: Verdict) -> str:
    """Short status for tables: 'FAIL regression', 'marginal', 'pass (improved)'."""
    if verdict.status == FAIL:
        return " ".join(["FAIL", *failure_causes(verdict)])
    if verdict.status == MARGINAL:
        return "marginal"
    return "pass (improved)" if verdict.baseline_status == IMPROVED else verdict.status


def summary_line(rows: Sequence[Row]) -> str:
    """'3 passed, 1 failed (regression), 1 marginal'."""
    if not rows:
        return "no measurements"
    statuses = [row.verdict.status for row in rows]
    parts = []
    if statuses.count(PASS):
        parts.append(f"{statuses.count(PASS)} passed")
    failed = [row.verdict for row in rows if row.verdict.status == FAIL]
    if failed:
        kinds = ["+".join(failure_causes(v)) or "other" for v in failed]
        counts = {kind: kinds.count(kind) for kind in dict.fromkeys(kinds)}
        if len(counts) == 1:
            parts.append(f"{len(failed)} failed ({kinds[0]})")
        else:
            detail = ", ".join(f"{n} {kind}" for kind, n in counts.items())
            parts.append(f"{len(failed)} failed ({detail})")
    if statuses.count(MARGINAL):
        parts.append(f"{statuses.count(MARGINAL)} marginal")
    return ", ".join(parts)


def device_lines(rows: Sequence[Row], meta: ReportMeta | None = None) -> list[str]:
    """'AMD Instinct MI300X [mi300x] via hip, peak 5.30 TB/s', one per device, then the
    simulated banner when any row is simulated."""
    lines = []
    for device in _devices(rows, meta):
        line = f"{device['name']} [{device['key']}] via {device['backend']}"
        if device.get("arch"):
            line += f", {device['arch']}"
        line += f", peak {device['peak_bps'] / 1e12:.2f} TB/s"
        lines.append(line)
    if any(row.measurement.simulated for row in rows):
        lines.append(SIMULATED_BANNER)
    return lines


def short_test_ids(test_ids: Iterable[str]) -> dict[str, str]:
    """Test ids without the parts every row shares: the function part alone when that is
    unique, else the file name and the function part, else the full id."""
    ids = list(dict.fromkeys(test_ids))

    def unique(names: list[str]) -> bool:
        return len(set(names)) == len(names)

    functions = [test_id.split("::", 1)[-1] for test_id in ids]
    if unique(functions):
        return dict(zip(ids, functions, strict=True))
    with_file = [_file_and_function(test_id) for test_id in ids]
    return dict(zip(ids, with_file if unique(with_file) else ids, strict=True))


def _file_and_function(test_id: str) -> str:
    path, _, rest = test_id.partition("::")
    return f"{path.rsplit('/', 1)[-1]}::{rest}" if rest else test_id


def ellipsize(text: str, width: int) -> str:
    """Cut the middle out of `text`, keeping a trailing '[param]' as long as it fits."""
    if len(text) <= width:
        return text
    param = text[text.rfind("[") :] if text.endswith("]") and "[" in text else ""
    tail = param if len(param) <= width // 2 else ""
    tail = tail or text[-(width // 3) :]
    head = text[: max(width - len(tail) - 1, 1)]
    return f"{head}…{tail}"[:width]


def _row_labels(rows: Sequence[Row]) -> list[str]:
    """Short test ids, with the measurement name where a test has several measurements."""
    short = short_test_ids(row.test_id for row in rows)
    per_test: dict[str, int] = {}
    for row in rows:
        per_test[row.test_id] = per_test.get(row.test_id, 0) + 1
    return [
        f"{short[row.test_id]} ({row.measurement.name})"
        if per_test[row.test_id] > 1
        else short[row.test_id]
        for row in rows
    ]


def _baseline_cell(verdict: Verdict) -> str:
    if verdict.baseline is not None:
        return f"{verdict.baseline.efficiency:.1%}"
    return "other dev" if verdict.baseline_status == OTHER_DEVICE else "—"


def _cells(row: Row) -> dict[str, str]:
    m, v = row.measurement, row.verdict
    occupancy = m.resources.occupancy if m.resources else None
    throttled = " !" if m.clocks and m.clocks.throttled else ""
    return {
        "kernel": m.kernel,
        "mode": m.cache,
        "time ± CI": f"{format_time(m.time_s)} ±{m.relative_ci:.1%}{throttled}",
        "GB/s": format_gbps(m.bandwidth_bps),
        "eff": f"{m.efficiency:.1%}",
        "floor": f"{v.floor:.0%}" if v.floor is not None else "—",
        "base": _baseline_cell(v),
        "delta": f"{v.delta:+.1%}" if v.delta is not None else "—",
        "allow": f"±{v.allowance:.1%}" if v.allowance is not None else "—",
        "verdict": verdict_label(v),
        "occ": f"{occupancy:.0%}" if occupancy is not None else "—",
    }


# -- terminal -------------------------------------------------------------------------------

_TERMINAL_COLUMNS = (
    "kernel",
    "mode",
    "time ± CI",
    "GB/s",
    "eff",
    "base",
    "delta",
    "verdict",
    "occ",
)
_LEFT_ALIGNED = {"test", "kernel", "mode", "verdict"}
_HEADERS = {"eff": "efficiency", "base": "baseline", "allow": "allowance", "occ": "occupancy"}


def terminal_table(
    rows: Sequence[Row], meta: ReportMeta | None = None, *, width: int = TABLE_WIDTH
) -> str:
    """The table printed at the end of a session, at most `width` columns wide when the
    test ids can be shortened to fit (they are cut in the middle, keeping the parameters)."""
    lines = [
        line if line == SIMULATED_BANNER else f"gpuperf device: {line}"
        for line in device_lines(rows, meta)
    ]
    if not rows:
        return "\n".join([*lines, "gpuperf: no measurements"])
    cells = [_cells(row) for row in rows]
    for cell in cells:
        cell["kernel"] = ellipsize(cell["kernel"], MAX_KERNEL_WIDTH)
    widths = {
        column: max(len(_HEADERS.get(column, column)), *(len(cell[column]) for cell in cells))
        for column in _TERMINAL_COLUMNS
    }
    separators = 2 * len(_TERMINAL_COLUMNS)
    test_width = max(MIN_TEST_WIDTH, width - sum(widths.values()) - separators)
    labels = [ellipsize(label, test_width) for label in _row_labels(rows)]
    widths = {"test": max(4, *(len(label) for label in labels)), **widths}
    for cell, label in zip(cells, labels, strict=True):
        cell["test"] = label

    def line(values: Mapping[str, str]) -> str:
        return "  ".join(
            values[c].ljust(widths[c]) if c in _LEFT_ALIGNED else values[c].rjust(widths[c])
            for c in widths
        ).rstrip()

    header = line({c: _HEADERS.get(c, c) for c in widths})
    lines += [header, "-" * len(header), *(line(cell) for cell in cells)]
    lines += _footnotes(rows, labels)
    lines.append(summary_line(rows))
    return "\n".join(lines)


def _footnotes(rows: Sequence[Row], labels: Sequence[str]) -> list[str]:
    notes = []
    for row, label in zip(rows, labels, strict=True):
        clocks = row.measurement.clocks
        if clocks and clocks.throttled:
            reasons = ", ".join(clocks.throttle_reasons) or "reason not reported"
            notes.append(f"! {label}: clocks throttled during the measurement ({reasons})")
        notes.extend(f"  {label}: {note}" for note in row.verdict.notes)
    return notes


# -- Markdown -------------------------------------------------------------------------------

_MARKDOWN_COLUMNS = (
    "test",
    "kernel",
    "mode",
    "time ± CI",
    "GB/s",
    "eff",
    "floor",
    "base",
    "delta",
    "allow",
    "verdict",
)


def markdown(rows: Sequence[Row], meta: ReportMeta | None = None) -> str:
    """A GitHub-flavoured summary: device, verdict counts, the table, then every failure
    and marginal result with its full reason."""
    out = ["### pytest-gpuperf", ""]
    for line in device_lines(rows, meta):
        out.append(f"> **{line}**" if line == SIMULATED_BANNER else f"Device: {_md_escape(line)}  ")
    out += ["", f"**{summary_line(rows)}**", ""]
    if rows:
        labels = _row_labels(rows)
        out.append("| " + " | ".join(_HEADERS.get(c, c) for c in _MARKDOWN_COLUMNS) + " |")
        out.append(
            "|" + "|".join("---" if c in _LEFT_ALIGNED else "--:" for c in _MARKDOWN_COLUMNS) + "|"
        )
        for row, label in zip(rows, labels, strict=True):
            cell = {**_cells(row), "test": f"`{label}`"}
            if row.verdict.status == FAIL:
                cell["verdict"] = f"**{cell['verdict']}**"
            out.append("| " + " | ".join(_md_escape(cell[c]) for c in _MARKDOWN_COLUMNS) + " |")
    notes = _footnotes(rows, [f"`{row.test_id}`" for row in rows])
    if notes:
        out += ["", "#### Notes", "", *(f"- {note.lstrip('! ')}" for note in notes)]
    for status, title in ((FAIL, "Failures"), (MARGINAL, "Marginal")):
        listed = [row for row in rows if row.verdict.status == status]
        if listed:
            out += ["", f"#### {title}", ""]
            for row in listed:
                out.append(f"- `{row.test_id}` ({row.measurement.name}):")
                out += [
                    "  ```",
                    *(f"  {text}" for text in row.verdict.reason.splitlines()),
                    "  ```",
                ]
    return "\n".join(out) + "\n"


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def append_github_step_summary(
    markdown_text: str, env: Mapping[str, str] = os.environ
) -> Path | None:
    """Append to the file GitHub Actions names in $GITHUB_STEP_SUMMARY; None when unset."""
    target = env.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    path = Path(target)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(markdown_text if markdown_text.endswith("\n") else markdown_text + "\n")
    return path


# -- JUnit ----------------------------------------------------------------------------------


def junit_properties(
    measurement: Measurement, verdict: Verdict, *, prefix: str = "gpuperf"
) -> list[tuple[str, str]]:
    """Name/value pairs for pytest's `record_property` (they land in the JUnit XML)."""
    m = measurement
    low, high = m.efficiency_ci
    properties = [
        ("name", m.name),
        ("kernel", m.kernel),
        ("device", m.device_key),
        ("device_name", m.device_name),
        ("backend", m.backend),
        ("simulated", str(m.simulated).lower()),
        ("cache", m.cache),
        ("time_s", _number(m.time_s)),
        ("time_ci_s", f"{_number(m.time_ci_s[0])},{_number(m.time_ci_s[1])}"),
        ("gbps", _number(m.bandwidth_bps / 1e9)),
        ("efficiency", _number(m.efficiency)),
        ("ci", f"{_number(low)},{_number(high)}"),
        ("samples", str(len(m.samples_s))),
        ("verdict", verdict.status),
        ("baseline_status", verdict.baseline_status),
    ]
    if verdict.floor is not None:
        properties.append(("floor", _number(verdict.floor)))
    if verdict.baseline is not None:
        properties.append(("baseline", _number(verdict.baseline.efficiency)))
    if verdict.delta is not None:
        properties.append(("delta", _number(verdict.delta)))
    if verdict.allowance is not None:
        properties.append(("allowance", _number(verdict.allowance)))
    if m.clocks is not None:
        properties.append(("throttled", str(m.clocks.throttled).lower()))
    return [(f"{prefix}_{key}", value) for key, value in properties]


def _number(value: float) -> str:
    return f"{value:.6g}"


# -- JSON -----------------------------------------------------------------------------------


def to_json(rows: Sequence[Row], meta: ReportMeta | None = None) -> dict[str, Any]:
    """The complete report in our own versioned schema (docs/json-schema.md)."""
    meta = meta or ReportMeta()
    statuses = [row.verdict.status for row in rows]
    return {
        "schema": REPORT_SCHEMA,
        "schema_version": REPORT_SCHEMA_VERSION,
        "plugin_version": meta.plugin_version,
        "created": meta.created or utc_now(),
        "command": meta.command,
        "commit": {
            "id": meta.commit,
            "time": meta.commit_time,
            "branch": meta.branch,
            "dirty": meta.dirty,
            "project": meta.project,
        },
        "simulated": any(row.measurement.simulated for row in rows),
        "devices": _devices(rows, meta),
        "summary": {
            "total": len(rows),
            "passed": statuses.count(PASS),
            "failed": statuses.count(FAIL),
            "marginal": statuses.count(MARGINAL),
            "line": summary_line(rows),
        },
        "results": [
            {
                "test_id": row.test_id,
                "measurement": _measurement_json(row.measurement),
                "verdict": _jsonable(row.verdict),
            }
            for row in rows
        ],
    }


def _measurement_json(measurement: Measurement) -> dict[str, Any]:
    data = _jsonable(measurement)
    data.update(
        bandwidth_bps=_jsonable(measurement.bandwidth_bps),
        efficiency=_jsonable(measurement.efficiency),
        efficiency_ci=_jsonable(measurement.efficiency_ci),
        relative_ci=_jsonable(measurement.relative_ci),
    )
    return data


def write_json(path: str | os.PathLike[str], document: Mapping[str, Any]) -> Path:
    """Write a document from `to_json` or `to_pytest_benchmark_json` (strict JSON: no NaN)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(
        json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False) + "\n",
        encoding="utf-8",
    )
    return target


def to_pytest_benchmark_json(rows: Sequence[Row], meta: ReportMeta | None = None) -> dict[str, Any]:
    """The same results in pytest-benchmark's file layout, one benchmark per row.

    Its statistics are over the per-launch kernel times (`stats.data`, seconds; rounds =
    samples, iterations = 1); `fullname` is '<test id>::<measurement name>' so several
    measurements of one test stay apart; the gpuperf numbers ride along in `extra_info`.
    """
    meta = meta or ReportMeta()
    return {
        "machine_info": {
            "node": platform.node(),
            "processor": platform.processor(),
            "machine": platform.machine(),
            "python_compiler": platform.python_compiler(),
            "python_implementation": platform.python_implementation(),
            "python_implementation_version": platform.python_version(),
            "python_version": platform.python_version(),
            "python_build": list(platform.python_build()),
            "release": platform.release(),
            "system": platform.system(),
            "cpu": {"arch": platform.machine(), "count": os.cpu_count()},
            "gpu": _devices(rows, meta),
        },
        "commit_info": {
            "id": meta.commit or "unknown",
            "time": meta.commit_time or None,
            "author_time": None,
            "dirty": meta.dirty,
            "project": meta.project,
            "branch": meta.branch or "(unknown)",
        },
        "benchmarks": [_benchmark(row) for row in rows],
        "datetime": meta.created or utc_now(),
        "version": PYTEST_BENCHMARK_FORMAT,
        "gpuperf_version": meta.plugin_version,
    }


def _benchmark(row: Row) -> dict[str, Any]:
    m, v = row.measurement, row.verdict
    function = row.test_id.split("::", 1)[-1]
    match = re.search(r"\[(.*)\]$", row.test_id)
    return {
        "group": m.device_key,
        "name": f"{function}::{m.name}",
        "fullname": f"{row.test_id}::{m.name}",
        "params": None,
        "param": match.group(1) if match else None,
        "extra_info": {
            "kernel": m.kernel,
            "cache": m.cache,
            "bytes_moved": m.bytes_moved,
            "bandwidth_bps": _jsonable(m.bandwidth_bps),
            "efficiency": _jsonable(m.efficiency),
            "peak_bps": _jsonable(m.peak_bps),
            "device_key": m.device_key,
            "device_name": m.device_name,
            "backend": m.backend,
            "simulated": m.simulated,
            "verdict": v.status,
            "baseline_efficiency": v.baseline.efficiency if v.baseline else None,
            "delta": v.delta,
        },
        "options": {
            "timer": f"{m.backend} device events ({m.queue_method})",
            "warmup": m.warmup_count,
        },
        "stats": benchmark_stats(m.samples_s or (m.time_s,)),
    }


def benchmark_stats(samples_s: Sequence[float]) -> dict[str, Any]:
    """pytest-benchmark's `stats` block for these samples, with its definitions (quartiles
    by its method; outliers as 'beyond 1 stddev;beyond 1.5 IQR')."""
    data = [float(x) for x in samples_s]
    ordered = sorted(data)
    count = len(data)
    mean = statistics.mean(data)
    stddev = statistics.stdev(data) if count > 1 else 0.0
    q1, q3 = _quartiles(ordered)
    iqr = q3 - q1
    fence_low, fence_high = q1 - 1.5 * iqr, q3 + 1.5 * iqr
    stddev_outliers = sum(1 for x in data if not mean - stddev <= x <= mean + stddev)
    iqr_outliers = sum(1 for x in data if not fence_low <= x <= fence_high)
    total = sum(data)
    return {
        "min": ordered[0],
        "max": ordered[-1],
        "mean": mean,
        "stddev": stddev,
        "rounds": count,
        "median": statistics.median(ordered),
        "iqr": iqr,
        "q1": q1,
        "q3": q3,
        "iqr_outliers": iqr_outliers,
        "stddev_outliers": stddev_outliers,
        "outliers": f"{stddev_outliers};{iqr_outliers}",
        "ld15iqr": ordered[bisect_left(ordered, fence_low)],
        "hd15iqr": ordered[bisect_right(ordered, fence_high) - 1],
        "ops": count / total if total else 0,
        "total": total,
        "data": data,
        "iterations": 1,
    }


def _quartiles(ordered: Sequence[float]) -> tuple[float, float]:
    """Quartiles as pytest-benchmark computes them (Wikipedia 'Quartile', methods 2 and 3)."""
    count = len(ordered)
    if count == 1:
        return ordered[0], ordered[0]
    if count % 2 == 0:
        return statistics.median(ordered[: count // 2]), statistics.median(ordered[count // 2 :])
    n, remainder = divmod(count, 4)
    if remainder == 1:
        q1 = 0.25 * ordered[n - 1] + 0.75 * ordered[n]
        q3 = 0.75 * ordered[3 * n] + 0.25 * ordered[3 * n + 1]
    else:
        q1 = 0.75 * ordered[n] + 0.25 * ordered[n + 1]
        q3 = 0.25 * ordered[3 * n + 1] + 0.75 * ordered[3 * n + 2]
    return q1, q3


def _devices(rows: Sequence[Row], meta: ReportMeta | None) -> list[dict[str, Any]]:
    """One record per device seen in the rows, with `meta.device`'s details where it matches."""
    info = meta.device if meta else None
    devices: dict[tuple[str, str, str], dict[str, Any]] = {}
    for row in rows:
        m = row.measurement
        key = (m.device_key, m.device_name, m.backend)
        if key in devices:
            continue
        record: dict[str, Any] = {
            "key": m.device_key,
            "name": m.device_name,
            "backend": m.backend,
            "simulated": m.simulated,
            "peak_bps": _jsonable(m.peak_bps),
        }
        if info is not None and (info.name, info.backend) == (m.device_name, m.backend):
            record.update(
                arch=info.arch,
                compute_units=info.compute_units,
                l2_bytes=info.l2_bytes,
                memory_bytes=info.memory_bytes,
                runtime_version=info.runtime_version,
                driver_version=info.driver_version,
                pci_bus_id=info.pci_bus_id,
            )
        devices[key] = record
    return list(devices.values())


def _jsonable(value: Any) -> Any:
    """Plain JSON values: dataclasses become objects, tuples lists, NaN/inf null, numpy
    scalars Python numbers; anything else its str()."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    item = getattr(value, "item", None)  # numpy scalars and 0-d arrays
    if callable(item):
        try:
            return _jsonable(item())
        except (TypeError, ValueError):
            pass
    return str(value)
