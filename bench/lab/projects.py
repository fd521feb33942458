"""Throwaway git projects: the user's repository a script's pytest processes run in, its
base committed and, where a script says so, its head left in the work tree as a pull
request's checkout shows it to --gpuperf-compare."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tests.git_repo import commit_all, git

__all__ = ["commit_all", "git", "write_files", "write_project"]


def write_files(directory: Path, files: Mapping[str, str]) -> None:
    """Each {relative path: text} of `files` under `directory` (folders made as needed)."""
    for name, text in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def write_project(directory: Path, files: Mapping[str, str], message: str) -> str:
    """A new git project of `files` (and a pytest.ini, so that it is pytest's rootdir),
    committed as `message`; returns the commit's hash."""
    directory.mkdir(parents=True)
    write_files(directory, {"pytest.ini": "[pytest]\n", **files})
    return commit_all(directory, message)
