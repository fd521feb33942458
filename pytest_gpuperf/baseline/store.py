"""The `baselines/` directory: one TOML file per device key, loaded once and merged on save.

Saving merges into what is on disk under a file lock, re-reading inside the lock so that
pytest-xdist workers saving at once lose nothing, and writes through a temporary file plus
`os.replace` so that a crash leaves the old file whole; the next save removes the temporary a
killed save left. The lock lives in the machine's shared lock folder (shared_lock.py), not
beside the file, so `git add -A` never commits it, and is keyed by the folder's identity, not
its path. A file that does not validate is never
overwritten, and no path is followed through a symbolic link. Every file-system error, lock
timeout and Ctrl-C of a save becomes a BaselineError (or SaveInterrupted) naming the path, the
errno's words and what to do.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from pytest_gpuperf.baseline.file_read import read_store_text
from pytest_gpuperf.baseline.file_write import remove_stale_temporaries, write_whole
from pytest_gpuperf.baseline.model import BaselineEntry
from pytest_gpuperf.baseline.pool import FilePool, boards_of
from pytest_gpuperf.baseline.ref import BaselineRef
from pytest_gpuperf.baseline.schema import SCHEMA_VERSION, parse, render
from pytest_gpuperf.baseline.shared_lock import (
    LockTimeout,
    SharedFileLock,
    ensure_lock_dir,
    lock_dir,
    unreadable_lock,
)
from pytest_gpuperf.baseline.toml_check import Invalid, TOMLDecodeError, toml_error_line
from pytest_gpuperf.errors import (
    BaselineError,
    ConfigError,
    GpuPerfError,
    SaveInterrupted,
    os_error_remedy,
    os_error_words,
)

LOCK_TIMEOUT_S = 120.0
_DEVICE_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
Key = tuple[str, str, str]  # (test id, measurement name, cache mode)
T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class BaselineFile:
    """The validated contents of one baseline file (empty when the file does not exist)."""

    path: Path
    device_key: str
    entries: Mapping[Key, BaselineEntry] = field(default_factory=dict)
    schema: int = SCHEMA_VERSION

    def get(self, test_id: str, name: str, cache: str) -> BaselineEntry | None:
        return self.entries.get((test_id, name, cache))

    def __len__(self) -> int:
        return len(self.entries)


class BaselineStore:
    """The baseline directory. Loads are cached per file and revalidated when it changes."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        lock_timeout_s: float = LOCK_TIMEOUT_S,
        shown_from: Path | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.lock_timeout_s = lock_timeout_s
        # The entries the gate sees name their file relative to this (the rootdir): a failure
        # text or a pull-request comment shows baselines/h100-sxm.toml, not the runner's
        # checkout path
        self.shown_from = shown_from
        self._cache: StatCache[BaselineFile] = StatCache()
        self._pools: dict[Path, tuple[BaselineFile, FilePool]] = {}

    def path_for(self, device_key: str) -> Path:
        if not _DEVICE_KEY.match(device_key):
            raise ConfigError(
                f"device key {device_key!r} cannot name a baseline file: use letters, digits "
                "and . _ + - (e.g. 'mi300x', 'h100-sxm')"
            )
        return self.directory / f"{device_key}.toml"

    def check_directory(self) -> None:
        """A baseline directory that is a file or a dangling link stops the run up front."""
        directory = self.directory
        if directory.is_symlink() and not directory.exists():
            raise BaselineError(
                str(directory),
                f"the baseline directory is a symbolic link to {os.readlink(directory)!r}, "
                "which does not exist; remove the link or point --gpuperf-baseline-dir at a "
                "directory",
            )
        if directory.exists() and not directory.is_dir():
            raise BaselineError(
                str(directory),
                "the baseline directory is a file, not a directory; move it away or point "
                "--gpuperf-baseline-dir at a directory",
            )

    def check_writable(self) -> None:
        """Before a --gpuperf-save run measures anything: a baseline directory that cannot be
        written (a read-only mount, no permission) stops it with the path and the errno's
        words, instead of an hour of measurements that cannot be saved. A directory that
        does not exist yet is judged by the nearest one that does (nothing is created)."""
        existing = self.directory
        while not existing.exists() and existing.parent != existing:
            existing = existing.parent
        try:
            if existing == self.directory:
                fd, probe = tempfile.mkstemp(dir=existing, prefix=".gpuperf-probe-")
                os.close(fd)
                os.unlink(probe)
            elif not os.access(existing, os.W_OK | os.X_OK):
                import errno

                code = errno.EROFS if _read_only_mount(existing) else errno.EACCES
                raise OSError(code, os.strerror(code), str(existing))
        except OSError as problem:
            where = problem.filename or existing
            raise BaselineError(
                str(self.directory),
                f"--gpuperf-save cannot write here ({where}: {os_error_words(problem)}); "
                f"{os_error_remedy(problem, elsewhere='--gpuperf-baseline-dir=DIR')}; "
                "nothing was measured",
                short=os_error_words(problem),
            ) from None

    def device_keys(self) -> list[str]:
        """Devices that have a baseline file here, sorted."""
        if not self.directory.is_dir():
            return []
        return sorted(p.stem for p in self.directory.glob("*.toml") if _DEVICE_KEY.match(p.stem))

    def load(self, device_key: str) -> BaselineFile:
        """The device's baselines; BaselineError (file:line) if the file is broken."""
        path = self.path_for(device_key)
        return self._cache.load(
            path,
            read=lambda: _read(path, device_key),
            missing=lambda: BaselineFile(path=path, device_key=device_key),
        )

    def lookup(
        self, device_key: str, test_id: str, name: str, cache: str, *, board: str | None = None
    ) -> BaselineRef | None:
        """The entry as the gate sees it, with the spread the rest of its file lends it, for
        a run on `board` (GPU UUID; "" unknown; None: the board of its latest save)."""
        loaded = self.load(device_key)
        entry = loaded.get(test_id, name, cache)
        if entry is None:
            return None
        pooled = self.pool(loaded).for_entry(entry.key, entry.cache, entry.time_s, boards_of(entry))
        path = self.path_for(device_key)
        if self.shown_from is not None and path.is_relative_to(self.shown_from):
            path = path.relative_to(self.shown_from)
        return entry.to_ref(path, device_key, pooled, board=board)

    def pool(self, loaded: BaselineFile) -> FilePool:
        """The file's poolable histories, summarised once per loaded version of the file."""
        cached = self._pools.get(loaded.path)
        if cached is None or cached[0] is not loaded:
            cached = (loaded, FilePool(loaded.entries.values()))
            self._pools[loaded.path] = cached
        return cached[1]

    def devices_with(self, test_id: str, name: str, cache: str) -> list[str]:
        """Device keys that hold a baseline for this measurement, so a test without one on
        this device can say where one exists. A broken file raises rather than hiding."""
        return [key for key in self.device_keys() if self.load(key).get(test_id, name, cache)]

    def save(
        self,
        device_key: str,
        entries: Iterable[BaselineEntry],
        *,
        rebase: Mapping[Key, Callable[[BaselineEntry | None], BaselineEntry]] | None = None,
    ) -> Path:
        """Merge `entries` into the device's file (replacing the same keys, keeping every other
        entry) and write it atomically under its lock (lock_path_for); returns the file's path.

        The file on disk is re-read and validated inside the lock; if it is broken this raises
        BaselineError and leaves it byte-identical. `rebase[key]`, where given, rebuilds that
        entry from the one in the file under the lock (a save appends to the history as it is
        then, so another process's save since this one read the file is kept).
        """
        return self.update(device_key, entries, remove=(), rebase=rebase)

    def update(
        self,
        device_key: str,
        entries: Iterable[BaselineEntry],
        *,
        remove: Iterable[Key],
        rebase: Mapping[Key, Callable[[BaselineEntry | None], BaselineEntry]] | None = None,
    ) -> Path:
        """`save`, also dropping the entries whose keys are in `remove` (pruning orphans)."""
        path = self.path_for(device_key)
        new: dict[Key, BaselineEntry] = {}
        for entry in entries:
            if entry.key in new:
                raise BaselineError(
                    str(path),
                    f"not saved: two new entries for test {entry.test_id!r} measurement "
                    f"{entry.name!r} (cache {entry.cache}); give each measurement in a test "
                    "its own name",
                )
            new[entry.key] = entry
        dropped = set(remove)
        require_tomli_w(path, "baselines")
        self.check_directory()

        def merged_entries() -> Iterable[BaselineEntry]:
            current = _read(path, device_key) if path.exists() else None
            merged = dict(current.entries) if current else {}
            for key in dropped:
                merged.pop(key, None)
            for key, entry in new.items():
                rebuild = (rebase or {}).get(key)
                merged[key] = rebuild(merged.get(key)) if rebuild is not None else entry
            return merged.values()

        write_merged(
            path,
            device_key,
            merged_entries,
            render,
            parse,
            what="baselines",
            lock_timeout_s=self.lock_timeout_s,
        )
        self._cache.forget(path)
        return path

    def read_now(self, device_key: str) -> BaselineFile:
        """The device's file as it is on disk now, without its lock (read_back's fallback
        after a stop: a save renames a whole file into place, so this is one save's)."""
        path = self.path_for(device_key)
        self._cache.forget(path)
        if not path.exists():
            return BaselineFile(path=path, device_key=device_key)
        return _read(path, device_key)

    def read_back(self, device_key: str) -> BaselineFile:
        """The device's file as it is on disk now, read under its lock (no save of another
        process is half-done): what a run checks its saves against before calling them made.
        BaselineError when it cannot be locked or read."""
        path = self.path_for(device_key)
        self._cache.forget(path)
        try:
            lock_path = lock_path_for(path)
        except GpuPerfError as problem:
            raise BaselineError(str(path), f"cannot be read back: {problem}") from None
        try:
            with SharedFileLock(lock_path, timeout_s=self.lock_timeout_s):
                if not path.exists():
                    return BaselineFile(path=path, device_key=device_key)
                return _read(path, device_key)
        except LockTimeout:
            raise BaselineError(
                str(path),
                f"cannot be read back: its lock {lock_path} was not granted within "
                f"{self.lock_timeout_s:.0f} s",
            ) from None
        except OSError as problem:
            raise BaselineError(
                str(path), f"cannot be read back: {os_error_words(problem)}"
            ) from None


