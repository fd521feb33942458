"""Where a run's numbers come from: the checkout's commit, branch and dirtiness (git facts).

Baselines record the commit of each save and reports name it; both only read these facts.
Empty when git or the repository is absent: provenance is then unknown, never invented.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class GitFacts:
    commit: str = ""
    branch: str = ""
    dirty: bool = False
    commit_time: str = ""

    @property
    def stamp(self) -> str:
        """The commit as provenance records it: '<sha>' or '<sha>-dirty'."""
        return f"{self.commit}-dirty" if self.commit and self.dirty else self.commit


def run_git(directory: Path, *args: str, timeout_s: float = 10.0) -> str | None:
    """git's stdout (stripped), or None when git is missing, fails or hangs."""
    try:
        done = subprocess.run(
            ["git", *args], cwd=directory, capture_output=True, text=True, timeout=timeout_s
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_facts(directory: Path, *, ignore: Sequence[Path] = ()) -> GitFacts:
    """The checkout's commit, branch and dirtiness; empty when git or the repository is absent.

    Changes under `ignore` do not make the tree dirty: saving baselines rewrites the baseline
    files, and the second save of a series must still count as the same, clean code.
    """
    commit = run_git(directory, "rev-parse", "HEAD")
    if not commit:
        return GitFacts()
    excluded = [
        f":(exclude){path.resolve().relative_to(directory.resolve())}"
        for path in ignore
        if path.resolve().is_relative_to(directory.resolve())
        and path.resolve() != directory.resolve()
    ]
    status = run_git(
        directory, "status", "--porcelain", "--untracked-files=no", "--", ":/", *excluded
    )
    return GitFacts(
        commit=commit,
        branch=run_git(directory, "rev-parse", "--abbrev-ref", "HEAD") or "",
        dirty=status is None or bool(status),  # unknown counts as dirty: never combine on it
        commit_time=run_git(directory, "show", "-s", "--format=%cI", "HEAD") or "",
    )
