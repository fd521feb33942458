"""The base revision's source tree for an A/B comparison (--gpuperf-compare=REF).

REF is resolved to a commit once per session and its tree is extracted with `git archive`
into a cache directory outside the work tree (keyed by the commit, so it is reused across runs
and shared by pytest-xdist workers under a lock). A tree found there is checked against a fresh
`git archive` before the session uses it: a file edited in the cache (a runner that keeps its
home, a restored CI cache) turned a +61% regression into "-41.5% faster, pass" for every later
pull request against that base, so a tree that differs is extracted again and the run names
what differed. Nothing in the work tree, the index or the repository's refs is touched. A
kernel's base source is the file at the same path relative to the repository's top level,
compiled with its includes as they were at REF.
"""

from __future__ import annotations

import io
import os
import re
import shlex
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

import filelock

from pytest_gpuperf.errors import GpuPerfError
from pytest_gpuperf.record.checks import NO_BASE_FILE, NO_BASE_REF
from pytest_gpuperf.session.provenance import run_git

ARCHIVE_TIMEOUT_S = 300.0
_COMPLETE = ".gpuperf-complete"


class RefUnresolved(GpuPerfError):
    """git cannot resolve --gpuperf-compare's REF to a commit: a configuration error (a typo,
    a ref a shallow clone lacks), not a kernel without a base."""


@dataclass(frozen=True)
class BaseTree:
    """REF's tree, or why there is none (`problem`; `commit` is "" when REF did not resolve)."""

    ref: str
    commit: str = ""
    toplevel: Path | None = None
    root: Path | None = None
    problem: str = ""
    # the cached tree differed from git and was extracted again: what differed, in words
    note: str = ""

    def source_for(self, path: Path) -> tuple[Path | None, str, str]:
        """(the base version of `path`, "", "") or (None, NO_BASE_*, what is missing).

        A file outside the repository is not versioned by it: it is its own base (a kernel
        shipped with the plugin, say) and the comparison will find it unchanged.
        """
        if self.root is None or self.toplevel is None:
            return None, NO_BASE_REF, self.problem
        resolved = path.resolve()
        try:
            relative = resolved.relative_to(self.toplevel)
        except ValueError:
            return resolved, "", ""
        base = self.root / relative
        if not base.is_file():
            return None, NO_BASE_FILE, f"{relative.as_posix()} does not exist at {self.ref}"
        return base, "", ""


def cache_in_checkout(rootdir: Path) -> str:
    """Why `$GPUPERF_CACHE_DIR` cannot be used by this run ("" when it can): a folder inside
    the rootdir or its repository, where the trees of the base revision extracted under it
    would be collected by pytest (their conftest.py run, their tests "import file mismatch")
    and listed by `git status`. Asked only when the variable is set: the default lies in the
    user's cache home."""
    from pytest_gpuperf.runtime.compile import CACHE_ENV, cache_dir

    if not os.environ.get(CACHE_ENV):
        return ""
    folder = cache_dir().resolve()
    toplevel = run_git(rootdir, "rev-parse", "--show-toplevel")
    for checkout in (rootdir.resolve(), *([Path(toplevel).resolve()] if toplevel else [])):
        if folder.is_relative_to(checkout):
            return (
                f"{CACHE_ENV}={os.environ[CACHE_ENV]}: {folder} lies inside the checkout "
                f"{checkout}, where pytest would collect the base revision's tests and "
                "conftest.py extracted there and `git status` lists it; choose a folder "
                "outside it (unset, it is ~/.cache/pytest-gpuperf/kernels)"
            )
    return ""