# -- shared with the static facts store (pytest_gpuperf/gate/static/store.py) ----------------------


class StatCache(Generic[T]):
    """Parsed files by path, re-read only when the file's mtime, size or inode changed."""

    def __init__(self) -> None:
        self._entries: dict[Path, tuple[tuple[int, int, int], T]] = {}

    def load(self, path: Path, *, read: Callable[[], T], missing: Callable[[], T]) -> T:
        """`read()`'s result for the file at `path`, cached; `missing()` when there is none.
        A dangling symbolic link or an unreadable file is a BaselineError naming it."""
        try:
            status = path.stat()
        except FileNotFoundError:
            self.forget(path)
            if path.is_symlink():
                raise BaselineError(
                    str(path), "is a symbolic link to a file that does not exist; remove it"
                ) from None
            return missing()
        except OSError as problem:
            raise BaselineError(str(path), f"cannot be read: {problem.strerror}") from None
        signature = (status.st_mtime_ns, status.st_size, status.st_ino)
        cached = self._entries.get(path)
        if cached and cached[0] == signature:
            return cached[1]
        loaded = read()
        self._entries[path] = (signature, loaded)
        return loaded

    def forget(self, path: Path) -> None:
        self._entries.pop(path, None)


def require_tomli_w(path: Path, what: str) -> None:
    """Fail before touching anything when the writer is missing (render() needs it)."""
    try:
        import tomli_w  # noqa: F401
    except ModuleNotFoundError:
        raise BaselineError(
            str(path),
            f"not saved: writing {what} needs tomli-w, which is not installed "
            "(python3 -m pip install tomli-w); nothing was written",
        ) from None


