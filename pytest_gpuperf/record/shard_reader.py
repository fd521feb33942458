"""A shard's JSON report (`--gpuperf-shard=K/N --gpuperf-json`) read for the merge, and checked
before anything in it is believed.

The merge runs in a last CI job on files that travelled as artifacts; a file edited by hand or
written by something else must end in one line naming the file and the field, never in a
traceback (`"time_s": Infinity` divided into the table; `"shard": {"tests": null}` was
iterated) nor in work sized by the file (`"count": 1000000` printed a million "missing"
lines). Every field the merge reads is checked here for its type and range: numbers finite
(strict JSON has no Infinity or NaN, and our writer never writes them), states from the
known sets, no measurement or test listed twice, every result a test of this shard's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.record.report_checks import FieldChecks
from pytest_gpuperf.record.verdict import Row

# The most shards of one run. Each shard is one CI runner, and GitHub Actions' matrix makes
# at most 256 jobs per workflow run (GitLab's `parallel:` at most 200); beyond that no CI
# runs the shards, and the plan (one load per shard for every test) and the merge's lines
# grow with N. `--gpuperf-shard` and the merge both refuse more.
MAX_SHARDS = 256

# How pytest ended a test, as the shard records it (plugin/state.py)
OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")


@dataclass(frozen=True)
class TestOutcome:
    """How pytest ended one test of a shard: `outcome` one of OUTCOMES ("" when the shard
    stopped before it ran) and, for a failure, its one-line message."""

    test_id: str
    outcome: str
    message: str = ""


@dataclass(frozen=True)
class ShardReport:
    """One shard's report as read from its file and checked."""

    path: str
    document: Mapping[str, Any]
    rows: tuple[Row, ...]

    @property
    def shard(self) -> Mapping[str, Any]:
        return self.document["shard"]

    @property
    def index(self) -> int:
        return int(self.shard["index"])

    @property
    def count(self) -> int:
        return int(self.shard["count"])

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"

    @property
    def measured_cost_s(self) -> float:
        """Σ time_s × samples of this run's measurements: the quantity the plan balanced,
        as measured."""
        return sum(row.measurement.time_s * len(row.measurement.samples_s) for row in self.rows)

    def tests(self) -> list[tuple[int, TestOutcome]]:
        """Each of this shard's tests with its place in the suite's collection order."""
        outcomes = self.shard["outcomes"]
        return [
            (position, TestOutcome(test, *_outcome(outcomes.get(test))))
            for test, position in zip(self.shard["tests"], self.shard["positions"], strict=True)
        ]

    def device_key(self) -> str | None:
        """The baseline file's key the shard measured against (`<key>-sim` when simulated)."""
        key = self.shard.get("device_key")
        if key:
            return str(key)
        keys = {
            row.measurement.device_key + ("-sim" if row.measurement.simulated else "")
            for row in self.rows
        }
        return ", ".join(sorted(keys)) or None


def _outcome(record: Mapping[str, Any] | None) -> tuple[str, str]:
    if record is None:
        return "", ""
    return str(record["outcome"]), str(record.get("message") or "")


def read_shard(path: str | Path) -> ShardReport:
    """A shard's report; ConfigError (one line, naming the file and the field) when it is not
    one, or not one this merge can believe. Read by the one reader (record/report_reader.py),
    with the shard's own fields checked first: its results may name only its tests."""
    from pytest_gpuperf.record.json_text import read_json_file
    from pytest_gpuperf.record.report_reader import REPORT_SCHEMA, check_schema, report_from

    document = read_json_file(path, "a JSON report")
    if not isinstance(document, dict) or document.get("schema") != REPORT_SCHEMA:
        check_schema(path, document)  # names what it is not
    if not isinstance(document.get("shard"), dict):
        raise ConfigError(
            f'{path}: the report of an unsharded run (no "shard" object); merge the reports '
            "of runs made with --gpuperf-shard=K/N"
        )
    check_schema(path, document)
    tests = _ShardChecks(str(path)).shard(document["shard"])
    report = report_from(path, document, tests)
    return ShardReport(path=str(path), document=document, rows=report.rows)


class _ShardChecks(FieldChecks):
    """The checks of a shard's own fields (the plan, the outcomes); each failure is a
    ConfigError 'FILE: FIELD: why'."""

    def shard(self, shard: Mapping[str, Any]) -> set[str]:
        count = self.integer(shard.get("count"), "shard.count", low=1)
        if count > MAX_SHARDS:
            raise self.fail(
                "shard.count",
                f"{count} shards is more than any run may have (at most {MAX_SHARDS})",
            )
        self.integer(shard.get("index"), "shard.index", low=1, high=count)
        self.kind(shard.get("digest"), "shard.digest", (str,))
        self.kind(shard.get("device_key"), "shard.device_key", (str, type(None)))
        tests = self.unique(shard.get("tests"), "shard.tests")
        measuring = self.unique(shard.get("measuring"), "shard.measuring")
        if not set(measuring) <= set(tests):
            stray = next(test for test in measuring if test not in tests)
            raise self.fail("shard.measuring", f"{stray!r} is not one of shard.tests")
        self.integer(shard.get("suite_tests"), "shard.suite_tests", low=len(measuring))
        self.kind(shard.get("measured", True), "shard.measured", (bool,))
        self.integer(shard.get("tests_failed", 0), "shard.tests_failed", low=0)
        self.integer(shard.get("exitstatus", 0), "shard.exitstatus", low=0)
        planned = shard.get("planned_cost_s", [])
        self.kind(planned, "shard.planned_cost_s", (list,))
        for n, cost in enumerate(planned):
            self.number(cost, f"shard.planned_cost_s[{n}]", low=0.0)
        if "positions" not in shard or "outcomes" not in shard:
            raise self.fail(
                "shard.positions" if "positions" not in shard else "shard.outcomes",
                "missing: the report of an older pytest-gpuperf, which recorded neither each "
                "test's place nor its outcome; run every shard with this version",
            )
        positions = shard["positions"]
        self.kind(positions, "shard.positions", (list,))
        if len(positions) != len(tests):
            raise self.fail("shard.positions", "not one position for each of shard.tests")
        for n, position in enumerate(positions):
            self.integer(position, f"shard.positions[{n}]", low=0)
        if len(set(positions)) != len(positions):
            raise self.fail("shard.positions", "a position is given twice")
        outcomes = shard["outcomes"]
        self.kind(outcomes, "shard.outcomes", (dict,))
        for test, record in outcomes.items():
            field = f"shard.outcomes[{test!r}]"
            if test not in tests:
                raise self.fail(field, "not one of shard.tests")
            self.kind(record, field, (dict,))
            self.choice(record.get("outcome"), f"{field}.outcome", OUTCOMES)
            self.kind(record.get("message", ""), f"{field}.message", (str,))
        return set(tests)
