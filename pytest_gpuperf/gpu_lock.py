"""One measurement at a time per GPU, across processes.

Two pytest-xdist workers (or two pytest runs) timing kernels on the same GPU slow each other
down and both record the damage as the kernel's time. A file lock per GPU in the temporary
directory, keyed by the PCI bus id when the runtime reports one (the same GPU seen through
different visible-device masks gets the same lock), else by backend and index, serialises
the measurements while leaving correctness launches free to overlap.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import filelock

from pytest_gpuperf.errors import GpuPerfError
from pytest_gpuperf.runtime.info import DeviceInfo

DEFAULT_TIMEOUT_S = 1800.0  # a long perf suite on another worker may hold the GPU for minutes


def lock_dir() -> Path:
    """`$GPUPERF_LOCK_DIR`, else `<tempdir>/pytest-gpuperf-locks` (shared by all users'
    processes on the machine when the temp dir is)."""
    return Path(
        os.environ.get("GPUPERF_LOCK_DIR") or Path(tempfile.gettempdir()) / "pytest-gpuperf-locks"
    )


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
    """A re-entrant inter-process lock on one GPU; use `with lock.held(what):`."""

    def __init__(
        self,
        info: DeviceInfo,
        *,
        directory: Path | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.key = lock_key(info)
        self.timeout_s = timeout_s
        folder = directory or lock_dir()
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"{self.key}.lock"
        # thread_local=False: the lock belongs to the process, whichever thread measures.
        self._lock = filelock.FileLock(str(self.path), timeout=timeout_s, thread_local=False)

    @contextmanager
    def held(self, what: str = "a measurement") -> Iterator[None]:
        try:
            self._lock.acquire()
        except filelock.Timeout:
            raise GpuPerfError(
                f"{what}: waited {self.timeout_s:.0f} s for the GPU lock {self.path}: another "
                "process (a pytest-xdist worker or another pytest run) kept measuring on the "
                "same GPU; the lock is an OS lock, released when that process ends"
            ) from None
        try:
            yield
        finally:
            self._lock.release()

    @property
    def is_held(self) -> bool:
        return self._lock.is_locked