def _holds(path: Path, text: str | None) -> bool:
    """Whether the file at `path` is exactly `text` (what write_whole writes for it)."""
    if text is None:
        return False
    try:
        return path.read_bytes() == text.encode("utf-8")
    except OSError:
        return False


def write_merged(
    path: Path,
    owner: str,
    merged_entries: Callable[[], Iterable[T]],
    render: Callable[[str, Iterable[T]], str],
    parse: Callable[[str, str], object],
    *,
    what: str,
    lock_timeout_s: float,
    invalid: tuple[type[Exception], ...] = (Invalid,),
) -> None:
    """`write_locked` of the file of `owner` (a device key, an arch) holding the entries
    `merged_entries()` gives (it re-reads the file inside the lock): rendered, then parsed
    back before anything is written, so a new entry that the file's own reader would refuse
    (`invalid`) is a BaselineError and the file is left as it was. The one save of both
    stores (baselines, static facts)."""

    def merged_text() -> str:
        text = render(owner, merged_entries())
        try:
            parse(text, owner)
        except invalid as problem:
            raise BaselineError(
                str(path), f"not saved: a new entry is invalid: {problem}"
            ) from None
        return text

    write_locked(path, merged_text, what=what, lock_timeout_s=lock_timeout_s)


def write_locked(
    path: Path, merged_text: Callable[[], str], *, what: str, lock_timeout_s: float
) -> None:
    """Create the folder, then under the file's lock (lock_path_for) write `merged_text()`
    (which re-reads the file inside the lock, merges and validates) atomically, after removing
    the temporaries of this file that a killed save left. No link is followed. A timeout or
    any file-system error is a BaselineError that names the path and says the file was left
    as it was; Ctrl-C is a SaveInterrupted saying whether the file had been replaced."""
    elsewhere = "--gpuperf-baseline-dir=DIR"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as problem:
        raise BaselineError(
            str(path.parent),
            f"not saved: cannot create the directory: {os_error_words(problem)}; "
            f"{os_error_remedy(problem, elsewhere=elsewhere)}",
        ) from None
    _refuse_link(path)
    try:
        lock_path = lock_path_for(path)
    except GpuPerfError as problem:
        raise BaselineError(str(path), f"not saved: {problem}") from None
    phase = "waiting for its lock"  # what Ctrl-C interrupted
    text: str | None = None
    try:
        with SharedFileLock(lock_path, timeout_s=lock_timeout_s):
            phase = "writing it"
            _refuse_link(path)
            remove_stale_temporaries(path)
            text = merged_text()
            write_whole(path, text, new_mode=0o644, durable=True)
    except KeyboardInterrupt:
        # Saved or not is read from the file, not from how far this code got: a stop just
        # after the rename (before any flag could say so) left the new file in place, and the
        # run said "NOT saved" for it
        raise SaveInterrupted(str(path), phase, saved=_holds(path, text)) from None
    except LockTimeout:
        raise BaselineError(
            str(path),
            f"not saved: could not lock {lock_path} within {lock_timeout_s:.0f} s; "
            f"another pytest process is saving {what} (wait for it, then save again); the "
            "file was left as it was",
            short="its lock was not granted in time",
        ) from None
    except PermissionError as problem:
        if phase != "waiting for its lock":
            raise _not_written(path, problem, elsewhere) from None
        # the lock could not be opened: it needs only to be readable (flock), not writable
        raise BaselineError(
            str(path),
            f"not saved: {unreadable_lock(lock_path.parent, (lock_path.name,)) or lock_path}; "
            "the file was left as it was",
            short=os_error_words(problem),
        ) from None
    except OSError as problem:
        raise _not_written(path, problem, elsewhere) from None


