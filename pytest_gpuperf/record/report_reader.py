"""The one reader of a JSON report (`--gpuperf-json`, the merge's `--json`) and of a
bisection's result (`gpuperf bisect --json`): merge, compare, publish,
history and bisect read every file through it.

Four readers had drifted apart: one accepted NaN and fields of any kind, one never asked the
schema version, one parsed without a bound. Here a report is read bounded and strict
(record/json_text.py: a regular file of at most 64 MiB, no NaN or Infinity, no key twice),
its schema and a version this reader knows checked, every field the commands read checked
for kind and range (record/report_checks.py), no measurement given twice, and only then made
into rows. Each refusal is one ConfigError line naming the file and the field; the commands
print it as `error: ...` and exit 2.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_gpuperf.engine.plain import from_plain
from pytest_gpuperf.engine.results import Measurement
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.record.json_text import read_json_file
from pytest_gpuperf.record.report_checks import FieldChecks, mistyped, shown
from pytest_gpuperf.record.verdict import Row, Verdict

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
# 4: adds fields, removes none (docs/json-schema.md, "schema version 4"): the roofline: a
# measurement's declared work (measurement.work: flops, math, the type's peak) and where it
# stands (the derived measurement.roofline: TFLOP/s, intensity, the roof that binds and the
# fraction of it); the verdict's roofline floors (flops_floor, roofline_floor) and their
# failed checks ("min_flops", "min_roofline").
REPORT_SCHEMA_VERSION = 4
# Version 1 (plugin 0.1) had flat verdict fields that rows_from_json cannot read back.
READABLE_VERSIONS = range(2, REPORT_SCHEMA_VERSION + 1)

BISECT_SCHEMA = "pytest-gpuperf-bisect"  # what gpuperf bisect --json writes
BISECT_SCHEMA_VERSION = 1

# The fields a measurement's JSON carries beyond the dataclass's own (derived on writing).
DERIVED_FIELDS = frozenset(
    {"bandwidth_bps", "efficiency", "efficiency_ci", "relative_ci", "roofline"}
)


@dataclass(frozen=True)
class ReadReport:
    """One report file: where it came from, the document as written, and its rows."""

    path: str
    document: Mapping[str, Any]
    rows: tuple[Row, ...]


def read_json(path: str | Path, what: str) -> Any:
    """The JSON document at `path` (`what`: "a bisection's JSON"), bounded and strict;
    ConfigError, one line naming the file (and the line or the field)."""
    return read_json_file(path, what)


def read_report(path: str | Path, *, tests: Collection[str] | None = None) -> ReadReport:
    """The report at `path`, every field checked; ConfigError (one line, naming the file and
    the field) when it is not one this plugin wrote. `tests`: the only test ids its results
    may name (a shard's, record/shard_reader.py), None for any."""
    document = read_json_file(path, "a JSON report")
    check_schema(path, document)
    return report_from(path, document, tests)


def report_from(
    path: str | Path, document: Mapping[str, Any], tests: Collection[str] | None = None
) -> ReadReport:
    """The report read from `path` (its schema checked), every field checked and made into
    rows; ConfigError naming the file and the field."""
    check = FieldChecks(str(path))
    check.document(document, tests)
    try:
        rows = tuple(rows_from_json(document))
    except (KeyError, TypeError, ValueError, AttributeError) as problem:
        raise ConfigError(f"{path}: its results cannot be read ({problem!r})") from None
    for n, row in enumerate(rows):  # every field as its class declares it, not only those above
        for field, value, hint in (
            ("measurement", row.measurement, Measurement),
            ("verdict", row.verdict, Verdict),
        ):
            wrong = mistyped(value, hint, f"results[{n}].{field}")
            if wrong:
                raise check.fail(wrong[0], f"expected {wrong[1]}, got {shown(wrong[2])}")
    return ReadReport(path=str(path), document=document, rows=rows)


def check_schema(path: str | Path, document: Any) -> None:
    """ConfigError unless `document` is a report of this plugin's schema at a version this
    reader knows."""
    if not isinstance(document, dict) or document.get("schema") != REPORT_SCHEMA:
        raise ConfigError(
            f"{path}: not a pytest-gpuperf report (written by --gpuperf-json; "
            f'its "schema" is not "{REPORT_SCHEMA}")'
        )
    version = document.get("schema_version")
    if isinstance(version, bool) or version not in READABLE_VERSIONS:
        first, last = READABLE_VERSIONS.start, READABLE_VERSIONS.stop - 1
        raise ConfigError(
            f"{path}: schema_version: a pytest-gpuperf report of schema version "
            f"{shown(version)}; this plugin reads versions {first} to {last} "
            "(docs/json-schema.md)"
        )


def rows_from_json(document: Mapping[str, Any]) -> list[Row]:
    """The rows of a report written by `to_json` (record/json_report.py). Unchecked: a file
    goes through `read_report`, which checks it first."""
    rows = []
    for result in document.get("results", ()):
        fields = {k: v for k, v in result["measurement"].items() if k not in DERIVED_FIELDS}
        rows.append(
            Row(
                test_id=result["test_id"],
                measurement=from_plain(Measurement, fields),
                verdict=from_plain(Verdict, result["verdict"]),
                test_outcome=result.get("test_outcome", ""),
            )
        )
    return rows


def read_bisect(path: str | Path) -> dict[str, Any]:
    """A bisection's result (bisect/render.py `to_json`), every field the dashboard shows
    checked; ConfigError, one line naming the file and the field."""
    document = read_json_file(path, "a bisection's JSON")
    if not isinstance(document, dict) or document.get("schema") != BISECT_SCHEMA:
        raise ConfigError(
            f"{path}: not a bisection's result (gpuperf bisect --json; its "
            f'"schema" is not "{BISECT_SCHEMA}")'
        )
    check = FieldChecks(str(path))
    check.integer(
        document.get("schema_version"),
        "schema_version",
        low=BISECT_SCHEMA_VERSION,
        high=BISECT_SCHEMA_VERSION,
    )
    for name in ("culprit_line", "followed"):
        check.kind(document.get(name, ""), name, (str,))
    for name in ("good", "bad", "culprit"):
        commit = check.kind(document.get(name), name, (dict, type(None)))
        if commit is not None:
            for part in ("sha", "subject"):
                check.kind(commit.get(part, ""), f"{name}.{part}", (str,))
    probes = check.kind(document.get("probes"), "probes", (list,))
    for n, probe in enumerate(probes):
        where = f"probes[{n}]"
        check.kind(probe, where, (dict,))
        for part in ("sha", "subject", "state"):
            check.kind(probe.get(part, ""), f"{where}.{part}", (str,))
        ratio = check.kind(probe.get("ratio"), f"{where}.ratio", (int, float, type(None)))
        if ratio is not None:
            check.number(ratio, f"{where}.ratio", low=0.0, above=True)
        interval = check.kind(probe.get("ratio_ci"), f"{where}.ratio_ci", (list, type(None)))
        if interval is not None:
            if len(interval) != 2:
                raise check.fail(f"{where}.ratio_ci", "not a [low, high] pair")
            low = check.number(interval[0], f"{where}.ratio_ci[0]", low=0.0)
            check.number(interval[1], f"{where}.ratio_ci[1]", low=low)
    return document
