"""Raw runs: what a script measured, written as JSON with --out and read back with --render
(--replay, --compare, --merge, --plan-from), and the scratch folders the runs are made in.
Raw runs are never committed (docs/benchmarks.md, "Raw runs"): a scratch folder lies in the
system's temporary directory, outside the repository, and goes when the run ends."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def scratch(prefix: str, keep: bool = False) -> Iterator[Path]:
    """A new folder outside the repository, removed however the run ends (unless `keep`)."""
    folder = Path(tempfile.mkdtemp(prefix=f"{prefix}-"))
    try:
        yield folder
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def read_run(path: str | Path) -> dict[str, Any]:
    """A run a bench script wrote with --out, read back. A file that is missing or is not a
    run ends the script with one line naming it, never a traceback: raw runs are kept out of
    the repository, so a path copied from the docs may well be missing."""
    target = Path(path)
    try:
        text = target.read_text()
    except OSError as error:
        raise SystemExit(
            f"{target}: cannot read the run ({error.strerror or error}); raw runs are release "
            "assets and CI artifacts (docs/benchmarks.md, 'Raw runs')"
        ) from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise SystemExit(f"{target}: not a run's JSON (line {error.lineno}: {error.msg})") from None
    if not isinstance(document, dict):
        raise SystemExit(f"{target}: not a run's JSON (a {type(document).__name__}, not an object)")
    return document


def write_json(path: str | Path | None, data: Any) -> None:
    """Write `data` as JSON to `path` (nothing when it is None), atomically: a reader, or a
    run cut off by a timeout, never sees half a file."""
    if path:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.partial")
        partial.write_text(json.dumps(data, indent=2) + "\n")
        os.replace(partial, target)
