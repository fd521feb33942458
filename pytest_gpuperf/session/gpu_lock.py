"""One measurement at a time per GPU, across processes and across users.

Two pytest-xdist workers (or two pytest runs, of one user or of two) timing kernels on the same
GPU slow each other down and both record the damage as the kernel's time. A file lock per GPU,
keyed by the PCI bus id when the runtime reports one (the same GPU seen through different
visible-device masks gets the same lock), else by backend and index, serialises measurements
while leaving correctness launches free to overlap.

The lock folder is shared by every user of the machine, like /tmp (shared_lock.py: its rules,
and why the lock is flock(2) taken there rather than filelock's, which since 4.x locks the
other users out). Whoever holds a lock writes who they are next to it (pid, user, pytest-xdist
worker, what it measures), so a process that waits can say for whom and for how long: every
WAIT_REPORT_S through `notify`, which the pytest layer points at the terminal past its capture.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pytest_gpuperf.baseline.shared_lock import (
    LOCK_ENV,
    LockTimeout,
    SharedFileLock,
    ensure_lock_dir,
    lock_dir,
)
from pytest_gpuperf.errors import ConfigError, GpuPerfError
from pytest_gpuperf.record.json_text import read_json_file
from pytest_gpuperf.runtime.info import DeviceInfo
from pytest_gpuperf.session import executed

DEFAULT_TIMEOUT_S = 1800.0  # a long perf suite on another worker may hold the GPU for minutes
WAIT_REPORT_S = 10.0  # how often a waiting process says whom it waits for


def lock_key(info: DeviceInfo) -> str:
    """'pci-0000-c1-00.0' for a GPU with a PCI bus id, else 'hip-0' / 'sim-mi300x-0'."""
    if info.pci_bus_id:
        raw = f"pci-{info.pci_bus_id}"
    elif info.simulated:
        raw = f"{info.backend}-{info.name}-{info.index}"
    else:
        raw = f"{info.backend}-{info.index}"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", raw.lower()).strip("-")


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
        # one holder record per user: in the sticky folder nobody can replace another's file
        self.holder_path = self.folder / f"{self.key}.{_uid()}.holder"
        self.notify = notify or _to_stderr
        self._lock: SharedFileLock | None = None
        # What this process spent on the lock: held (outermost holds), waited, and how often.
        self.held_s = 0.0
        self.waited_s = 0.0
        self.holds = 0

    def _file_lock(self) -> SharedFileLock:
        if self._lock is None:
            ensure_lock_dir(self.folder)
            # the lock belongs to the process, whichever thread measures
            self._lock = SharedFileLock(self.path, timeout_s=self.timeout_s)
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
            with executed.paused():  # what a test executed is recorded until it is timed
                yield
        finally:
            lock.release()
            if first and not lock.is_locked:
                with contextlib.suppress(OSError):
                    self.holder_path.unlink()
                self.held_s += time.monotonic() - got
                self.waited_s += got - asked
                self.holds += 1

    def _acquire(self, lock: SharedFileLock, what: str) -> None:
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
                lock.acquire(timeout_s=min(WAIT_REPORT_S, self.timeout_s))
                return
            except LockTimeout:
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
                    f"owner can run `chmod 644 {self.path}`, or set {LOCK_ENV} to a folder of "
                    "your own"
                ) from None
            except OSError as problem:  # ELOOP: a link appeared at the lock path
                raise GpuPerfError(
                    f"{what}: cannot open the GPU lock {self.path} ({problem.strerror}); set "
                    f"{LOCK_ENV} to a folder of your own"
                ) from None

    def _write_holder(self, what: str) -> None:
        record = {
            "pid": os.getpid(),
            "what": what,
            "since": time.time(),
            "user": _user(),
            "worker": os.environ.get("PYTEST_XDIST_WORKER", ""),
        }
        with contextlib.suppress(OSError):
            if self.holder_path.is_symlink():
                return
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
            fd = os.open(self.holder_path, flags, 0o644)
            with os.fdopen(fd, "w") as handle:
                json.dump(record, handle)

    def holder(self) -> str:
        """Who holds the lock, as far as the newest holder record of a live process says."""
        newest: dict | None = None
        for path in self.folder.glob(f"{glob_escape(self.key)}.*.holder"):
            with contextlib.suppress(OSError, ValueError, TypeError, ConfigError):
                if path.is_symlink():
                    continue
                record = read_json_file(path, "a GPU lock's holder record")
                if not (isinstance(record, dict) and _alive(int(record["pid"]))):
                    continue
                if newest is None or float(record["since"]) > float(newest["since"]):
                    newest = record
        if newest is None:
            return "another process (a pytest-xdist worker or another pytest run)"
        try:
            held_s = time.time() - float(newest["since"])
            user = f"user {newest['user']}, " if newest.get("user") else ""
            worker = f", pytest-xdist worker {newest['worker']}" if newest.get("worker") else ""
            return f"{user}pid {newest['pid']}{worker} ({newest['what']}) for {held_s:.0f} s"
        except (KeyError, TypeError, ValueError):
            return "another process (a pytest-xdist worker or another pytest run)"

    @property
    def is_held(self) -> bool:
        return self._lock is not None and self._lock.is_locked


def glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


def _uid() -> str:
    return str(os.getuid()) if hasattr(os, "getuid") else "user"


def _alive(pid: int) -> bool:
    """Whether a process `pid` exists on this machine (a killed holder leaves its record)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return pid > 0  # another user's live process
    return True


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
