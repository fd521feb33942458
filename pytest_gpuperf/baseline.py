"""Baseline files: `baselines/<device-key>.toml`, one `[[entry]]` per (test id, measurement).

The files are meant to be read in review and edited by hand, so loading checks everything
(schema version, keys, types, ranges, duplicates) and names the file and line of the first
problem. Saving merges into what is on disk under a file lock, re-reading inside the lock so
that pytest-xdist workers saving at once lose nothing, and writes through a temporary file
plus `os.replace` so that a crash leaves the old file whole. A file that does not validate is
never overwritten. docs/baselines.md documents the layout.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import filelock

from pytest_gpuperf.errors import BaselineError, ConfigError
from pytest_gpuperf.results import CACHE_MODES, BaselineRef, Measurement

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

SCHEMA_VERSION = 1
SOURCES = ("measured", "reported")
# Above 1.5 of the HBM peak a cold or rotating measurement has declared the wrong bytes;
# hot runs may legitimately stream from L2 / Infinity Cache at several times the HBM peak.
MAX_EFFICIENCY = {"cold": 1.5, "rotate": 1.5, "hot": 100.0}
LOCK_TIMEOUT_S = 120.0

_DEVICE_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
_TOML_POSITION = re.compile(r"\(at line (\d+), column \d+\)")
_ENTRY_HEADER = re.compile(r"^\s*\[\[\s*entry\s*\]\]")
_PROVENANCE_HEADER = re.compile(r"^\s*\[\s*entry\s*\.\s*provenance\s*\]")
_ANY_HEADER = re.compile(r"^\s*\[")


@dataclass(frozen=True)
class Provenance:
    """Where a baseline number came from: a run of this plugin, or a published figure.

    `reported_in` names the document and the figure for `source = "reported"` entries
    (e.g. "seeds/mi300x-memory-bound-kernels-blog.txt: vector add 32M fp32, 71.85%").
    """

    when: str = ""  # ISO 8601, UTC
    commit: str = ""
    device_name: str = ""
    backend: str = ""
    simulated: bool = False
    runtime_version: str = ""
    driver_version: str = ""
    plugin_version: str = ""
    samples: int = 0
    reported_in: str = ""
    note: str = ""

    def describe(self, source: str) -> str:
        """One line for failure messages: who measured it, when, on what; or where it was read."""
        if source == "reported":
            text = f"reported in {self.reported_in}"
            return f"{text} ({self.note})" if self.note else text
        head = "simulated" if self.simulated else "measured"
        if self.when:
            head += f" {self.when}"
        if self.device_name:
            head += f" on {self.device_name}"
        versions = [
            self.backend,
            self.runtime_version and f"runtime {self.runtime_version}",
            self.driver_version and f"driver {self.driver_version}",
        ]
        if any(versions):
            head += f" ({', '.join(v for v in versions if v)})"
        parts = [
            head,
            self.commit and f"commit {self.commit[:12]}",
            self.samples and f"{self.samples} samples",
            self.plugin_version and f"pytest-gpuperf {self.plugin_version}",
            self.note,
        ]
        return ", ".join(str(p) for p in parts if p)


@dataclass(frozen=True)
class BaselineEntry:
    """One stored baseline: a measurement of one test's named measurement on one device."""

    test_id: str
    name: str
    efficiency: float
    efficiency_ci: tuple[float, float]
    run_spread: float  # relative run-to-run spread (~95%): 0.07 is +-7% between runs
    bandwidth_bps: float
    time_s: float
    bytes_moved: int
    cache: str
    source: str = "measured"
    kernel: str = ""
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    provenance: Provenance = field(default_factory=Provenance)

    @property
    def key(self) -> tuple[str, str]:
        return (self.test_id, self.name)

    @classmethod
    def from_measurement(
        cls,
        measurement: Measurement,
        test_id: str,
        run_spread: float,
        provenance: Provenance | None = None,
    ) -> BaselineEntry:
        """The entry `--gpuperf-save` writes for a measurement.

        device_name, backend, simulated and samples come from the measurement; `when` and
        `plugin_version` are filled in when the given provenance leaves them empty. Numbers
        are rounded to what the noise justifies, so that re-saving shows small diffs.
        """
        from pytest_gpuperf import __version__

        given = provenance or Provenance()
        stamped = replace(
            given,
            device_name=measurement.device_name,
            backend=measurement.backend,
            simulated=measurement.simulated,
            samples=len(measurement.samples_s),
            when=given.when or utc_now(),
            plugin_version=given.plugin_version or __version__,
        )
        low, high = measurement.efficiency_ci
        return cls(
            test_id=test_id,
            name=measurement.name,
            efficiency=round(measurement.efficiency, 5),
            efficiency_ci=(round(low, 5), round(high, 5)),
            run_spread=round(run_spread, 4),
            bandwidth_bps=_significant(measurement.bandwidth_bps),
            time_s=_significant(measurement.time_s),
            bytes_moved=measurement.bytes_moved,
            cache=measurement.cache,
            source="measured",
            kernel=measurement.kernel,
            grid=measurement.grid,
            block=measurement.block,
            provenance=stamped,
        )

    def to_ref(self, path: str | os.PathLike[str]) -> BaselineRef:
        """The view the verdict works with."""
        return BaselineRef(
            efficiency=self.efficiency,
            efficiency_ci=self.efficiency_ci,
            run_spread=self.run_spread,
            bandwidth_bps=self.bandwidth_bps,
            time_s=self.time_s,
            cache=self.cache,
            source=self.source,
            provenance=self.provenance.describe(self.source),
            path=str(path),
        )


