"""The TOML layout of a baseline file: parse and validate (schema 2, and schema 1 migrated on
load), and render.

The files are meant to be read in review and edited by hand, so loading checks everything
(schema version, keys, types, ranges, duplicates) and names the line of the first problem.
docs/baselines.md documents the layout.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any

from pytest_gpuperf.baseline.model import (
    SOURCES,
    SPREAD_BASES,
    BaselineEntry,
    SaveRecord,
)
from pytest_gpuperf.results import CACHE_MODES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

SCHEMA_VERSION = 2
READABLE_SCHEMAS = (1, 2)
# Above 1.5 of the HBM peak a cold or rotating measurement has declared the wrong bytes;
# hot runs may legitimately stream from L2 / Infinity Cache at several times the HBM peak.
MAX_EFFICIENCY = {"cold": 1.5, "rotate": 1.5, "hot": 100.0}

TOMLDecodeError = tomllib.TOMLDecodeError
_ENTRY_HEADER = re.compile(r"^\s*\[\[\s*entry\s*\]\]")
_SAVE_HEADER = re.compile(r"^\s*\[\[\s*entry\s*\.\s*save\s*\]\]")
_PROVENANCE_HEADER = re.compile(r"^\s*\[\s*entry\s*\.\s*provenance\s*\]")
_ANY_HEADER = re.compile(r"^\s*\[")


class Invalid(Exception):
    """A schema problem, with a function that finds its line in the text."""

    def __init__(
        self,
        message: str,
        locate: Callable[[Lines], int | None],
        also: Callable[[Lines], str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.locate = locate
        self.also = also

    def located(self, text: str) -> tuple[str, int | None]:
        """The message completed with what only the text can say, and its line."""
        lines = Lines(text)
        message = f"{self.message}; {self.also(lines)}" if self.also else self.message
        return message, self.locate(lines)


def parse(text: str, device_key: str) -> tuple[int, dict[tuple[str, str, str], BaselineEntry]]:
    """(the file's schema version, its entries by key); raises TOMLDecodeError or Invalid."""
    document = tomllib.loads(text)
    top = _Checker(document, "the file", lambda lines: lines.top_key)
    schema = top.required("schema", int)
    if schema not in READABLE_SCHEMAS:
        newer = (
            " (written by a newer pytest-gpuperf: upgrade it)" if schema > SCHEMA_VERSION else ""
        )
        raise Invalid(
            f"schema = {schema} is not supported; this pytest-gpuperf reads schemas "
            f"{', '.join(map(str, READABLE_SCHEMAS))}{newer}",
            lambda lines: lines.top_key("schema"),
        )
    device = top.required("device", str)
    if device != device_key:
        raise Invalid(
            f'device = "{device}" but the file is for device "{device_key}" (its name); '
            "baselines of one device must not be copied to another's file",
            lambda lines: lines.top_key("device"),
        )
    tables = document.get("entry", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise Invalid("'entry' must be an array of tables ([[entry]])", _at_top("entry"))
    top.reject_unknown({"schema", "device", "entry"})
    read = _entry_v1 if schema == 1 else _entry_v2
    entries: dict[tuple[str, str, str], BaselineEntry] = {}
    first_seen: dict[tuple[str, str, str], int] = {}
    for index, table in enumerate(tables):
        entry = read(table, index)
        if entry.key in entries:
            first = first_seen[entry.key]
            raise Invalid(
                f"duplicate entry for test {entry.test_id!r} measurement {entry.name!r} "
                f"cache {entry.cache!r} (entry #{index + 1} repeats entry #{first + 1}); "
                "delete one of them",
                _at_entry(index, "id"),
                also=_first_at(first),
            )
        entries[entry.key] = entry
        first_seen[entry.key] = index
    return schema, entries


def render(device_key: str, entries: Iterable[BaselineEntry]) -> str:
    """The file text: a short header, then entries sorted by (test id, name, cache).

    tomli-w is imported here, not at module level: only saving writes TOML, so measuring and
    gating work where it is missing (a GPU machine without a package registry)."""
    import tomli_w

    document = {
        "schema": SCHEMA_VERSION,
        "device": device_key,
        "entry": [_entry_table(e) for e in sorted(entries, key=lambda e: e.key)],
    }
    header = (
        f'# pytest-gpuperf baselines for device "{device_key}" (schema {SCHEMA_VERSION}, '
        "docs/baselines.md).\n"
        "# Written by `pytest --gpuperf --gpuperf-save`; hand edits are validated on load.\n"
        "# The gate compares with efficiency; its band pools run_spread's saves with the\n"
        "# file's other entries. Each [[entry.save]] is one save of the same code, newest\n"
        "# last. Saving rewrites the file: comments other than this header are not kept.\n\n"
    )
    return header + _NUMBER_ARRAY.sub(_one_line_array, tomli_w.dumps(document))


# tomli-w puts every array item on its own line; [x, y, z] reads better for the short numeric
# arrays here (grid, block, efficiency_ci). Only arrays of plain numbers are joined.
_NUMBER_ARRAY = re.compile(r"\[\n((?:[ ]+[-+0-9.eE]+,\n)+)\]")


def _one_line_array(match: re.Match[str]) -> str:
    items = [item.strip().rstrip(",") for item in match.group(1).splitlines()]
    return "[" + ", ".join(items) + "]"


def _entry_table(entry: BaselineEntry) -> dict[str, Any]:
    table: dict[str, Any] = {"id": entry.test_id, "name": entry.name, "cache": entry.cache}
    if entry.kernel:
        table["kernel"] = entry.kernel
    table.update(
        source=entry.source,
        efficiency=entry.efficiency,
        efficiency_ci=list(entry.efficiency_ci),
        run_spread=entry.run_spread,
        spread_basis=entry.spread_basis,
        bandwidth_bps=entry.bandwidth_bps,
        time_s=entry.time_s,
        bytes_moved=entry.bytes_moved,
    )
    if entry.prior_spread:
        table["prior_spread"] = entry.prior_spread
    if entry.grid:
        table["grid"] = list(entry.grid)
    if entry.block:
        table["block"] = list(entry.block)
    if entry.reported_in:
        table["reported_in"] = entry.reported_in
    if entry.note:
        table["note"] = entry.note
    if entry.saves:
        table["save"] = [_save_table(save) for save in entry.saves]
    return table


def _save_table(save: SaveRecord) -> dict[str, Any]:
    table: dict[str, Any] = {
        "efficiency": save.efficiency,
        "efficiency_ci": list(save.efficiency_ci),
        "time_s": save.time_s,
    }
    for name in _SAVE_OPTIONAL:
        value = getattr(save, name)
        if value not in ("", 0, False):  # TOML has no null; defaults are left out
            table[name] = value
    return table


_SAVE_OPTIONAL = (
    "when",
    "commit",
    "fingerprint",
    "samples",
    "device_name",
    "backend",
    "simulated",
    "runtime_version",
    "driver_version",
    "plugin_version",
    "note",
)


# -- schema 2 ---------------------------------------------------------------------------------

_ENTRY_KEYS_V2 = {
    "id",
    "name",
    "cache",
    "kernel",
    "source",
    "efficiency",
    "efficiency_ci",
    "run_spread",
    "spread_basis",
    "prior_spread",
    "bandwidth_bps",
    "time_s",
    "bytes_moved",
    "grid",
    "block",
    "reported_in",
    "note",
    "save",
}


def _entry_v2(table: dict[str, Any], index: int) -> BaselineEntry:
    check = _entry_checker(table, index)
    check.reject_unknown(_ENTRY_KEYS_V2)
    common = _common_fields(check)
    spread_basis = check.optional("spread_basis", str, "prior")
    if spread_basis not in SPREAD_BASES:
        raise check.invalid(
            "spread_basis", f"must be one of {', '.join(SPREAD_BASES)}, not {spread_basis!r}"
        )
    saves_raw = check.optional("save", list, [])
    if not all(isinstance(s, dict) for s in saves_raw):
        raise check.invalid("save", "must be an array of tables ([[entry.save]])")
    saves = tuple(
        _save_from_table(save, index, number, common["cache"])
        for number, save in enumerate(saves_raw)
    )
    reported_in = check.optional("reported_in", str, "")
    if common["source"] == "reported" and not reported_in:
        raise check.invalid(
            "source",
            'is "reported" but the entry has no reported_in naming the document and figure '
            "the number comes from",
        )
    if common["source"] == "measured" and spread_basis == "history" and len(saves) < 2:
        raise check.invalid(
            "spread_basis", '"history" needs at least two [[entry.save]] tables to learn from'
        )
    prior_spread = (
        check.number("prior_spread", low=0.0, high=1.0, low_inclusive=True)
        if "prior_spread" in table
        else 0.0
    )
    return BaselineEntry(
        **common,
        spread_basis=spread_basis,
        prior_spread=prior_spread,
        saves=saves,
        reported_in=reported_in,
        note=check.optional("note", str, ""),
    )


def _save_from_table(table: dict[str, Any], index: int, number: int, cache: str) -> SaveRecord:
    check = _Checker(
        table,
        f"entry #{index + 1} save #{number + 1}",
        lambda lines: lambda key: lines.save_key(index, number, key),
    )
    known = {"efficiency", "efficiency_ci", "time_s", *_SAVE_OPTIONAL}
    check.reject_unknown(known)
    limit = MAX_EFFICIENCY[cache]
    efficiency = check.number("efficiency", low=0.0, high=limit, why=f"for cache={cache!r}")
    ci = check.interval("efficiency_ci", high=limit)
    values: dict[str, Any] = {}
    for name in _SAVE_OPTIONAL:
        kind = {"samples": int, "simulated": bool}.get(name, str)
        values[name] = check.optional(name, kind, False if kind is bool else kind())
    if values["samples"] < 0:
        raise check.invalid("samples", f"must be >= 0, got {values['samples']}")
    return SaveRecord(
        efficiency=efficiency,
        efficiency_ci=ci,
        time_s=check.number("time_s", low=0.0),
        **values,
    )


# -- schema 1 (read and migrated: each measured entry becomes a history of one save) ----------

_ENTRY_KEYS_V1 = {
    "id",
    "name",
    "kernel",
    "efficiency",
    "efficiency_ci",
    "run_spread",
    "bandwidth_bps",
    "time_s",
    "bytes_moved",
    "cache",
    "grid",
    "block",
    "source",
    "provenance",
}
_PROVENANCE_V1 = {
    "when": str,
    "commit": str,
    "device_name": str,
    "backend": str,
    "simulated": bool,
    "runtime_version": str,
    "driver_version": str,
    "plugin_version": str,
    "samples": int,
    "reported_in": str,
    "note": str,
}


def _entry_v1(table: dict[str, Any], index: int) -> BaselineEntry:
    check = _entry_checker(table, index)
    check.reject_unknown(_ENTRY_KEYS_V1)
    common = _common_fields(check)
    provenance = table.get("provenance", {})
    label = check.label
    if not isinstance(provenance, dict):
        raise Invalid(f"{label}: provenance must be a table", _at_entry(index, "provenance"))
    facts = _Checker(
        provenance,
        f"{label} provenance",
        lambda lines: lambda key: lines.provenance_key(index, key),
    )
    facts.reject_unknown(set(_PROVENANCE_V1))
    values = {
        name: facts.optional(name, kind, False if kind is bool else kind())
        for name, kind in _PROVENANCE_V1.items()
    }
    if values["samples"] < 0:
        raise facts.invalid("samples", f"must be >= 0, got {values['samples']}")
    reported_in = values.pop("reported_in")
    if common["source"] == "reported":
        if not reported_in:
            raise check.invalid(
                "source",
                'is "reported" but [entry.provenance] has no reported_in naming the document '
                "and figure the number comes from",
            )
        return BaselineEntry(**common, reported_in=reported_in, note=values["note"])
    save = SaveRecord(
        efficiency=common["efficiency"],
        efficiency_ci=common["efficiency_ci"],
        time_s=common["time_s"],
        **values,
    )
    return BaselineEntry(**common, saves=(save,))


# -- shared checks -------------------------------------------------------------------------


def _entry_checker(table: dict[str, Any], index: int) -> _Checker:
    label = f"entry #{index + 1}"
    if isinstance(table.get("id"), str) and isinstance(table.get("name"), str):
        label += f" (test {table['id']!r}, measurement {table['name']!r})"
    return _Checker(table, label, lambda lines: lambda key: lines.entry_key(index, key))


def _common_fields(check: _Checker) -> dict[str, Any]:
    test_id = check.required("id", str, nonempty=True)
    name = check.required("name", str, nonempty=True)
    cache = check.required("cache", str)
    if cache not in CACHE_MODES:
        raise check.invalid("cache", f"must be one of {', '.join(CACHE_MODES)}, not {cache!r}")
    limit = MAX_EFFICIENCY[cache]
    efficiency = check.number("efficiency", low=0.0, high=limit, why=f"for cache={cache!r}")
    ci = check.interval("efficiency_ci", high=limit)
    run_spread = check.number("run_spread", low=0.0, high=1.0, low_inclusive=True)
    bytes_moved = check.required("bytes_moved", int)
    if bytes_moved <= 0:
        raise check.invalid("bytes_moved", f"must be a positive integer, got {bytes_moved}")
    source = check.optional("source", str, "measured")
    if source not in SOURCES:
        raise check.invalid("source", f"must be one of {', '.join(SOURCES)}, not {source!r}")
    return {
        "test_id": test_id,
        "name": name,
        "cache": cache,
        "efficiency": efficiency,
        "efficiency_ci": ci,
        "run_spread": run_spread,
        "bandwidth_bps": check.number("bandwidth_bps", low=0.0),
        "time_s": check.number("time_s", low=0.0),
        "bytes_moved": bytes_moved,
        "source": source,
        "kernel": check.optional("kernel", str, ""),
        "grid": check.dim3("grid"),
        "block": check.dim3("block"),
    }


class _Checker:
    """Type and range checks on one table, raising Invalid located at the offending key."""

    def __init__(
        self,
        table: dict[str, Any],
        label: str,
        locator: Callable[[Lines], Callable[[str], int | None]],
    ) -> None:
        self.table = table
        self.label = label
        self.locator = locator

    def invalid(self, key: str, problem: str) -> Invalid:
        present = key in self.table
        message = f"{self.label}: '{key}' {problem}"
        return Invalid(message, lambda lines: self.locator(lines)(key if present else ""))

    def required(self, key: str, kind: type, *, nonempty: bool = False) -> Any:
        if key not in self.table:
            raise self.invalid(key, f"is missing (required, {_kind_name(kind)})")
        return self._typed(key, kind, nonempty)

    def optional(self, key: str, kind: type, default: Any) -> Any:
        return self._typed(key, kind, False) if key in self.table else default

    def _typed(self, key: str, kind: type, nonempty: bool) -> Any:
        value = self.table[key]
        if not _is(value, kind):
            raise self.invalid(key, f"must be {_kind_name(kind)}, got {value!r}")
        if nonempty and not value.strip():
            raise self.invalid(key, "must not be empty")
        return value

    def number(
        self,
        key: str,
        *,
        low: float,
        high: float | None = None,
        low_inclusive: bool = False,
        why: str = "",
    ) -> float:
        value = float(self.required(key, float))
        self._range(key, value, low, high, low_inclusive, why)
        return value

    def interval(self, key: str, *, high: float) -> tuple[float, float]:
        value = self.required(key, list)
        if len(value) != 2 or not all(_is(v, float) for v in value):
            raise self.invalid(key, f"must be a list of 2 numbers, got {value!r}")
        for item in value:
            self._range(key, float(item), 0.0, high, False, "")
        low_value, high_value = float(value[0]), float(value[1])
        if low_value > high_value:
            raise self.invalid(key, f"must be [low, high] with low <= high, got {value}")
        return (low_value, high_value)

    def dim3(self, key: str) -> tuple[int, int, int] | None:
        value = self.optional(key, list, None)
        if value is None:
            return None
        if len(value) != 3 or not all(_is(v, int) and v > 0 for v in value):
            raise self.invalid(key, f"must be [x, y, z] of positive integers, got {value!r}")
        return (value[0], value[1], value[2])

    def _range(
        self,
        key: str,
        value: float,
        low: float,
        high: float | None,
        low_inclusive: bool,
        why: str,
    ) -> None:
        too_low = value < low if low_inclusive else value <= low
        if not math.isfinite(value) or too_low or (high is not None and value > high):
            bracket = "[" if low_inclusive else "("
            bound = f"{bracket}{low:g}, {high:g}]" if high is not None else f"> {low:g}"
            when = f" {why}" if why else ""
            raise self.invalid(key, f"must be in {bound}{when}, got {value!r}")

    def reject_unknown(self, known: set[str]) -> None:
        for key in self.table:
            if key not in known:
                raise self.invalid(
                    key, f"is not a known key (known: {', '.join(sorted(known))}); a typo?"
                )


def _is(value: Any, kind: type) -> bool:
    if isinstance(value, bool):
        return kind is bool
    if kind is float:
        return isinstance(value, (int, float))
    return isinstance(value, kind)


def _kind_name(kind: type) -> str:
    return {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "true or false",
        list: "a list",
    }[kind]


def _at_top(key: str) -> Callable[[Lines], int | None]:
    return lambda lines: lines.top_key(key)


def _first_at(index: int) -> Callable[[Lines], str]:
    return lambda lines: f"the first is at line {lines.entry_key(index, 'id')}"


def _at_entry(index: int, key: str) -> Callable[[Lines], int | None]:
    return lambda lines: lines.entry_key(index, key)


class Lines:
    """Finds the source line of a key so schema errors can name it.

    Works for the layout `render` writes and for hand edits in the same style (`[[entry]]`
    headers, `[[entry.save]]` and `[entry.provenance]` sub-tables, `key = value` lines); when a
    key cannot be found the enclosing header's line is used.
    """

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.entry_starts = [i for i, line in enumerate(self.lines) if _ENTRY_HEADER.match(line)]

    def top_key(self, key: str) -> int | None:
        end = next(
            (i for i, line in enumerate(self.lines) if _ANY_HEADER.match(line)), len(self.lines)
        )
        if not key:
            return 1
        found = self._key_in(key, 0, end)
        if found is not None:
            return found
        header = re.compile(rf"^\s*\[+\s*{re.escape(key)}\s*[\].]")
        return next((i + 1 for i, line in enumerate(self.lines) if header.match(line)), None)

    def entry_key(self, index: int, key: str) -> int | None:
        span = self._entry_span(index)
        if span is None:
            return None
        start, end = span
        body_end = next((i for i in range(start + 1, end) if _ANY_HEADER.match(self.lines[i])), end)
        found = self._key_in(key, start + 1, body_end) if key else None
        return found if found is not None else start + 1

    def provenance_key(self, index: int, key: str) -> int | None:
        return self._sub_key(index, _PROVENANCE_HEADER, 0, key, "provenance")

    def save_key(self, index: int, number: int, key: str) -> int | None:
        return self._sub_key(index, _SAVE_HEADER, number, key, "save")

    def _sub_key(
        self, index: int, header: re.Pattern[str], number: int, key: str, name: str
    ) -> int | None:
        span = self._entry_span(index)
        if span is None:
            return None
        start, end = span
        headers = [i for i in range(start + 1, end) if header.match(self.lines[i])]
        if number >= len(headers):
            return self.entry_key(index, name)
        first = headers[number]
        stop = next((i for i in range(first + 1, end) if _ANY_HEADER.match(self.lines[i])), end)
        found = self._key_in(key, first + 1, stop) if key else None
        return found if found is not None else first + 1

    def _entry_span(self, index: int) -> tuple[int, int] | None:
        if index >= len(self.entry_starts):
            return None
        start = self.entry_starts[index]
        later = self.entry_starts[index + 1 :]
        return start, (later[0] if later else len(self.lines))

    def _key_in(self, key: str, start: int, end: int) -> int | None:
        pattern = re.compile(
            rf"""^\s*(?:{re.escape(key)}|"{re.escape(key)}"|'{re.escape(key)}')\s*="""
        )
        for i in range(start, end):
            if pattern.match(self.lines[i]):
                return i + 1
        return None


def toml_error_line(error: Exception) -> tuple[str, int | None]:
    """(message without its position, line) of a TOMLDecodeError."""
    position = re.compile(r"\(at line (\d+), column \d+\)")
    line = getattr(error, "lineno", None)
    if line is None:
        match = position.search(str(error))
        line = int(match.group(1)) if match else None
    return position.sub("", str(error)).strip(), line
