"""JSON read from a file or a line someone else wrote, bounded and strict: the one parser of
the package (`json.loads` appears nowhere else).

A report travels as a CI artifact, a line comes from a child process: either may be edited,
damaged or hostile. Python's `json` accepts `NaN` and `Infinity` (a NaN `time_s` compared
"within noise"), lets the last of two equal keys win silently, reads a FIFO forever and a
10 GB file into memory. Here a file is read only when it is a regular file of at most
MAX_JSON_BYTES, a line only up to MAX_LINE_BYTES; a non-finite number and a key given twice
in one object are refused with the path of the field (`results[3].measurement.time_s`); every
refusal is one ConfigError line naming the file (or the source of the line).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pytest_gpuperf.baseline.regular_file import decode_utf8, read_regular_bytes
from pytest_gpuperf.errors import BaselineError, ConfigError

# A report of 1,000 tests with every sample is a few MB; the stores' own bound (a baseline
# file of some 30,000 entries) serves: far beyond any suite, far below what strains a runner.
MAX_JSON_BYTES = 64 * 1024 * 1024
# One line of a child's protocol (a planned launch, a lock record) is well under 1 KB.
MAX_LINE_BYTES = 1024 * 1024


def read_json_file(path: str | Path, what: str) -> Any:
    """The JSON document at `path` (`what`: "a JSON report"), bounded and strict (module
    docstring); ConfigError, one line naming the file (and the line or the field)."""
    try:
        text = decode_utf8(Path(path), read_regular_bytes(Path(path), what, MAX_JSON_BYTES))
    except BaselineError as problem:
        raise ConfigError(str(problem)) from None
    return loads_strict(text, str(path), what)


def loads_strict(text: str, source: str, what: str, *, max_chars: int = MAX_JSON_BYTES) -> Any:
    """`text` parsed as strict JSON: at most `max_chars` characters, every number finite,
    no key twice in one object. ConfigError "SOURCE[:LINE]: ..." (one line) otherwise;
    `source` names where the text came from (a file, "the profiled child's plan")."""
    if len(text) > max_chars:
        raise ConfigError(
            f"{source}: {len(text):,} characters, more than {what} may be ({max_chars:,}); not read"
        )
    odd: list[_Odd] = []

    def constant(name: str) -> _Odd:
        odd.append(_Odd(name))
        return odd[-1]

    def number(literal: str) -> float | _Odd:
        value = float(literal)
        if math.isfinite(value):
            return value
        odd.append(_Odd(literal))  # 1e999
        return odd[-1]

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        made = dict(items)
        if len(made) != len(items):
            keys = [key for key, _ in items]
            twice = next(key for n, key in enumerate(keys) if key in keys[:n])
            made[twice] = _Odd(f"the key {twice!r} is given twice in one object", twice=True)
            odd.append(made[twice])
        return made

    try:
        document = json.loads(
            text, parse_constant=constant, parse_float=number, object_pairs_hook=pairs
        )
    except json.JSONDecodeError as problem:
        last_line = text.rstrip().count("\n") + 1
        json_like = text.lstrip().startswith(("{", "["))  # `hello` is no cut JSON
        ends_early = problem.lineno >= last_line and json_like
        cut = "; the file ends early: truncated?" if ends_early else ""
        raise ConfigError(f"{source}:{problem.lineno}: not {what} ({problem.msg}{cut})") from None
    except RecursionError:
        raise ConfigError(f"{source}: not {what} (nested too deep to parse)") from None
    except ValueError as problem:  # an integer of more than 4,300 digits
        raise ConfigError(f"{source}: not {what} ({problem})") from None
    if odd:
        field, found = _where(document, {id(o) for o in odd}, odd[0])
        if found.twice:
            raise ConfigError(
                f"{source}: {field}: {found.name} (the writer never writes one: the file was "
                "edited or damaged)"
            )
        raise ConfigError(
            f"{source}: {field or 'the document'}: {found.name} is not a number {what} holds "
            "(strict JSON has no Infinity or NaN, and the writer never writes one): the file "
            "was edited or damaged"
        )
    return document


class _Odd:
    """A value strict JSON does not hold, kept in place so its field can be named."""

    def __init__(self, name: str, *, twice: bool = False) -> None:
        self.name, self.twice = name, twice


def _where(value: Any, wanted: set[int], first: _Odd) -> tuple[str, _Odd]:
    """The path of the first of the `wanted` values in `value` and the value
    ("results[3].measurement.time_s"), found without recursion (the document may nest as deep
    as the parser allowed); ("", first) when none is left in it."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        node, path = stack.pop()
        if id(node) in wanted and isinstance(node, _Odd):
            return path, node
        if isinstance(node, dict):
            items = [(item, f"{path}.{key}" if path else str(key)) for key, item in node.items()]
            stack.extend(reversed(items))
        elif isinstance(node, list):
            stack.extend(reversed([(item, f"{path}[{n}]") for n, item in enumerate(node)]))
    return "", first


def loads_line(line: str, source: str, what: str) -> Any:
    """One line of a child process's protocol, strict and bounded (MAX_LINE_BYTES)."""
    return loads_strict(line, source, what, max_chars=MAX_LINE_BYTES)
