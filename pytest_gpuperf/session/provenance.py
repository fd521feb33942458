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


def run_git(directory: Path, *args: str, timeout_s: float = 10.0, strip: bool = True) -> str | None:
    """git's stdout (stripped unless `strip` is False: `status --porcelain` starts a line with
    a blank that means something), or None when git is missing, fails or hangs."""
    try:
        done = subprocess.run(
            ["git", *args], cwd=directory, capture_output=True, text=True, timeout=timeout_s
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() if strip else done.stdout


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


def save_note(directory: Path, commit: str, sources: Sequence[Path]) -> str:
    """The line a save prints when the commit it records does not hold the code it measured
    ("" when it does, or outside a repository). A later failure explains itself against the
    recorded commit's code: a kernel saved before it was committed then reads "base code not
    available ... does not exist at <commit>", long after the save that could have said so.
    Untracked files count here (the dirtiness the baseline records ignores them)."""
    inside = [
        str(p.resolve().relative_to(directory.resolve()))
        for p in sources
        if p.resolve().is_relative_to(directory.resolve())
    ]
    if not inside or run_git(directory, "rev-parse", "--git-dir") is None:
        return ""
    names = ", ".join(sorted(inside))
    if not commit:
        return (
            f"saved before the repository's first commit: the baselines record no commit, so a "
            f"later failure cannot show the code they were saved from; commit {names} and re-save"
        )
    # -z: one entry a NUL, unquoted; not stripped: the first entry's status may begin with a
    # blank (" M kernels/scale.hip"), and stripping it cut the path's first letter
    status = run_git(
        directory,
        "status",
        "--porcelain",
        "-z",
        "--untracked-files=all",
        "--",
        *sorted(inside),
        strip=False,
    )
    changed = sorted({entry[3:] for entry in _porcelain_entries(status or "")})
    if not changed:
        return ""
    return (
        f"saved at {commit[:12]} + uncommitted changes to {', '.join(changed)}: the base code a "
        f"later failure is explained against is {commit[:12]}'s; commit them and re-save"
    )


def _porcelain_entries(text: str) -> list[str]:
    """`git status --porcelain -z`'s entries ("XY path"), a rename's source path (the word
    after it) left out."""
    words = text.split("\0")
    entries, skip = [], False
    for word in words:
        if skip:
            skip = False
            continue
        if len(word) > 3:
            entries.append(word)
            skip = word[0] in "RC"  # renamed or copied: the next word is where it came from
    return entries
