"""Writing a file whole or not at all: the one writer of the baseline store and the reports.

A temporary beside the file (`.NAME.XXXXXXXX.tmp`, so the same file system), then a rename
over it: a reader sees the old file or the new one, never half of either, and Ctrl-C or a
full disk mid-write leaves the old file and no temporary. The callers differ only in the
knobs: a baseline is fsynced before the rename (it must survive a power cut after the save
said "saved") and a new one gets 0644 (a file meant for git); a report is not fsynced and a
new one gets the umask's mode, as `touch` would give. An existing file keeps its mode.
It sits with the store's reader (file_read.py), below the reports and the static gate's
build cache, so each of them uses it.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from pathlib import Path


def write_whole(
    path: Path, data: str | bytes, *, new_mode: int | None = None, durable: bool = False
) -> None:
    """Write `data` (text as UTF-8 with "\\n" line ends, or bytes as they are) to `path`
    through a temporary and a rename.

    `new_mode`: the mode of a file that did not exist (None: 0o666 less the umask);
    `durable`: fsync the temporary before the rename. The caller has checked what lies at
    `path` (a rename replaces anything but a folder)."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~current_umask() if new_mode is None else new_mode
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        raw = data.encode("utf-8") if isinstance(data, str) else data
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def remove_stale_temporaries(path: Path) -> list[Path]:
    """Remove the temporaries `write_whole` made for `path` that a killed writer left (call
    it where no live writer can own one, e.g. under the file's lock). Returns what it
    removed."""
    pattern = re.compile(rf"^\.{re.escape(path.name)}\.[A-Za-z0-9_]+\.tmp$")
    removed = []
    for candidate in path.parent.iterdir():
        if pattern.match(candidate.name) and not candidate.is_dir():
            with contextlib.suppress(FileNotFoundError):
                candidate.unlink()
                removed.append(candidate)
    return removed


def current_umask() -> int:
    """The process's umask, read without changing it where Linux says it (/proc), else by
    setting and restoring it."""
    with (
        contextlib.suppress(OSError, ValueError),
        open("/proc/self/status", encoding="ascii", errors="replace") as status,
    ):
        for line in status:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
