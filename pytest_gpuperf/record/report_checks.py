"""The field checks of a JSON report (`--gpuperf-json`, the merge's `--json`): every field an
offline command reads, checked for its kind and range before anything in it is believed.

A report may have been edited by hand or written by something else: a field of the wrong kind
must end in one line naming the file and the field (`results[2].measurement.time_s: expected
a number above 0.0, got 0`), never in a traceback out of a renderer (`"commit": []` was
sliced, `"time_s": "x"` divided), nor in a verdict (`"time_s": null` compared "within noise").
Numbers are finite (record/json_text.py refuses NaN and Infinity before this), states come
from the known sets, and a measurement (test, name, cache) is given once.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import types
import typing
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from pytest_gpuperf.engine.results import CACHE_MODES
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.record.checks import AB_STATES, BASELINE_OUTCOMES
from pytest_gpuperf.record.verdict import FAIL, MARGINAL, PASS, STATUSES
from pytest_gpuperf.runtime.compute_peaks import MATH_TYPES

FLOOR_STATUSES = (PASS, FAIL, MARGINAL)


class FieldChecks:
    """The field checks of one file; each failure is a ConfigError 'FILE: FIELD: why'."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, field: str, why: str) -> ConfigError:
        return ConfigError(f"{self.path}: {field}: {why}")

    def document(self, document: Mapping[str, Any], tests: Collection[str] | None = None) -> None:
        """Every top-level field the commands read; `tests`: the only test ids a result may
        name (a shard's), None for any."""
        for name in ("commit", "suite", "compare", "timing", "merge"):
            self.kind(document.get(name), f"{name}", (dict, type(None)))
        for name in ("created", "command", "plugin_version"):
            self.kind(document.get(name, ""), name, (str,))
        commit = document.get("commit") or {}
        for name in ("id", "time", "branch", "project"):
            self.kind(commit.get(name), f"commit.{name}", (str, type(None)))
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
        self.kind(document.get("simulated", False), "simulated", (bool,))
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
            self.strings(test.get("kernel_files", []), f"tests[{n}].kernel_files")
            for name in ("error", "outcome"):
                self.kind(test.get(name, ""), f"tests[{n}].{name}", (str, type(None)))
        self.results(document.get("results"), tests)

    def results(self, results: Any, tests: Collection[str] | None) -> None:
        self.kind(results, "results", (list,))
        seen: dict[tuple[str, str, str], int] = {}
        for n, result in enumerate(results):
            where = f"results[{n}]"
            self.kind(result, where, (dict,))
            test_id = result.get("test_id")
            self.kind(test_id, f"{where}.test_id", (str,))
            if tests is not None and test_id not in tests:
                raise self.fail(f"{where}.test_id", f"{test_id!r} is not one of shard.tests")
            self.kind(result.get("test_outcome", ""), f"{where}.test_outcome", (str,))
            measurement = result.get("measurement")
            self.kind(measurement, f"{where}.measurement", (dict,))
            self.measurement(measurement, f"{where}.measurement")
            key = (test_id, str(measurement["name"]), str(measurement["cache"]))
            if key in seen:
                raise self.fail(
                    where,
                    f"{test_id!r} [{key[1]}, {key[2]}] is given twice (also results[{seen[key]}]);"
                    " a run measures each once",
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
        work = m.get("work")  # schema 4: the declared FLOPs (null or absent: none)
        if work is not None:
            self.kind(work, f"{where}.work", (dict,))
            self.integer(work.get("flops"), f"{where}.work.flops", low=1)
            self.choice(work.get("math"), f"{where}.work.math", MATH_TYPES)
            peak = work.get("peak_flops_per_s")
            self.number(peak, f"{where}.work.peak_flops_per_s", low=0.0, above=True)

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
        for name in ("floor", "flops_floor", "roofline_floor"):  # min_bw, the roofline's
            floor = verdict.get(name)
            if floor is not None:
                self.kind(floor, f"{where}.{name}", (dict,))
                self.number(floor.get("floor"), f"{where}.{name}.floor", low=0.0, above=True)
                self.choice(floor.get("status"), f"{where}.{name}.status", FLOOR_STATUSES)
        comparison = verdict.get("comparison")
        if comparison is not None:
            self.kind(comparison, f"{where}.comparison", (dict,))
            self.choice(comparison.get("state"), f"{where}.comparison.state", AB_STATES)
        acceptance = verdict.get("acceptance")
        if acceptance is not None:
            self.kind(acceptance, f"{where}.acceptance", (dict,))
            for name in ("pattern", "reason", "source"):
                self.kind(acceptance.get(name), f"{where}.acceptance.{name}", (str,))

    # -- the kinds of value ---------------------------------------------------------------------
    def kind(self, value: Any, field: str, kinds: tuple[type, ...]) -> Any:
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            named = [k for k in kinds if not (k is int and float in kinds)]  # a number, once
            names = " or ".join(_KIND_NAMES.get(kind, kind.__name__) for kind in named)
            raise self.fail(field, f"expected {names}, got {shown(value)}")
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
        if not math.isfinite(value):
            raise self.fail(field, f"expected a finite number, got {value}")
        too_low = low is not None and (value <= low if above else value < low)
        if too_low or (high is not None and value > high):
            bound = f"{'above' if above else 'at least'} {low}" if too_low else f"at most {high}"
            raise self.fail(field, f"expected a number {bound}, got {value}")
        return float(value)

    def choice(self, value: Any, field: str, allowed: Iterable[str]) -> str:
        allowed = tuple(allowed)
        if value not in allowed:
            raise self.fail(field, f"{shown(value)} is not one of {', '.join(map(repr, allowed))}")
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


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def mistyped(value: Any, hint: Any, where: str) -> tuple[str, str, Any] | None:
    """(field, what it should be, what it is) of the first value in `value` that is not of the
    type its dataclass declares (engine/plain.py builds them from plain data without asking:
    a string where a number belongs reached the renderers), or None."""
    if hint is Any:
        return None
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not isinstance(value, hint):
            return where, f"an object ({hint.__name__})", value
        for field in dataclasses.fields(hint):
            wrong = mistyped(
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
        found = [mistyped(value, option, where) for option in options]
        return None if any(f is None for f in found) else found[0]
    if origin is tuple:
        if not isinstance(value, tuple):
            return where, "an array", value
        items = args[:1] * len(value) if len(args) == 2 and args[1] is Ellipsis else args
        if len(items) != len(value):
            return where, f"an array of {len(items)}", value
        for n, (item, kind) in enumerate(zip(value, items, strict=True)):
            wrong = mistyped(item, kind, f"{where}[{n}]")
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


_KIND_NAMES = {
    dict: "an object",
    list: "an array",
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    type(None): "null",
}


def shown(value: Any) -> str:
    """A value as the refusal quotes it: JSON, at most 40 characters."""
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
