"""The commits a bisection searches: GOOD..BAD along BAD's first parents, and which of them
changed a kernel file the tests load (or a header such a file includes).

Only those can have changed the kernels' speed (the tests themselves are the work tree's in
every probe), so they are the only commits measured. Everything here reads git; nothing in
the work tree, the index or the refs is touched.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_gpuperf.errors import GpuPerfError

_INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"(?P<name>[^"]+)"', re.M)
GIT_TIMEOUT_S = 60.0


class RangeError(GpuPerfError):
    """GOOD..BAD cannot be searched (an unknown ref, GOOD not an ancestor of BAD): a usage
    error, said in one line."""


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str

    @property
    def short(self) -> str:
        return self.sha[:12]


def git(toplevel: Path, *args: str) -> str:
    """git's stdout (stripped); RangeError quoting git's first line when it fails."""
    try:
        done = subprocess.run(
            ["git", *args], cwd=toplevel, capture_output=True, text=True, timeout=GIT_TIMEOUT_S
        )
    except (OSError, subprocess.SubprocessError) as failure:
        raise RangeError(f"git {args[0]} failed: {failure}") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        said = lines[0].strip() if lines else f"exit status {done.returncode}"
        raise RangeError(f"git {' '.join(args[:2])}: {said}")
    return done.stdout.strip()


def toplevel_of(start: Path) -> Path:
    try:
        return Path(git(start, "rev-parse", "--show-toplevel")).resolve()
    except RangeError:
        pass
    raise RangeError(f"{start} is not inside a git work tree: there is no history to bisect")


def resolve(toplevel: Path, ref: str, role: str) -> Commit:
    """REF's commit; RangeError naming the argument (GOOD or BAD) when git cannot find it."""
    if not ref or ref.startswith("-") or any(c.isspace() for c in ref):
        raise RangeError(
            f"{role}: expected a git revision (a commit id, a tag, HEAD~40), got {ref!r}"
        )
    try:
        sha = git(toplevel, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except RangeError:
        sha = ""
    if not sha:
        raise RangeError(
            f"{role}: git cannot resolve {ref!r} to a commit in {toplevel} (a typo? a shallow "
            "clone: fetch more history with `git fetch --deepen=N`)"
        )
    return Commit(sha, subject(toplevel, sha))


def subject(toplevel: Path, sha: str) -> str:
    return git(toplevel, "show", "-s", "--format=%s", sha)


def first_parent_range(toplevel: Path, good: Commit, bad: Commit) -> list[Commit]:
    """The commits after GOOD up to BAD along BAD's first parents, oldest first."""
    if good.sha == bad.sha:
        raise RangeError(f"GOOD and BAD are the same commit ({good.short}): nothing to search")
    ancestor = subprocess.run(
        ["git", "merge-base", "--is-ancestor", good.sha, bad.sha],
        cwd=toplevel,
        capture_output=True,
        timeout=GIT_TIMEOUT_S,
        check=False,
    )
    if ancestor.returncode != 0:
        raise RangeError(
            f"GOOD {good.short} is not an ancestor of BAD {bad.short}: the search runs forward "
            "from GOOD to BAD (swap them?)"
        )
    listed = git(
        toplevel,
        "rev-list",
        "--first-parent",
        "--reverse",
        "--format=%H %s",
        f"{good.sha}..{bad.sha}",
    )
    commits = []
    for line in listed.splitlines():
        if line.startswith("commit "):
            continue
        sha, _, text = line.partition(" ")
        commits.append(Commit(sha, text))
    return commits


def kernel_closure(files: Iterable[Path], toplevel: Path) -> list[str]:
    """The kernel files and the quoted headers they include (recursively, found beside the
    including file), each as a path relative to `toplevel`; files outside it (the plugin's
    own kernels and headers) are not in this history and are left out."""
    found: dict[str, None] = {}
    pending = [path.resolve() for path in files]
    seen: set[Path] = set()
    while pending:
        path = pending.pop(0)
        if path in seen:
            continue
        seen.add(path)
        if path.is_relative_to(toplevel):
            found[path.relative_to(toplevel).as_posix()] = None
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for include in _INCLUDE_RE.finditer(text):
            header = (path.parent / include.group("name")).resolve()
            if header.is_file():
                pending.append(header)
    return list(found)


def touching(toplevel: Path, commits: Sequence[Commit], paths: Sequence[str]) -> list[Commit]:
    """The commits that changed any of `paths` against their first parent, in order."""
    if not paths:
        return []
    changed = []
    for commit in commits:
        names = git(
            toplevel,
            "diff-tree",
            "--no-commit-id",
            "--name-only",
            "-r",
            f"{commit.sha}^1",
            commit.sha,
            "--",
            *paths,
        )
        if names:
            changed.append(commit)
    return changed


def uncommitted(toplevel: Path) -> list[str]:
    """The tracked files the work tree changed (staged or not): every probe runs them as they
    are (the tests, conftest.py, the Python they import); only the kernel files and their
    headers are each probed commit's."""
    listed = git(toplevel, "diff", "--name-only", "-z", "HEAD", "--")
    return [name for name in listed.split("\0") if name]