def _not_written(path: Path, problem: OSError, elsewhere: str) -> BaselineError:
    """The error of a save the file system refused: what failed, the errno's words, the
    way out."""
    where = problem.filename or path
    what_failed = "cannot write it" if str(where) == str(path) else f"cannot write {where}"
    return BaselineError(
        str(path),
        f"not saved: {what_failed}: {os_error_words(problem)}; "
        f"{os_error_remedy(problem, elsewhere=elsewhere)}; the file was left as it was",
        short=os_error_words(problem),
    )


def lock_path_for(path: Path) -> Path:
    """The lock of a baseline (or static facts) file: in the machine's shared lock folder
    ($GPUPERF_LOCK_DIR, else <tmp>/pytest-gpuperf-locks), so none lies in the project, where
    `git add -A` would commit it. It is named by the file's name and a hash of its folder's
    identity (device and inode), not of a path: one folder reached through two paths (a
    symbolic link, a bind mount, a second mount of one file system) gets one lock, so two saves
    never write it at once and one never removes the other's live temporary. The file itself
    is not the key: each save replaces it (a new inode). A folder that does not exist yet is
    keyed by its absolute path (a save creates it first)."""
    absolute = Path(os.path.abspath(path))
    try:
        folder = os.stat(absolute.parent)
        identity = f"dev={folder.st_dev},ino={folder.st_ino}/{absolute.name}"
    except OSError:
        identity = str(absolute)
    digest = hashlib.sha256(identity.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", absolute.name)
    lock_path = ensure_lock_dir(lock_dir()) / f"save-{name}-{digest}.lock"
    _refuse_link(lock_path)
    return lock_path


def _read_only_mount(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def _refuse_link(path: Path) -> None:
    if path.is_symlink():
        raise BaselineError(
            str(path),
            f"not saved: it is a symbolic link (to {os.readlink(path)!r}); pytest-gpuperf "
            "never writes through one. Remove the link; nothing was written",
        )


def _read(path: Path, device_key: str) -> BaselineFile:
    schema, entries = read_checked(path, "a baseline file", lambda text: parse(text, device_key))
    return BaselineFile(path=path, device_key=device_key, entries=entries, schema=schema)


def read_checked(path: Path, kind: str, parse_text: Callable[[str], R]) -> R:
    """`parse_text` of the file's text; every way it can fail is a BaselineError naming the
    file (and the line, for TOML and schema errors). `kind` says what a directory or a device
    is not. What is not a regular file is never opened (file_read.py)."""
    text = read_store_text(path, kind)
    try:
        return parse_text(text)
    except TOMLDecodeError as error:
        message, line = toml_error_line(error)
        raise BaselineError(
            str(path), f"not valid TOML: {message}. Fix the file or restore it from git", line
        ) from None
    except Invalid as problem:
        raise BaselineError(str(path), *problem.located(text)) from None
    except RecursionError:  # check_nesting's scan missed a way to nest: still one line
        raise BaselineError(
            str(path), "nests too deep to parse; fix the file or restore it from git"
        ) from None
    except (ValueError, MemoryError) as error:  # what the scan did not bound (file_read.py)
        raise BaselineError(
            str(path), f"cannot be parsed ({error}); fix the file or restore it from git"
        ) from None
