"""Our own JSON report (versioned, complete: docs/json-schema.md): its layout, its rows read
back, and its writer.

The document is laid out here once; the parts of it that are words or the run's false-alarm
numbers (the devices, the "suite" block, the summary line) are made by the renderers and
handed in (report/json_document.py), so this layer never imports the renderers or the gate.
Its one reader is record/report_reader.py, which owns the schema name and version.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_gpuperf.baseline.model import utc_now
from pytest_gpuperf.engine.plain import to_plain
from pytest_gpuperf.engine.results import Measurement
from pytest_gpuperf.record.meta import ReportMeta
from pytest_gpuperf.record.report_reader import REPORT_SCHEMA, REPORT_SCHEMA_VERSION
from pytest_gpuperf.record.verdict import (
    ACCEPTED,
    FAIL,
    MARGINAL,
    MODELLED,
    PASS,
    UNJUDGED,
    Row,
)


def report_document(
    rows: Sequence[Row],
    meta: ReportMeta,
    *,
    devices: list[dict[str, Any]],
    suite: dict[str, Any] | None,
    summary_line: str,
    static: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The complete report in our own versioned schema; `devices`, `suite` and `summary_line`
    are the renderers' (report/json_document.py), `static` the static gate's part
    (gate/static/report.py's static_json) under --gpuperf-static."""
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
        "compare": {"ref": meta.compare_ref, "commit": meta.compare_commit}
        if meta.compare_ref
        else None,
        "head": {"ref": meta.head_ref, "commit": meta.head_commit} if meta.head_ref else None,
        "simulated": any(row.measurement.simulated for row in rows),
        "interrupted": meta.interrupted,
        "problems": list(meta.problems),
        "devices": devices,
        "timing": {
            "wall_s": meta.wall_s,
            "gpu_lock_held_s": sum(g.get("lock_held_s", 0.0) for g in meta.gpus),
            "gpu_lock_waited_s": sum(g.get("lock_waited_s", 0.0) for g in meta.gpus),
        },
        "probe": meta.probe,
        "summary": {
            "total": len(rows),
            "tests": len({row.test_id for row in rows}),
            "passed": statuses.count(PASS),
            "not_gated": sum(1 for row in rows if row.verdict.not_gated),
            "modelled": statuses.count(MODELLED),
            "accepted": statuses.count(ACCEPTED),
            "failed": statuses.count(FAIL),
            "marginal": statuses.count(MARGINAL),
            "unjudged": statuses.count(UNJUDGED),
            "line": summary_line,
        },
        "accepted": [
            {
                "test_id": row.test_id,
                "name": row.measurement.name,
                "checks": list(row.verdict.accepted_checks),
                **to_plain(row.verdict.acceptance),
            }
            for row in rows
            if row.verdict.status == ACCEPTED and row.verdict.acceptance is not None
        ],
        "accept_warnings": list(meta.accept_warnings),
        "suite": suite,
        "shard": meta.shard,
        "merge": meta.merge,
        "static": dict(static) if static is not None else None,
        "rootdir": meta.rootdir,
        "tests": [dict(test) for test in meta.tests],
        "results": [
            {
                "test_id": row.test_id,
                "test_outcome": row.test_outcome,
                "measurement": measurement_json(row.measurement),
                "verdict": to_plain(row.verdict),
            }
            for row in rows
        ],
    }


def measurement_json(measurement: Measurement) -> dict[str, Any]:
    """A measurement's fields plus the quantities derived from them."""
    data = to_plain(measurement)
    data.update(
        bandwidth_bps=to_plain(measurement.bandwidth_bps),
        efficiency=to_plain(measurement.efficiency),
        efficiency_ci=to_plain(measurement.efficiency_ci),
        relative_ci=to_plain(measurement.relative_ci),
        roofline=to_plain(measurement.roofline),  # null unless flops= declared its work
    )
    return dict(data)


def write_json(path: str | os.PathLike[str], document: Mapping[str, Any]) -> Path:
    """Write a document from `report_document` or `to_pytest_benchmark_json` (strict JSON: no
    NaN), whole or not at all, with the umask's mode (files.write_report)."""
    from pytest_gpuperf.record.files import write_report

    text = json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    return write_report(path, text)
