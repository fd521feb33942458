"""Our own JSON report (versioned, complete: docs/json-schema.md) and its writer; its one
reader is record/report_reader.py (which owns the schema name and version)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_gpuperf.baseline.model import utc_now
from pytest_gpuperf.engine.plain import to_plain
from pytest_gpuperf.engine.results import (
    ACCEPTED,
    FAIL,
    MARGINAL,
    MODELLED,
    PASS,
    UNJUDGED,
    Measurement,
    Row,
)
from pytest_gpuperf.gate.suite import SuiteBudget
from pytest_gpuperf.record.report_reader import (  # the schema is the reader's
    REPORT_SCHEMA,
    REPORT_SCHEMA_VERSION,
    rows_from_json,  # noqa: F401 (a name of the library: report.rows_from_json)
)
from pytest_gpuperf.report.devices import devices
from pytest_gpuperf.report.suite import suite_json
from pytest_gpuperf.report.text import ReportMeta, summary_line


def to_json(
    rows: Sequence[Row],
    meta: ReportMeta | None = None,
    static: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The complete report in our own versioned schema; `static` is the static gate's part
    (static/report.py's static_json) under --gpuperf-static."""
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
        "compare": {"ref": meta.compare_ref, "commit": meta.compare_commit}
        if meta.compare_ref
        else None,
        "head": {"ref": meta.head_ref, "commit": meta.head_commit} if meta.head_ref else None,
        "simulated": any(row.measurement.simulated for row in rows),
        "interrupted": meta.interrupted,
        "problems": list(meta.problems),
        "devices": devices(rows, meta),
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
            "modelled": statuses.count(MODELLED),
            "accepted": statuses.count(ACCEPTED),
            "failed": statuses.count(FAIL),
            "marginal": statuses.count(MARGINAL),
            "unjudged": statuses.count(UNJUDGED),
            "line": summary_line(rows),
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
        "suite": suite_json(rows, _budget(meta)),
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


def _budget(meta: ReportMeta) -> SuiteBudget | None:
    if not meta.suite_target > 0:
        return None
    return SuiteBudget(meta.suite_target, max(meta.suite_checks, 1))


def measurement_json(measurement: Measurement) -> dict[str, Any]:
    """A measurement's fields plus the quantities derived from them."""
    data = to_plain(measurement)
    data.update(
        bandwidth_bps=to_plain(measurement.bandwidth_bps),
        efficiency=to_plain(measurement.efficiency),
        efficiency_ci=to_plain(measurement.efficiency_ci),
        relative_ci=to_plain(measurement.relative_ci),
    )
    return dict(data)


def write_json(path: str | os.PathLike[str], document: Mapping[str, Any]) -> Path:
    """Write a document from `to_json` or `to_pytest_benchmark_json` (strict JSON: no NaN),
    whole or not at all, with the umask's mode (files.write_report)."""
    from pytest_gpuperf.report.files import write_report

    text = json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    return write_report(path, text)
