"""Checks for the hand-edited TOML files the stores keep, with the line of every problem.

Both stores (timing baselines, baseline/schema.py; static facts, gate/static/store.py) lay their
files out alike: top-level `schema`, an owner key (`device` or `arch`) and `[[entry]]` tables.
`file_entries` checks that frame (`file_text` writes it), `Checker` the type and range of a
table's keys, and `Invalid` carries a problem until `Lines` finds its line in the text.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

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


def file_text(
    header: str, owner_key: str, owner: str, schema: int, tables: Iterable[dict[str, Any]]
) -> str:
    """A store file's text: `header`, then the frame `file_entries` reads back (`schema`,
    `owner_key` = `owner`) and the `[[entry]]` tables.

    tomli-w is imported here, not at module level: only saving writes TOML, so measuring and
    gating work where it is missing (a GPU machine without a package registry)."""
    import tomli_w

    return header + tomli_w.dumps({"schema": schema, owner_key: owner, "entry": list(tables)})


def file_entries(
    document: dict[str, Any],
    owner_key: str,
    owner: str,
    *,
    schema_problem: Callable[[int], str | None],
    owner_problem: Callable[[str], str],
) -> tuple[int, list[dict[str, Any]]]:
    """(schema version, the `[[entry]]` tables) of a store file, once its frame is checked:
    `schema` readable (`schema_problem` says why not, else None), `owner_key` equal to the
    `owner` the file is named after (`owner_problem` words the mismatch), no other top-level
    key. The wording is each store's own."""
    top = Checker(document, "the file", lambda lines: lines.top_key)
    schema = top.required("schema", int)
    problem = schema_problem(schema)
    if problem is not None:
        raise Invalid(problem, lambda lines: lines.top_key("schema"))
    named = top.required(owner_key, str)
    if named != owner:
        raise Invalid(owner_problem(named), lambda lines: lines.top_key(owner_key))
    tables = document.get("entry", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise Invalid("'entry' must be an array of tables ([[entry]])", at_top("entry"))
    top.reject_unknown({"schema", owner_key, "entry"})
    return schema, tables


class Checker:
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


def at_top(key: str) -> Callable[[Lines], int | None]:
    return lambda lines: lines.top_key(key)


def first_at(index: int) -> Callable[[Lines], str]:
    return lambda lines: f"the first is at line {lines.entry_key(index, 'id')}"


def at_entry(index: int, key: str) -> Callable[[Lines], int | None]:
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

    def table_key(self, index: int, name: str, number: int, key: str) -> int | None:
        """The line of `key` in the `number`-th [[entry.<name>]] of entry `index`."""
        header = re.compile(rf"^\s*\[\[\s*entry\.{re.escape(name)}\s*\]\]")
        return self._sub_key(index, header, number, key, name)

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


# A store's file by its content, wherever it is: the header a save writes, or the frame (a
# top-level `schema = N` and an owner key) of one written or edited by hand, even one that
# does not parse (a merge conflict in it).
_STORE_HEADER = re.compile(rb"^# pytest-gpuperf (baselines for device|static facts for) ", re.M)
_SCHEMA_LINE = re.compile(rb"^[ \t]*schema[ \t]*=[ \t]*[0-9]", re.M)
_OWNER_LINE = re.compile(rb"^[ \t]*(device|arch)[ \t]*=[ \t]*[\"']", re.M)
_SNIFF_BYTES = 1 << 20  # the frame is at the top: a save writes it before the first entry


def store_file_kind(path: Any) -> str:
    """'a baseline file' or 'a static facts file' when the regular file at `path` is one of
    the stores' files by its content (its name and folder say nothing: a copy, a
    --gpuperf-baseline-dir, another checkout's), "" when it is not (or cannot be read)."""
    import os
    import stat

    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # never open a device to look (a watchdog)
            return ""
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
        with open(os.open(path, flags), "rb") as held:
            if not stat.S_ISREG(os.fstat(held.fileno()).st_mode):
                return ""
            head = held.read(_SNIFF_BYTES)
    except OSError:
        return ""
    marked = _STORE_HEADER.search(head)
    if not marked and not (_SCHEMA_LINE.search(head) and _OWNER_LINE.search(head)):
        return ""
    owner = marked.group(1) if marked else _OWNER_LINE.search(head).group(1)  # type: ignore[union-attr]
    return "a static facts file" if owner in (b"static facts for", b"arch") else "a baseline file"
