"""Whether the report files of a run can be written, asked before any test runs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def unwritable(settings: Any, env: dict[str, str] | None = None) -> str:
    """The first report path that cannot be written, and why ("" when all can).

    Checked at the start of a session: a path found unwritable after an hour of measuring
    would otherwise cost the summary, and the files after it."""
    environment = os.environ if env is None else env
    paths = [
        ("--gpuperf-json", settings.json_path),
        ("--gpuperf-benchmark-json", settings.benchmark_json_path),
        ("--gpuperf-markdown", settings.markdown_path),
    ]
    for option, path in paths:
        if path is not None:
            problem = _problem(Path(path))
            if problem:
                return f"{option}={path}: {problem}; choose a writable path"
    summary = environment.get("GITHUB_STEP_SUMMARY")
    if summary and settings.markdown_path is not None:
        problem = _problem(Path(summary), append=True)
        if problem:
            return (
                f"$GITHUB_STEP_SUMMARY={summary}: {problem}; the Markdown summary is appended "
                "there (unset the variable, or fix the path)"
            )
    return ""


def _problem(path: Path, *, append: bool = False) -> str:
    if path.is_dir():
        return "is a directory"
    if path.exists():
        if not os.access(path, os.W_OK):
            return "is not writable"
        return ""
    if append:
        return "does not exist" if not path.parent.is_dir() else _dir_problem(path.parent)
    parent = path.parent
    while not parent.exists():
        if parent == parent.parent:
            return "has no existing parent directory"
        parent = parent.parent
    return _dir_problem(parent)


def _dir_problem(directory: Path) -> str:
    if not directory.is_dir():
        return f"{directory} is not a directory"
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"its directory {directory} is not writable"
    return ""
