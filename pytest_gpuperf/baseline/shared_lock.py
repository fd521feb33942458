"""Locks every user of a machine can take: the folder they live in, and the lock itself.

The GPU locks (gpu_lock.py) and the baseline files' save locks (baseline/store.py) live in one
folder shared by every user, like /tmp: created world-writable with the sticky bit (everyone
can add a lock, only its owner can delete it), $GPUPERF_LOCK_DIR or <tmp>/pytest-gpuperf-locks.

The lock is flock(2) on a file of that folder, taken here rather than through filelock's
FileLock: filelock 4.x (4.3.1 checked) refuses a lock file another user owns in a
sticky folder ("lock file belongs to uid 2002"), because that owner could swap the file during
a hold. For these locks that is no threat worth locking users out for: they keep cooperating
measurements apart, and a user who wanted to disturb another's timing could simply measure
without a lock. With filelock 3.20.1 the same folder worked; with 4.x every user but the first
failed every test. So the behaviour is the same with every filelock release pyproject allows.
What filelock guards against that matters here is kept: no path is followed through a symbolic
link (O_NOFOLLOW; CVE-2025-68146), nothing but a regular file is locked, an existing lock file
is opened read-only (flock needs no write access, so a lock file of another user's umask still
works), and a lock whose file was unlinked or replaced while waiting is taken again on the file
now at the path. Where flock(2) does not exist (Windows) filelock's FileLock does the work.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
import time
from pathlib import Path
from types import TracebackType

from pytest_gpuperf.errors import GpuPerfError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LOCK_ENV = "GPUPERF_LOCK_DIR"
POLL_S = 0.05  # how often a waiting process tries again (filelock polls at 0.05 s too)
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NONBLOCK", 0)  # a FIFO planted at the path must not block the open
)


class LockTimeout(GpuPerfError):
    """The lock was not granted within the timeout; `path` is the lock file."""

    def __init__(self, path: Path, timeout_s: float) -> None:
        self.path = path
        self.timeout_s = timeout_s
        super().__init__(f"the lock {path} was not granted within {timeout_s:g} s")


def lock_dir() -> Path:
    """The shared lock folder: `$GPUPERF_LOCK_DIR`, else `<tempdir>/pytest-gpuperf-locks`.

    A relative `$GPUPERF_LOCK_DIR` (after `~` expansion) is taken inside the temp dir
    (`GPUPERF_LOCK_DIR=gpu-locks` is `/tmp/gpu-locks`), never the current directory: a lock
    folder inside a checkout would be committed by `git add -A`, and two checkouts would not
    share their locks."""
    temp = Path(tempfile.gettempdir())
    given = os.environ.get(LOCK_ENV)
    if not given:
        return temp / "pytest-gpuperf-locks"
    folder = Path(os.path.expanduser(given))
    return folder if folder.is_absolute() else temp / folder


def ensure_lock_dir(folder: Path) -> Path:
    """The lock folder, created shared (1777) if missing; a GpuPerfError saying what is wrong
    and the way out when it cannot be used (a file, a symbolic link, a folder this user cannot
    write, a path that cannot be created)."""
    way_out = (
        f"set {LOCK_ENV} to a folder of your own (measurements of other users are then not "
        "kept apart from yours)"
    )
    if folder.is_symlink():
        raise GpuPerfError(
            f"the GPU lock folder {folder} is a symbolic link (to {os.readlink(folder)!r}); "
            f"pytest-gpuperf does not follow one there. Remove it, or {way_out}"
        )
    if folder.exists() and not folder.is_dir():
        raise GpuPerfError(
            f"the GPU lock folder {folder} is a file, not a folder; remove it, or {way_out}"
        )
    if not folder.exists():
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(PermissionError):
                os.chmod(folder, 0o1777)  # like /tmp: everyone can add, only owners remove
        except OSError as problem:
            raise GpuPerfError(
                f"cannot create the GPU lock folder {folder}: {problem.strerror}; {way_out}"
            ) from None
    if not os.access(folder, os.W_OK | os.X_OK):
        status = folder.stat()
        owner = _user_name(status.st_uid)
        raise GpuPerfError(
            f"the GPU lock folder {folder} (owner {owner}, mode "
            f"{stat.S_IMODE(status.st_mode):o}) is not writable by this user; its owner can "
            f"run `chmod 1777 {folder}`, or {way_out}"
        )
    return folder


# The lock files of the shared folder, by what takes them: the GPU locks (gpu_lock.py's
# lock_key: pci-..., hip-0, cuda-0, sim-...) and the baseline files' save locks (store.py).
GPU_LOCK_NAMES = ("pci-*.lock", "hip-*.lock", "cuda-*.lock", "sim-*.lock")
SAVE_LOCK_NAMES = ("save-*.lock",)


def unreadable_lock(folder: Path, names: tuple[str, ...]) -> str:
    """The first lock file of `folder` matching `names` that this user cannot open (a lock
    file another user made 0600, by hand or with an old release), as one line with the way
    out; "" when every one opens. Asked before the first test: found at the lock, it failed
    every test with a traceback, or a save after the whole run had measured."""
    for name in names:
        for path in sorted(folder.glob(name)):
            try:
                fd = os.open(path, _OPEN_FLAGS)
            except PermissionError:
                status = os.lstat(path)
                return (
                    f"the lock file {path} (owner {_user_name(status.st_uid)}, mode "
                    f"{stat.S_IMODE(status.st_mode):o}) cannot be read by this user, and a lock "
                    f"needs only that: its owner can run `chmod 644 {path}` (or remove it), or "
                    f"set {LOCK_ENV} to a folder of your own"
                )
            except OSError:  # a link, a FIFO, gone: the lock's own checks say so
                continue
            os.close(fd)
    return ""


class SharedFileLock:
    """An exclusive, re-entrant, inter-process lock on `path`, takeable by every user.

    Re-entrant within the object (a nested `acquire` counts); released by the OS when the
    process ends, however it ends. `acquire` polls every POLL_S until `timeout_s`, raising
    LockTimeout; Ctrl-C while waiting leaves nothing open."""

    def __init__(self, path: str | os.PathLike[str], *, timeout_s: float) -> None:
        self.path = Path(path)
        self.timeout_s = timeout_s
        self._fd: int | None = None
        self._count = 0
        self._fallback = None
        if fcntl is None:  # pragma: no cover - Windows
            import filelock

            self._fallback = filelock.FileLock(str(path), timeout=timeout_s, thread_local=False)

    @property
    def is_locked(self) -> bool:
        return self._count > 0

    def acquire(self, timeout_s: float | None = None) -> None:
        """Take the lock (or count one more hold of it), waiting at most `timeout_s` (the
        object's when None). LockTimeout when not granted; OSError when the file cannot be
        opened (a link, a file this user may not read)."""
        if self._count:
            self._count += 1
            return
        limit = self.timeout_s if timeout_s is None else timeout_s
        if self._fallback is not None:  # pragma: no cover - Windows
            import filelock

            try:
                self._fallback.acquire(timeout=limit)
            except filelock.Timeout:
                raise LockTimeout(self.path, limit) from None
            self._count = 1
            return
        deadline = time.monotonic() + limit
        while True:
            fd = _open_lock_file(self.path)
            if fd is not None:
                try:
                    if _flock(fd) and _still_at(fd, self.path):
                        self._fd, self._count = fd, 1
                        return
                except BaseException:
                    os.close(fd)
                    raise
                os.close(fd)
            if time.monotonic() >= deadline:
                raise LockTimeout(self.path, limit)
            time.sleep(min(POLL_S, max(deadline - time.monotonic(), 0.0)))

    def release(self) -> None:
        """Undo one `acquire`; the last one unlocks (the file stays for the next taker)."""
        if not self._count:
            return
        self._count -= 1
        if self._count:
            return
        if self._fallback is not None:  # pragma: no cover - Windows
            self._fallback.release()
            return
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the last descriptor drops the flock

    def __enter__(self) -> SharedFileLock:
        self.acquire()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()


def _open_lock_file(path: Path) -> int | None:
    """A read-only descriptor of the regular file at `path`, created (mode 0666) when there
    is none; None when it vanished between two calls (try again). An existing file is opened
    without O_CREAT: in a sticky folder the kernel refuses O_CREAT on another user's file
    (fs.protected_regular), even one mode 0666."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        try:
            fd = os.open(path, _OPEN_FLAGS | os.O_CREAT | os.O_EXCL, 0o666)
        except (FileExistsError, FileNotFoundError):
            return None  # another process created (or removed) it first: open that one
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o666)  # whatever the umask: the next user must be able to take it
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
    except BaseException:
        os.close(fd)
        raise
    return fd


def _flock(fd: int) -> bool:
    """Whether the exclusive lock was granted at once (False: someone holds it)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as problem:
        if problem.errno in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
            return False
        raise
    return True


def _still_at(fd: int, path: Path) -> bool:
    """Whether the locked file is still the one at `path` (its owner may have unlinked or
    replaced it while this process waited: a lock on the old inode would lock nothing)."""
    try:
        now = os.lstat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino)


def _user_name(uid: int) -> str:
    with contextlib.suppress(Exception):
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    return f"uid {uid}"