@dataclass(frozen=True)
class BaselineFile:
    """The validated contents of one baseline file (empty when the file does not exist)."""

    path: Path
    device_key: str
    entries: Mapping[tuple[str, str], BaselineEntry] = field(default_factory=dict)

    def get(self, test_id: str, name: str) -> BaselineEntry | None:
        return self.entries.get((test_id, name))

    def __len__(self) -> int:
        return len(self.entries)


class BaselineStore:
    """The `baselines/` directory: one TOML file per device key.

    Loads are cached per file and revalidated when the file changes on disk, so the plugin
    can look up every test without re-parsing.
    """

    def __init__(
        self, directory: str | os.PathLike[str], *, lock_timeout_s: float = LOCK_TIMEOUT_S
    ) -> None:
        self.directory = Path(directory)
        self.lock_timeout_s = lock_timeout_s
        self._cache: dict[Path, tuple[tuple[int, int, int], BaselineFile]] = {}

    def path_for(self, device_key: str) -> Path:
        if not _DEVICE_KEY.match(device_key):
            raise ConfigError(
                f"device key {device_key!r} cannot name a baseline file: use letters, digits "
                "and . _ + - (e.g. 'mi300x', 'h100-sxm')"
            )
        return self.directory / f"{device_key}.toml"

    def device_keys(self) -> list[str]:
        """Devices that have a baseline file here, sorted."""
        if not self.directory.is_dir():
            return []
        return sorted(p.stem for p in self.directory.glob("*.toml") if _DEVICE_KEY.match(p.stem))

    def load(self, device_key: str) -> BaselineFile:
        """The device's baselines; raises BaselineError (file:line) if the file is broken."""
        path = self.path_for(device_key)
        try:
            stat = path.stat()
        except FileNotFoundError:
            self._cache.pop(path, None)
            return BaselineFile(path=path, device_key=device_key)
        signature = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        cached = self._cache.get(path)
        if cached and cached[0] == signature:
            return cached[1]
        loaded = _read(path, device_key)
        self._cache[path] = (signature, loaded)
        return loaded

    def lookup(self, device_key: str, test_id: str, name: str) -> BaselineRef | None:
        entry = self.load(device_key).get(test_id, name)
        return entry.to_ref(self.path_for(device_key)) if entry else None

    def devices_with(self, test_id: str, name: str) -> list[str]:
        """Device keys that hold a baseline for this measurement, so a test without one on
        this device can say where one exists. A broken file raises rather than hiding."""
        return [key for key in self.device_keys() if self.load(key).get(test_id, name)]

    def save(self, device_key: str, entries: Iterable[BaselineEntry]) -> Path:
        """Merge `entries` into the device's file (replacing the same (test id, name), keeping
        every other entry) and write it atomically under `<file>.lock`.

        The file on disk is re-read and validated inside the lock; if it is broken this raises
        BaselineError and leaves it byte-identical.
        """
        path = self.path_for(device_key)
        new: dict[tuple[str, str], BaselineEntry] = {}
        for entry in entries:
            if entry.key in new:
                raise BaselineError(
                    str(path),
                    f"not saved: two new entries for test {entry.test_id!r} measurement "
                    f"{entry.name!r}; give each measurement in a test its own name",
                )
            new[entry.key] = entry
        try:
            import tomli_w  # noqa: F401  (render() uses it; fail before touching anything)
        except ModuleNotFoundError:
            raise BaselineError(
                str(path),
                "not saved: writing baselines needs tomli-w, which is not installed "
                "(python3 -m pip install tomli-w); nothing was written",
            ) from None
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = filelock.FileLock(f"{path}.lock", timeout=self.lock_timeout_s)
        try:
            with lock:
                current = _read(path, device_key) if path.exists() else None
                merged = dict(current.entries) if current else {}
                merged.update(new)
                text = render(device_key, merged.values())
                try:
                    _parse(text, device_key)
                except _Invalid as problem:
                    raise BaselineError(
                        str(path), f"not saved: a new entry is invalid: {problem.message}"
                    ) from None
                _atomic_write(path, text)
        except filelock.Timeout:
            raise BaselineError(
                str(path),
                f"not saved: could not lock {path}.lock within {self.lock_timeout_s:.0f} s; "
                "another pytest process is saving baselines (wait for it, then save again)",
            ) from None
        self._cache.pop(path, None)
        return path


