"""A JSON report read back from its file, for the offline commands (merge, publish, compare).

Read as the store reads its files (regular files only, bounded, UTF-8 with the line of a bad
byte: a FIFO once hung the merge), then checked for this plugin's schema and a version this
reader knows, then made into rows. Each failure is one ConfigError line naming the file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_gpuperf.engine.results import Row
from pytest_gpuperf.errors import BaselineError, ConfigError
from pytest_gpuperf.report.json_report import REPORT_SCHEMA, REPORT_SCHEMA_VERSION, rows_from_json

# Version 1 (plugin 0.1) had flat verdict fields that rows_from_json cannot read back.
READABLE_VERSIONS = range(2, REPORT_SCHEMA_VERSION + 1)


@dataclass(frozen=True)
class ReadReport:
    """One report file: where it came from, the document as written, and its rows."""

    path: str
    document: Mapping[str, Any]
    rows: tuple[Row, ...]


def read_json(path: str | Path, what: str) -> Any:
    """The JSON document at `path` (`what`: "a JSON report"); ConfigError, one line naming the
    file and the line, when it cannot be read or parsed (a truncated file said to be one)."""
    from pytest_gpuperf.baseline.file_read import read_store_text

    try:
        text = read_store_text(Path(path), what)
    except BaselineError as problem:
        raise ConfigError(str(problem)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as problem:
        last_line = text.rstrip().count("\n") + 1
        json_like = text.lstrip().startswith(("{", "["))  # `hello` is no cut JSON
        cut = (
            "; the file ends early: truncated?" if problem.lineno >= last_line and json_like else ""
        )
        raise ConfigError(f"{path}:{problem.lineno}: not {what} ({problem.msg}{cut})") from None
    except RecursionError:
        raise ConfigError(f"{path}: not {what} (nested too deep to parse)") from None


def read_report(path: str | Path) -> ReadReport:
    """The report at `path`; ConfigError (one line, naming the file) when it is not one."""
    document = read_json(path, "a JSON report")
    if not isinstance(document, dict) or document.get("schema") != REPORT_SCHEMA:
        raise ConfigError(
            f"{path}: not a pytest-gpuperf report (written by --gpuperf-json; "
            f'its "schema" is not "{REPORT_SCHEMA}")'
        )
    version = document.get("schema_version")
    if isinstance(version, bool) or version not in READABLE_VERSIONS:
        first, last = READABLE_VERSIONS.start, READABLE_VERSIONS.stop - 1
        raise ConfigError(
            f"{path}: a pytest-gpuperf report of schema version {version!r}; this plugin reads "
            f"versions {first} to {last} (docs/json-schema.md)"
        )
    try:
        rows = tuple(rows_from_json(document))
    except (KeyError, TypeError, ValueError, AttributeError) as problem:
        raise ConfigError(f"{path}: its results cannot be read ({problem!r})") from None
    return ReadReport(path=str(path), document=document, rows=rows)
