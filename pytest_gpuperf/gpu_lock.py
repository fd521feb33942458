"""One measurement at a time per GPU, across processes and across users.

Two pytest-xdist workers (or two pytest runs, of one user or of two) timing kernels on the same
GPU slow each other down and both record the damage as the kernel's time. A file lock per GPU,
keyed by the PCI bus id when the runtime reports one (the same GPU seen through different
visible-device masks gets the same lock), else by backend and index, serialises measurements
while leaving correctness launches free to overlap.

The lock folder is shared by every user of the machine, like /tmp: created world-writable with
the sticky bit, each lock file readable and writable by all (a lock must be takeable by the next
user), and nothing in it is followed through a symbolic link (filelock >= 3.20.1 opens with
O_NOFOLLOW; this module refuses a linked folder). Whoever holds a lock writes who they are next
to it, so a process that waits can say for whom and for how long.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import filelock

from pytest_gpuperf.errors import GpuPerfError
from pytest_gpuperf.runtime.info import DeviceInfo

DEFAULT_TIMEOUT_S = 1800.0  # a long perf suite on another worker may hold the GPU for minutes
WAIT_REPORT_S = 10.0  # how often a waiting process says whom it waits for
LOCK_ENV = "GPUPERF_LOCK_DIR"


def lock_dir() -> Path:
    """`$GPUPERF_LOCK_DIR`, else `<tempdir>/pytest-gpuperf-locks` (shared by all users'
    processes on the machine when the temp dir is)."""
    return Path(os.environ.get(LOCK_ENV) or Path(tempfile.gettempdir()) / "pytest-gpuperf-locks")


def lock_key(info: DeviceInfo) -> str:
    """'pci-0000-c1-00.0' for a GPU with a PCI bus id, else 'hip-0' / 'sim-mi300x-0'."""
    if info.pci_bus_id:
        raw = f"pci-{info.pci_bus_id}"
    elif info.simulated:
        raw = f"{info.backend}-{info.name}-{info.index}"
    else:
        raw = f"{info.backend}-{info.index}"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", raw.lower()).strip("-")


def ensure_lock_dir(folder: Path) -> Path:
    """The lock folder, created shared (1777) if missing; a clear error when it cannot be
    used (a file, a symbolic link, a folder other users cannot write)."""
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
        mode = stat.S_IMODE(folder.stat().st_mode)
        raise GpuPerfError(
            f"the GPU lock folder {folder} (mode {mode:o}) is not writable by this user; the "
            f"user who created it can run `chmod 1777 {folder}`, or {way_out}"
        )
    return folder


class GpuLock:
    """A re-entrant inter-process lock on one GPU; use `with lock.held(what):`.

    Nothing touches the file system until the first measurement: a machine whose lock folder
    is unusable still runs smoke tests and says so only when it must measure.
    """

    def __init__(
        self,
        info: DeviceInfo,
        *,
        directory: Path | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        notify: Callable[[str], None] | None = None,
    ) -> None:
        self.key = lock_key(info)
        self.timeout_s = timeout_s
        self.folder = directory or lock_dir()
        self.path = self.folder / f"{self.key}.lock"
        self.holder_path = self.folder / f"{self.key}.holder"
        self.notify = notify or _to_stderr
        self._lock: filelock.FileLock | None = None
        # What this process spent on the lock: held (outermost holds), waited, and how often.
        self.held_s = 0.0
        self.waited_s = 0.0
        self.holds = 0

    def _file_lock(self) -> filelock.FileLock:
        if self._lock is None:
            ensure_lock_dir(self.folder)
            # thread_local=False: the lock belongs to the process, whichever thread measures.
            self._lock = filelock.FileLock(
                str(self.path), timeout=self.timeout_s, thread_local=False, mode=0o666
            )
        return self._lock

    @contextmanager
    def held(self, what: str = "a measurement") -> Iterator[None]:
        lock = self._file_lock()
        first = not lock.is_locked
        asked = time.monotonic()
        self._acquire(lock, what)
        got = time.monotonic()
        try:
            if first:
                self._write_holder(what)
            yield
        finally:
            lock.release()
            if first and not lock.is_locked:
                with contextlib.suppress(OSError):
                    self.holder_path.unlink()
                self.held_s += time.monotonic() - got
                self.waited_s += got - asked
                self.holds += 1

    def _acquire(self, lock: filelock.FileLock, what: str) -> None:
        if self.path.is_symlink():
            raise GpuPerfError(
                f"{what}: the GPU lock {self.path} is a symbolic link (to "
                f"{os.readlink(self.path)!r}); pytest-gpuperf never opens one (it could truncate "
                f"what it points to). Remove it, or set {LOCK_ENV} to a folder of your own"
            )
        began = time.monotonic()
        reported = 0.0
        while True:
            try:
                lock.acquire(timeout=min(WAIT_REPORT_S, self.timeout_s))
                return
            except filelock.Timeout:
                waited = time.monotonic() - began
                if waited >= self.timeout_s:
                    raise GpuPerfError(
                        f"{what}: waited {self.timeout_s:.0f} s for the GPU lock {self.path}: "
                        f"{self.holder()} kept measuring on the same GPU; the lock is an OS "
                        "lock, released when that process ends"
                    ) from None
                if waited - reported >= WAIT_REPORT_S - 0.5:
                    reported = waited
                    self.notify(
                        f"gpuperf: {what}: waiting {waited:.0f} s for GPU {self.key}, held by "
                        f"{self.holder()}"
                    )
            except PermissionError as problem:
                raise GpuPerfError(
                    f"{what}: cannot open the GPU lock {self.path} ({problem.strerror}); its "
                    f"owner can run `chmod 666 {self.path}`, or set {LOCK_ENV} to a folder of "
                    "your own"
                ) from None
            except OSError as problem:  # ELOOP: a link appeared at the lock path
                raise GpuPerfError(
                    f"{what}: cannot open the GPU lock {self.path} ({problem.strerror}); set "
                    f"{LOCK_ENV} to a folder of your own"
                ) from None

    def _write_holder(self, what: str) -> None:
        record = {"pid": os.getpid(), "what": what, "since": time.time(), "user": _user()}
        with contextlib.suppress(OSError):
            if self.holder_path.is_symlink():
                return
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
            fd = os.open(self.holder_path, flags, 0o644)
            with os.fdopen(fd, "w") as handle:
                json.dump(record, handle)

    def holder(self) -> str:
        """Who holds the lock, as far as its holder file says."""
        try:
            record = json.loads(self.holder_path.read_text())
            held_s = time.time() - float(record["since"])
            user = f"user {record['user']}, " if record.get("user") else ""
            return f"{user}pid {record['pid']} ({record['what']}) for {held_s:.0f} s"
        except (OSError, ValueError, KeyError, TypeError):
            return "another process (a pytest-xdist worker or another pytest run)"

    @property
    def is_held(self) -> bool:
        return self._lock is not None and self._lock.is_locked


def _user() -> str:
    with contextlib.suppress(Exception):
        import getpass

        return getpass.getuser()
    return ""


def _to_stderr(message: str) -> None:
    """Straight to the terminal: pytest captures sys.stderr, and a wait must be seen."""
    stream = sys.__stderr__ or sys.stderr
    with contextlib.suppress(Exception):
        stream.write(message + "\n")
        stream.flush()
