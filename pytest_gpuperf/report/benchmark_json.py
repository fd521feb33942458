"""The results in pytest-benchmark's file layout, so `pytest-benchmark compare` and tools built
on its files can read gpuperf results."""

from __future__ import annotations

import os
import platform
import re
import statistics
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import Any

from pytest_gpuperf.baseline.model import utc_now
from pytest_gpuperf.engine.plain import to_plain
from pytest_gpuperf.record.meta import ReportMeta
from pytest_gpuperf.record.verdict import Row
from pytest_gpuperf.report.devices import devices
from pytest_gpuperf.report.roofline_words import roofline_extra

# The pytest-benchmark file layout we write (its "version" field): 5.x, read by 3.1 and later.
PYTEST_BENCHMARK_FORMAT = "5.1.0"


def to_pytest_benchmark_json(rows: Sequence[Row], meta: ReportMeta | None = None) -> dict[str, Any]:
    """One benchmark per row; statistics over the per-launch kernel times (`stats.data`,
    seconds; rounds = samples, iterations = 1); `fullname` is '<test id>::<measurement>' so
    several measurements of one test stay apart; the gpuperf numbers ride in `extra_info`."""
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
            "gpu": devices(rows, meta),
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
    comparison = v.comparison
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
            "bandwidth_bps": to_plain(m.bandwidth_bps),
            "efficiency": to_plain(m.efficiency),
            "peak_bps": to_plain(m.peak_bps),
            "device_key": m.device_key,
            "device_name": m.device_name,
            "backend": m.backend,
            "simulated": m.simulated,
            "verdict": v.status,
            "baseline_efficiency": v.baseline.baseline.efficiency if v.baseline.baseline else None,
            "delta": v.baseline.delta,
            "ab_state": comparison.state if comparison else None,
            "ab_ratio": comparison.ratio if comparison else None,
            **roofline_extra(m),  # flops, math, tflops, the roof: where work was declared
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
