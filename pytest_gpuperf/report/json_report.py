"""Our own JSON report (versioned, complete: docs/json-schema.md) and its writer."""

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
from pytest_gpuperf.report.devices import devices
from pytest_gpuperf.report.suite import suite_json
from pytest_gpuperf.report.text import ReportMeta, summary_line

REPORT_SCHEMA = "pytest-gpuperf-report"
# 2: verdicts carry their checks (floor, baseline, A/B comparison, save) as objects; rows
# carry pytest's final outcome of their test.
# 3: adds fields, removes none (docs/json-schema.md, "schema version 3"): a regression's
# confirming round and the level each check was judged at, the run's "suite" false-alarm
# budget; faults (problems, interrupted) and the simulated device's modelled comparisons;
# the runtime's device name beside the table's and the static gate's results (static); each
# measurement's GPU (gpu) and the Unix interval of its GPU work (started_s, ended_s),
# devices[] per GPU with workers, GPU-lock time and probe, the run's timing and probe; the
# A/B statistic's fields and the base side's samples in pair order; the stored check's
# band (its basis: prior, history or pooled); a shard's plan (shard) and the merge's verdict
# (merge); the tests that used gpu_bench with the kernel files each loaded (tests, rootdir),
# and --gpuperf-head's revision (head); a failure's explanation (verdict.explain).
REPORT_SCHEMA_VERSION = 3


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
            "not_gated": sum(1 for row in rows if row.verdict.not_gated),
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


def rows_from_json(document: Mapping[str, Any]) -> list[Row]:
    """The rows of a report written by `to_json` (for history plots and offline tools)."""
    from pytest_gpuperf.engine.plain import from_plain
    from pytest_gpuperf.engine.results import Verdict

    derived = {"bandwidth_bps", "efficiency", "efficiency_ci", "relative_ci"}
    rows = []
    for result in document.get("results", ()):
        fields = {k: v for k, v in result["measurement"].items() if k not in derived}
        rows.append(
            Row(
                test_id=result["test_id"],
                measurement=from_plain(Measurement, fields),
                verdict=from_plain(Verdict, result["verdict"]),
                test_outcome=result.get("test_outcome", ""),
            )
        )
    return rows


def write_json(path: str | os.PathLike[str], document: Mapping[str, Any]) -> Path:
    """Write a document from `to_json` or `to_pytest_benchmark_json` (strict JSON: no NaN),
    whole or not at all, with the umask's mode (files.write_report)."""
    from pytest_gpuperf.report.files import write_report

    text = json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    return write_report(path, text)