def resolve_ref(ref: str, start: Path) -> tuple[Path, str]:
    """(the repository's top level, REF's commit); `RefUnresolved` quotes git and says how to
    fetch the ref when git cannot resolve it."""
    toplevel_text = run_git(start, "rev-parse", "--show-toplevel")
    if not toplevel_text:
        raise RefUnresolved(
            f"--gpuperf-compare={ref}: {start} is not inside a git work tree (or git is not "
            "installed), so there is no base revision to compare with"
        )
    toplevel = Path(toplevel_text).resolve()
    commit = run_git(toplevel, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if commit:
        return toplevel, commit
    raise RefUnresolved(
        f"--gpuperf-compare={ref}: git cannot resolve {ref!r} to a commit in {toplevel}: "
        f"{_git_words(toplevel, ref)}. {_fetch_hint(toplevel, ref)}"
    )


def _git_words(toplevel: Path, ref: str) -> str:
    """git's own first line about `ref` ("fatal: ambiguous argument 'orgin/main': unknown
    revision or path not in the working tree.")."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", ref], cwd=toplevel, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError) as failure:
        return str(failure)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return lines[0].strip().rstrip(".") if lines else f"git rev-parse exited {done.returncode}"


def _fetch_hint(toplevel: Path, ref: str) -> str:
    """How to get `ref` (a shallow clone fetches only what it was told to), and the remotes
    there are when `ref` names one that is not."""
    remotes = (run_git(toplevel, "remote") or "").split()
    remote, _, branch = ref.partition("/")
    if branch and remote in remotes:
        fetch = shlex.join(["git", "fetch", "--depth=1", remote, branch])
        return f"A shallow clone? Fetch it first: `{fetch}`"
    hint = "A shallow clone? Fetch it first, e.g. `git fetch --depth=1 origin main` for origin/main"
    if branch and remotes:
        hint = f"There is no remote {remote!r} (remotes: {', '.join(remotes)}); a typo? " + hint
    return hint


def materialise(ref: str, start: Path, cache_root: Path) -> BaseTree:
    """REF's tree for the repository that holds `start`, extracted under `cache_root`; an
    unresolved REF is a BaseTree whose `problem` is RefUnresolved's text and `commit` ""."""
    try:
        toplevel, commit = resolve_ref(ref, start)
    except RefUnresolved as unresolved:
        return BaseTree(ref, problem=str(unresolved))
    target = cache_root / commit
    try:
        changed = _extract(toplevel, commit, target)
    except (OSError, subprocess.SubprocessError, tarfile.TarError) as failure:
        return BaseTree(
            ref,
            commit=commit,
            toplevel=toplevel,
            problem=f"could not extract {ref} ({commit[:12]}) with git archive: {failure}",
        )
    note = ""
    if changed:
        shown = ", ".join(changed[:_NAMED]) + (
            f" and {len(changed) - _NAMED} more" if len(changed) > _NAMED else ""
        )
        note = (
            f"the cached tree of {ref} ({commit[:12]}) in the kernel cache was not git's: {shown}; "
            "it was extracted again, and this run compared with git's (who else writes that "
            "cache?)"
        )
    return BaseTree(ref, commit=commit, toplevel=toplevel, root=target, note=note)


_NAMED = 5  # differing files named before "and N more"


def _extract(toplevel: Path, commit: str, target: Path) -> list[str]:
    """`git archive <commit>` into `target`: other processes wait on the lock and reuse it; a
    half-extracted tree is never seen (extract next to it, then rename). A tree already
    there is compared with the archive first and extracted again when it differs; the files
    that differed are returned ([] when it was git's, or new)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(f"{target}.lock", timeout=ARCHIVE_TIMEOUT_S):
        archive = _archive(toplevel, commit)
        changed: list[str] = []
        if (target / _COMPLETE).exists():
            changed = _differences(archive, target)
            if not changed:
                return []
        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{commit[:12]}-"))
        try:
            if archive:
                with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                    _safe_extract(tar, staging)
            (staging / _COMPLETE).write_text(commit + "\n")
            if target.exists():
                shutil.rmtree(target)
            os.replace(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return changed


def _archive(toplevel: Path, commit: str) -> bytes:
    """The commit's tree as `git archive` makes it (b"" for an empty tree: a first commit
    with no files archives to a tar the reader cannot open, and every kernel then has no
    base)."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit],
        cwd=toplevel,
        capture_output=True,
        timeout=ARCHIVE_TIMEOUT_S,
        check=False,
    )
    if archive.returncode != 0:
        raise subprocess.SubprocessError(archive.stderr.decode(errors="replace").strip())
    if run_git(toplevel, "ls-tree", "--name-only", commit) == "":
        return b""
    return archive.stdout


