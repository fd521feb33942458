"""Throwaway git repositories for the tests of --gpuperf-compare, --gpuperf-head and the
bisection, and for the bench scripts' projects: one way to run git (a fixed author and no
signing, so no global configuration is needed) and one way to commit a project's whole tree."""

from __future__ import annotations

import subprocess
from pathlib import Path

AUTHOR = ("-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false")


def git(directory: Path, *args: str) -> str:
    """`git ARGS` in `directory`, its output stripped; a failure raises with git's words."""
    done = subprocess.run(
        ["git", *AUTHOR, *args], cwd=directory, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def commit_all(directory: Path, message: str) -> str:
    """Commit every file of the work tree (making `directory` a repository first if it is
    none); returns the new commit's hash."""
    if not (directory / ".git").exists():
        git(directory, "init", "-q")
    git(directory, "add", "-A")
    git(directory, "commit", "-qm", message)
    return git(directory, "rev-parse", "HEAD")
