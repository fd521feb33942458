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

import dataclasses
import functools
import json
import math
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_gpuperf.engine.results import CACHE_MODES, Measurement
from pytest_gpuperf.errors import BaselineError, ConfigError
from pytest_gpuperf.record.checks import (
    AB_IMPROVED,
    AB_INCONCLUSIVE,
    AB_MODELLED,
    AB_NO_BASE,
    AB_PASS,
    AB_REGRESSED,
    AB_UNCHANGED,
    IMPROVED,
    NO_BASELINE,
    OTHER_DEVICE,
    REGRESSED,
    WITHIN_NOISE,
)
from pytest_gpuperf.record.verdict import (
    ACCEPTED,
    FAIL,
    MARGINAL,
    MODELLED,
    PASS,
    UNJUDGED,
    Row,
    Verdict,
)

# The most shards of one run. Each shard is one CI runner, and GitHub Actions' matrix makes
# at most 256 jobs per workflow run (GitLab's `parallel:` at most 200); beyond that no CI
# runs the shards, and the plan (one load per shard for every test) and the merge's lines
# grow with N. `--gpuperf-shard` and the merge both refuse more.
MAX_SHARDS = 256

STATUSES = (PASS, FAIL, MARGINAL, UNJUDGED, MODELLED, ACCEPTED)
FLOOR_STATUSES = (PASS, FAIL, MARGINAL)
BASELINE_OUTCOMES = (NO_BASELINE, OTHER_DEVICE, WITHIN_NOISE, REGRESSED, IMPROVED)
AB_STATES = (
    AB_PASS,
    AB_REGRESSED,
    AB_IMPROVED,
    AB_INCONCLUSIVE,
    AB_NO_BASE,
    AB_UNCHANGED,
    AB_MODELLED,
)
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
    one, or not one this merge can believe."""
    from pytest_gpuperf.baseline.file_read import read_store_text
    from pytest_gpuperf.record.json_report import REPORT_SCHEMA, rows_from_json

    try:
        # a FIFO hung the merge, bytes that are not UTF-8 ended in a traceback: read it as the
        # stores read their files (regular files only, bounded, decode errors with their line)
        text = read_store_text(Path(path), "a JSON report")
    except BaselineError as problem:
        raise ConfigError(str(problem)) from None
    try:
        document = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except _NotFinite as problem:
        raise ConfigError(
            f"{path}: {problem} is not a number a report holds (strict JSON has no Infinity or "
            "NaN, and --gpuperf-json never writes one): the file was edited or damaged"
        ) from None
    except (json.JSONDecodeError, RecursionError, ValueError) as problem:
        raise ConfigError(f"{path}: not a JSON report ({problem})") from None
    if not isinstance(document, dict) or document.get("schema") != REPORT_SCHEMA:
        raise ConfigError(
            f"{path}: not a pytest-gpuperf report (written by --gpuperf-json; "
            f'its "schema" is not "{REPORT_SCHEMA}")'
        )
    if not isinstance(document.get("shard"), dict):
        raise ConfigError(
            f'{path}: the report of an unsharded run (no "shard" object); merge the reports '
            "of runs made with --gpuperf-shard=K/N"
        )
    check = _Checker(str(path))
    check.document(document)
    try:
        rows = tuple(rows_from_json(document))
    except (KeyError, TypeError, ValueError, AttributeError) as problem:
        raise ConfigError(f"{path}: its results cannot be read ({problem!r})") from None
    for n, row in enumerate(rows):  # every field as its class declares it, not only those above
        for field, value, hint in (
            ("measurement", row.measurement, Measurement),
            ("verdict", row.verdict, Verdict),
        ):
            wrong = _mistyped(value, hint, f"results[{n}].{field}")
            if wrong:
                raise check.fail(wrong[0], f"expected {wrong[1]}, got {_shown(wrong[2])}")
    return ShardReport(path=str(path), document=document, rows=rows)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _mistyped(value: Any, hint: Any, where: str) -> tuple[str, str, Any] | None:
    """(field, what it should be, what it is) of the first value in `value` that is not of the
    type its dataclass declares (engine/plain.py builds them from plain data without asking:
    a string where a number belongs reached the renderers), or None."""
    if hint is Any:
        return None
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not isinstance(value, hint):
            return where, f"an object ({hint.__name__})", value
        for field in dataclasses.fields(hint):
            wrong = _mistyped(
                getattr(value, field.name), _hints(hint)[field.name], f"{where}.{field.name}"
            )
            if wrong:
                return wrong
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        found = [_mistyped(value, option, where) for option in options]
        return None if any(f is None for f in found) else found[0]
    if origin is tuple:
        if not isinstance(value, tuple):
            return where, "an array", value
        items = args[:1] * len(value) if len(args) == 2 and args[1] is Ellipsis else args
        if len(items) != len(value):
            return where, f"an array of {len(items)}", value
        for n, (item, kind) in enumerate(zip(value, items, strict=True)):
            wrong = _mistyped(item, kind, f"{where}[{n}]")
            if wrong:
                return wrong
        return None
    if origin is dict or hint is dict:
        return None if isinstance(value, dict) else (where, "an object", value)
    if hint is float:  # None: what the writer makes of a number that is not finite
        fits = isinstance(value, (int, float)) and not isinstance(value, bool)
        ok = value is None or (fits and math.isfinite(value))
        return None if ok else (where, "a finite number", value)
    if hint in (int, str, bool):
        fits = isinstance(value, hint) and (hint is bool or not isinstance(value, bool))
        return None if fits else (where, _KIND_NAMES[hint], value)
    return None


class _NotFinite(ValueError):
    pass


def _no_constant(name: str) -> float:
    raise _NotFinite(name)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999
        raise _NotFinite(text)
    return value


class _Checker:
    """The field checks of one file; each failure is a ConfigError 'FILE: FIELD: why'."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, field: str, why: str) -> ConfigError:
        return ConfigError(f"{self.path}: {field}: {why}")

    def document(self, document: Mapping[str, Any]) -> None:
        shard = document["shard"]
        tests = self.shard(shard)
        for name in ("commit", "suite", "compare", "timing"):
            self.kind(document.get(name), f"{name}", (dict, type(None)))
        commit = document.get("commit") or {}
        self.kind(commit.get("id"), "commit.id", (str, type(None)))
        self.kind(commit.get("dirty", False), "commit.dirty", (bool,))
        suite = document.get("suite") or {}
        self.number(suite.get("target", 0.0), "suite.target", low=0.0, high=1.0)
        self.integer(suite.get("checks", 0), "suite.checks")
        timing = document.get("timing") or {}
        for key in ("wall_s", "gpu_lock_held_s"):
            if timing.get(key) is not None:
                self.number(timing[key], f"timing.{key}", low=0.0)
        self.strings(document.get("problems", []), "problems")
        self.kind(document.get("interrupted", False), "interrupted", (bool,))
        self.kind(document.get("rootdir", ""), "rootdir", (str,))
        for name in ("devices", "tests"):
            self.kind(document.get(name, []), name, (list,))
            for n, item in enumerate(document.get(name, [])):
                self.kind(item, f"{name}[{n}]", (dict,))
        for n, device in enumerate(document.get("devices", [])):
            if "key" in device:
                self.kind(device["key"], f"devices[{n}].key", (str,))
            if "peak_bps" in device:
                self.number(device["peak_bps"], f"devices[{n}].peak_bps", low=0.0, above=True)
        for n, test in enumerate(document.get("tests", [])):
            self.kind(test.get("test_id"), f"tests[{n}].test_id", (str,))
        self.results(document.get("results"), tests)

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

    def results(self, results: Any, tests: set[str]) -> None:
        self.kind(results, "results", (list,))
        seen: dict[tuple[str, str, str], int] = {}
        for n, result in enumerate(results):
            where = f"results[{n}]"
            self.kind(result, where, (dict,))
            test_id = result.get("test_id")
            self.kind(test_id, f"{where}.test_id", (str,))
            if test_id not in tests:
                raise self.fail(f"{where}.test_id", f"{test_id!r} is not one of shard.tests")
            measurement = result.get("measurement")
            self.kind(measurement, f"{where}.measurement", (dict,))
            self.measurement(measurement, f"{where}.measurement")
            key = (test_id, str(measurement["name"]), str(measurement["cache"]))
            if key in seen:
                raise self.fail(
                    where,
                    f"{test_id!r} [{key[1]}, {key[2]}] is given twice (also results[{seen[key]}]); "
                    "a run measures each once",
                )
            seen[key] = n
            self.verdict(result.get("verdict"), f"{where}.verdict")

    def measurement(self, m: Mapping[str, Any], where: str) -> None:
        for name in ("name", "kernel", "device_key", "device_name", "backend"):
            self.kind(m.get(name), f"{where}.{name}", (str,))
        self.choice(m.get("cache"), f"{where}.cache", CACHE_MODES)
        self.kind(m.get("simulated"), f"{where}.simulated", (bool,))
        self.integer(m.get("bytes_moved"), f"{where}.bytes_moved", low=0)
        self.number(m.get("time_s"), f"{where}.time_s", low=0.0, above=True)
        self.number(m.get("peak_bps"), f"{where}.peak_bps", low=0.0, above=True)
        interval = self.kind(m.get("time_ci_s"), f"{where}.time_ci_s", (list,))
        if len(interval) != 2:
            raise self.fail(f"{where}.time_ci_s", "not a [low, high] pair")
        low = self.number(interval[0], f"{where}.time_ci_s[0]", low=0.0, above=True)
        self.number(interval[1], f"{where}.time_ci_s[1]", low=low)
        samples = self.kind(m.get("samples_s"), f"{where}.samples_s", (list,))
        for n, sample in enumerate(samples):
            self.number(sample, f"{where}.samples_s[{n}]", low=0.0)

    def verdict(self, verdict: Any, where: str) -> None:
        self.kind(verdict, where, (dict,))
        self.choice(verdict.get("status"), f"{where}.status", STATUSES)
        baseline = verdict.get("baseline")
        self.kind(baseline, f"{where}.baseline", (dict,))
        self.choice(baseline.get("outcome"), f"{where}.baseline.outcome", BASELINE_OUTCOMES)
        for name in ("delta", "allowance"):
            if baseline.get(name) is not None:
                self.number(baseline[name], f"{where}.baseline.{name}")
        reference = baseline.get("baseline")
        if reference is not None:
            self.kind(reference, f"{where}.baseline.baseline", (dict,))
            self.number(
                reference.get("efficiency"),
                f"{where}.baseline.baseline.efficiency",
                low=0.0,
                above=True,
            )
        floor = verdict.get("floor")
        if floor is not None:
            self.kind(floor, f"{where}.floor", (dict,))
            self.number(floor.get("floor"), f"{where}.floor.floor", low=0.0, above=True)
            self.choice(floor.get("status"), f"{where}.floor.status", FLOOR_STATUSES)
        comparison = verdict.get("comparison")
        if comparison is not None:
            self.kind(comparison, f"{where}.comparison", (dict,))
            self.choice(comparison.get("state"), f"{where}.comparison.state", AB_STATES)

    # -- the kinds of value ---------------------------------------------------------------------
    def kind(self, value: Any, field: str, kinds: tuple[type, ...]) -> Any:
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            names = " or ".join(_KIND_NAMES.get(kind, kind.__name__) for kind in kinds)
            raise self.fail(field, f"expected {names}, got {_shown(value)}")
        return value

    def integer(self, value: Any, field: str, *, low: int = 0, high: int | None = None) -> int:
        self.kind(value, field, (int,))
        if value < low or (high is not None and value > high):
            bound = f"from {low} to {high}" if high is not None else f"at least {low}"
            raise self.fail(field, f"expected an integer {bound}, got {value}")
        return int(value)

    def number(
        self,
        value: Any,
        field: str,
        *,
        low: float | None = None,
        high: float | None = None,
        above: bool = False,
    ) -> float:
        self.kind(value, field, (int, float))
        too_low = low is not None and (value <= low if above else value < low)
        if too_low or (high is not None and value > high):
            bound = f"{'above' if above else 'at least'} {low}" if too_low else f"at most {high}"
            raise self.fail(field, f"expected a number {bound}, got {value}")
        return float(value)

    def choice(self, value: Any, field: str, allowed: Iterable[str]) -> str:
        allowed = tuple(allowed)
        if value not in allowed:
            raise self.fail(field, f"{_shown(value)} is not one of {', '.join(map(repr, allowed))}")
        return str(value)

    def strings(self, value: Any, field: str) -> list[str]:
        self.kind(value, field, (list,))
        for n, item in enumerate(value):
            self.kind(item, f"{field}[{n}]", (str,))
        return list(value)

    def unique(self, value: Any, field: str) -> list[str]:
        items = self.strings(value, field)
        seen: set[str] = set()
        for item in items:
            if item in seen:
                raise self.fail(field, f"{item!r} is listed twice")
            seen.add(item)
        return items


_KIND_NAMES = {
    dict: "an object",
    list: "an array",
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    type(None): "null",
}


def _shown(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