def utc_now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def render(device_key: str, entries: Iterable[BaselineEntry]) -> str:
    """The file text: a short header, then entries sorted by (test id, name).

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
        "# Saving rewrites the file: comments other than this header are not kept.\n\n"
    )
    return header + _NUMBER_ARRAY.sub(_one_line_array, tomli_w.dumps(document))


# tomli-w puts every array item on its own line; [x, y, z] reads better for the short numeric
# arrays here (grid, block, efficiency_ci). Only arrays of plain numbers are joined.
_NUMBER_ARRAY = re.compile(r"\[\n((?:[ ]+[-+0-9.eE]+,\n)+)\]")


def _one_line_array(match: re.Match[str]) -> str:
    items = [item.strip().rstrip(",") for item in match.group(1).splitlines()]
    return "[" + ", ".join(items) + "]"


# -- reading and validation -----------------------------------------------------------------


class _Invalid(Exception):
    """A schema problem, with a function that finds its line in the text."""

    def __init__(
        self,
        message: str,
        locate: Callable[[_Lines], int | None],
        also: Callable[[_Lines], str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.locate = locate
        self.also = also

    def located(self, text: str) -> tuple[str, int | None]:
        """The message completed with what only the text can say, and its line."""
        lines = _Lines(text)
        message = f"{self.message}; {self.also(lines)}" if self.also else self.message
        return message, self.locate(lines)


def _read(path: Path, device_key: str) -> BaselineFile:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise BaselineError(str(path), f"not UTF-8 text ({error.reason})") from None
    try:
        entries = _parse(text, device_key)
    except tomllib.TOMLDecodeError as error:
        line = getattr(error, "lineno", None) or _toml_error_line(str(error))
        message = _TOML_POSITION.sub("", str(error)).strip()
        raise BaselineError(
            str(path), f"not valid TOML: {message}. Fix the file or restore it from git", line
        ) from None
    except _Invalid as problem:
        raise BaselineError(str(path), *problem.located(text)) from None
    return BaselineFile(path=path, device_key=device_key, entries=entries)


def _toml_error_line(message: str) -> int | None:
    match = _TOML_POSITION.search(message)
    return int(match.group(1)) if match else None


def _parse(text: str, device_key: str) -> dict[tuple[str, str], BaselineEntry]:
    document = tomllib.loads(text)
    top = _Checker(document, "the file", lambda lines: lines.top_key)
    schema = top.required("schema", int)
    if schema != SCHEMA_VERSION:
        newer = (
            " (written by a newer pytest-gpuperf: upgrade it)" if schema > SCHEMA_VERSION else ""
        )
        raise _Invalid(
            f"schema = {schema} is not supported; this pytest-gpuperf reads schema "
            f"{SCHEMA_VERSION}{newer}",
            lambda lines: lines.top_key("schema"),
        )
    device = top.required("device", str)
    if device != device_key:
        raise _Invalid(
            f'device = "{device}" but the file is for device "{device_key}" (its name); '
            "baselines of one device must not be copied to another's file",
            lambda lines: lines.top_key("device"),
        )
    tables = document.get("entry", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise _Invalid("'entry' must be an array of tables ([[entry]])", _at_key("entry"))
    top.reject_unknown({"schema", "device", "entry"})
    entries: dict[tuple[str, str], BaselineEntry] = {}
    first_seen: dict[tuple[str, str], int] = {}
    for index, table in enumerate(tables):
        entry = _entry_from_table(table, index)
        if entry.key in entries:
            first = first_seen[entry.key]
            raise _Invalid(
                f"duplicate entry for test {entry.test_id!r} measurement {entry.name!r} "
                f"(entry #{index + 1} repeats entry #{first + 1}); delete one of them",
                _at_entry_key(index, "id"),
                also=_first_at(first),
            )
        entries[entry.key] = entry
        first_seen[entry.key] = index
    return entries


_ENTRY_KEYS = {
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


def _entry_from_table(table: dict[str, Any], index: int) -> BaselineEntry:
    label = f"entry #{index + 1}"
    if isinstance(table.get("id"), str) and isinstance(table.get("name"), str):
        label += f" (test {table['id']!r}, measurement {table['name']!r})"
    check = _Checker(table, label, lambda lines: lambda key: lines.entry_key(index, key))
    check.reject_unknown(_ENTRY_KEYS)
    test_id = check.required("id", str, nonempty=True)
    name = check.required("name", str, nonempty=True)
    cache = check.required("cache", str)
    if cache not in CACHE_MODES:
        raise check.invalid("cache", f"must be one of {', '.join(CACHE_MODES)}, not {cache!r}")
    limit = MAX_EFFICIENCY[cache]
    efficiency = check.number("efficiency", low=0.0, high=limit, why=f"for cache={cache!r}")
    ci = check.numbers("efficiency_ci", 2, low=0.0, high=limit)
    if ci[0] > ci[1]:
        raise check.invalid("efficiency_ci", f"must be [low, high] with low <= high, got {ci}")
    run_spread = check.number("run_spread", low=0.0, high=1.0, low_inclusive=True)
    bandwidth_bps = check.number("bandwidth_bps", low=0.0)
    time_s = check.number("time_s", low=0.0)
    bytes_moved = check.required("bytes_moved", int)
    if bytes_moved <= 0:
        raise check.invalid("bytes_moved", f"must be a positive integer, got {bytes_moved}")
    source = check.optional("source", str, "measured")
    if source not in SOURCES:
        raise check.invalid("source", f"must be one of {', '.join(SOURCES)}, not {source!r}")
    kernel = check.optional("kernel", str, "")
    grid = check.dim3("grid")
    block = check.dim3("block")
    provenance = _provenance(table.get("provenance", {}), index, label)
    if source == "reported" and not provenance.reported_in:
        raise check.invalid(
            "source",
            'is "reported" but [entry.provenance] has no reported_in naming the document '
            "and figure the number comes from",
        )
    return BaselineEntry(
        test_id=test_id,
        name=name,
        efficiency=efficiency,
        efficiency_ci=(ci[0], ci[1]),
        run_spread=run_spread,
        bandwidth_bps=bandwidth_bps,
        time_s=time_s,
        bytes_moved=bytes_moved,
        cache=cache,
        source=source,
        kernel=kernel,
        grid=grid,
        block=block,
        provenance=provenance,
    )


def _provenance(table: Any, index: int, label: str) -> Provenance:
    if not isinstance(table, dict):
        raise _Invalid(f"{label}: provenance must be a table", _at_entry_key(index, "provenance"))
    check = _Checker(
        table,
        f"{label} provenance",
        lambda lines: lambda key: lines.provenance_key(index, key),
    )
    check.reject_unknown(set(Provenance.__dataclass_fields__))
    values: dict[str, Any] = {}
    for spec in Provenance.__dataclass_fields__.values():
        kind = {"bool": bool, "int": int}.get(str(spec.type), str)
        values[spec.name] = check.optional(spec.name, kind, spec.default)
    if values["samples"] < 0:
        raise check.invalid("samples", f"must be >= 0, got {values['samples']}")
    return Provenance(**values)


class _Checker:
    """Type and range checks on one table, raising _Invalid located at the offending key."""

    def __init__(
        self,
        table: dict[str, Any],
        label: str,
        locator: Callable[[_Lines], Callable[[str], int | None]],
    ) -> None:
        self.table = table
        self.label = label
        self.locator = locator

    def invalid(self, key: str, problem: str) -> _Invalid:
        present = key in self.table
        message = f"{self.label}: '{key}' {problem}"
        return _Invalid(message, lambda lines: self.locator(lines)(key if present else ""))

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

    def numbers(self, key: str, count: int, *, low: float, high: float) -> tuple[float, ...]:
        value = self.required(key, list)
        if len(value) != count or not all(_is(v, float) for v in value):
            raise self.invalid(key, f"must be a list of {count} numbers, got {value!r}")
        for item in value:
            self._range(key, float(item), low, high, False, "")
        return tuple(float(v) for v in value)

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


def _at_key(key: str) -> Callable[[_Lines], int | None]:
    return lambda lines: lines.top_key(key)


def _first_at(index: int) -> Callable[[_Lines], str]:
    return lambda lines: f"the first is at line {lines.entry_key(index, 'id')}"


def _at_entry_key(index: int, key: str) -> Callable[[_Lines], int | None]:
    return lambda lines: lines.entry_key(index, key)


class _Lines:
    """Finds the source line of a key so schema errors can name it.

    Works for the layout `render` writes and for hand edits in the same style
    (`[[entry]]` headers, `[entry.provenance]` sub-tables, `key = value` lines); when a key
    cannot be found the entry's header line is used.
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
        span = self._entry_span(index)
        if span is None:
            return None
        start, end = span
        header = next(
            (i for i in range(start + 1, end) if _PROVENANCE_HEADER.match(self.lines[i])), None
        )
        if header is None:
            return self.entry_key(index, "provenance")
        found = self._key_in(key, header + 1, end) if key else None
        return found if found is not None else header + 1

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


# -- writing --------------------------------------------------------------------------------


def _entry_table(entry: BaselineEntry) -> dict[str, Any]:
    table: dict[str, Any] = {"id": entry.test_id, "name": entry.name}
    if entry.kernel:
        table["kernel"] = entry.kernel
    table.update(
        efficiency=entry.efficiency,
        efficiency_ci=list(entry.efficiency_ci),
        run_spread=entry.run_spread,
        bandwidth_bps=entry.bandwidth_bps,
        time_s=entry.time_s,
        bytes_moved=entry.bytes_moved,
        cache=entry.cache,
    )
    if entry.grid:
        table["grid"] = list(entry.grid)
    if entry.block:
        table["block"] = list(entry.block)
    table["source"] = entry.source
    provenance = {
        name: value
        for name, value in vars(entry.provenance).items()
        if value not in ("", 0, False)  # TOML has no null; defaults are left out
    }
    if provenance:
        table["provenance"] = provenance
    return table


def _atomic_write(path: Path, text: str) -> None:
    """Write a temporary file next to `path`, fsync it, then rename it over `path`."""
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def _significant(value: float, digits: int = 6) -> float:
    return float(f"{value:.{digits}g}")