def _differences(archive: bytes, root: Path) -> list[str]:
    """The paths under `root` that are not as `archive` has them: a file whose bytes differ,
    a link that points elsewhere, anything missing, of another kind or not in the archive
    (a header added where a kernel's include would find it). git archive's own output is the
    reference, so what it does to a file (export-subst, eol) is what the tree should hold."""
    expected = {_COMPLETE}
    found = []
    if archive:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            for member in tar:
                name = member.name.rstrip("/")
                expected.update(parent.as_posix() for parent in Path(name).parents)
                expected.add(name)
                if not _same(tar, member, root / name):
                    found.append(name)
    for folder, dirs, files in os.walk(root):
        for entry in (*dirs, *files):
            name = (Path(folder) / entry).relative_to(root).as_posix()
            if name not in expected:
                found.append(f"{name} (not in git)")
    return sorted(found)


def _same(tar: tarfile.TarFile, member: tarfile.TarInfo, path: Path) -> bool:
    if member.issym():
        return path.is_symlink() and os.readlink(path) == member.linkname
    if path.is_symlink():
        return False
    if member.isdir():
        return path.is_dir()
    if not member.isfile():
        return True  # git archive makes files, folders and links only
    if not path.is_file() or path.stat().st_size != member.size:
        return False
    data = tar.extractfile(member)
    return data is not None and path.read_bytes() == data.read()


def _safe_extract(tar: tarfile.TarFile, destination: Path) -> None:
    """Extract without letting a member escape `destination` (git archive never makes one,
    but the tar reader should not have to trust it)."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(destination, filter="data")
        return
    root = destination.resolve()  # pragma: no cover - Python without extraction filters
    for member in tar.getmembers():
        if not (root / member.name).resolve().is_relative_to(root):
            raise tarfile.TarError(f"unsafe path in archive: {member.name}")
    tar.extractall(destination)


def accept_trailers(start: Path, base_commit: str, head: str = "HEAD") -> list[tuple[str, str]]:
    """(commit, value) of every `Gpuperf-Accept:` trailer of the pull request's own commits,
    newest first; [] outside a repository. The trailer's meaning is gate/accept.py's.

    The pull request's commits (docs/ci.md, "Accepting an intended slowdown"): the commits of
    `base_commit..head` on head's first-parent line (`head` is --gpuperf-head's commit when
    the kernels come from there), less
    - the commits of a merged side branch (a trailer there was written for another change);
    - the commits already on the target branch: CI's test merge (a merge commit whose first
      parent is in the base or on the default branch) is read from its second parent, the pull
      request's head, without what its first parent holds; and what `origin/HEAD` (the
      default branch) holds, when git knows it, so a comparison with an older tag does not
      pick up trailers merged long ago (without origin/HEAD it cannot tell them apart);
    - a commit that a later commit of the pull request reverts (git revert's "This reverts
      commit <sha>."), unless that revert is itself reverted."""
    toplevel = run_git(start, "rev-parse", "--show-toplevel")
    if not toplevel or not base_commit:
        return []
    top = Path(toplevel)
    default = run_git(top, "rev-parse", "--verify", "--quiet", "refs/remotes/origin/HEAD")
    targets = [base_commit, *([default] if default else [])]
    line, excluded = head, targets[1:]
    parents = (run_git(top, "rev-list", "--parents", "-n", "1", head) or "").split()
    if len(parents) == 3 and any(_is_ancestor(top, parents[1], t) for t in targets):
        line, excluded = parents[2], [*excluded, parents[1]]  # CI's test merge
    log = run_git(
        top,
        "log",
        "--first-parent",
        "--format=%H%x1f%(trailers:key=Gpuperf-Accept,valueonly,separator=%x1e)%x1f%B%x1d",
        f"{base_commit}..{line}",
        *(f"^{commit}" for commit in excluded),
        "--",
    )
    records = []
    for record in (log or "").split("\x1d"):
        commit, _, rest = record.strip().partition("\x1f")
        values, _, message = rest.partition("\x1f")
        if commit:
            records.append((commit, values, message))
    reverted: set[str] = set()
    for commit, _, message in records:  # newest first: a reverted revert reverts nothing
        if commit not in reverted:
            reverted.update(_REVERTS.findall(message))
    found = []
    for commit, values, _ in records:
        if commit in reverted:
            continue
        for value in values.split("\x1e"):
            if value.strip():
                found.append((commit, value.strip()))
    return found


# git revert's message names the commit it reverts in full
_REVERTS = re.compile(r"This reverts commit ([0-9a-f]{40})")


def _is_ancestor(top: Path, commit: str, of: str) -> bool:
    """Whether `commit` is `of` or one of its ancestors."""
    return run_git(top, "merge-base", "--is-ancestor", commit, of) is not None
