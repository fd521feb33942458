"""The JSON report of a run: the record's document (record/json_report.py) with the parts made
here, where the words and the false-alarm numbers are made: the devices the rows ran on, the
run's "suite" block (its false-alarm budget, gate/suite.py) and the summary line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_gpuperf.gate.suite import SuiteBudget
from pytest_gpuperf.record.json_report import report_document
from pytest_gpuperf.record.meta import ReportMeta
from pytest_gpuperf.record.verdict import Row
from pytest_gpuperf.report.devices import devices
from pytest_gpuperf.report.suite import suite_json
from pytest_gpuperf.report.text import summary_line


def to_json(
    rows: Sequence[Row],
    meta: ReportMeta | None = None,
    static: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The complete report in our own versioned schema; `static` is the static gate's part
    (gate/static/report.py's static_json) under --gpuperf-static."""
    meta = meta or ReportMeta()
    return report_document(
        rows,
        meta,
        devices=devices(rows, meta),
        suite=suite_json(rows, _budget(meta)),
        summary_line=summary_line(rows),
        static=static,
    )


def _budget(meta: ReportMeta) -> SuiteBudget | None:
    if not meta.suite_target > 0:
        return None
    return SuiteBudget(meta.suite_target, max(meta.suite_checks, 1))
