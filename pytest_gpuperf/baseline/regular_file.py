"""A file someone else may have swapped or grown, read without trusting its path: regular
files only (a FIFO is never opened, so it cannot hang the reader), at most a given size, UTF-8
with the line of the first bad byte. The baselines' reader and the JSON reader
(record/json_text.py) both read through it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pytest_gpuperf.errors import BaselineError

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_regular_bytes(path: Path, kind: str, max_bytes: int) -> bytes:
    """The bytes of the regular file at `path`, at most `max_bytes`; a BaselineError naming
    it when it is missing, a directory, a device, a FIFO or larger (`kind`, "a JSON report",
    says what it is not). A FIFO is never opened, so it cannot hang the reader."""
    try:
        status = os.stat(path)
    except OSError as problem:
        raise BaselineError(str(path), f"cannot be read: {problem.strerror}") from None
    _check_node(path, status, kind, max_bytes)
    try:
        # O_NONBLOCK: should a FIFO be swapped in after the check, opening it does not wait
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(path, flags)
    except OSError as problem:
        raise BaselineError(str(path), f"cannot be read: {problem.strerror}") from None
    try:
        _check_node(path, os.fstat(fd), kind, max_bytes)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(max_bytes + 1)
    except OSError as problem:
        raise BaselineError(str(path), f"cannot be read: {problem.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # it grew after the check
        _too_large(path, len(data), kind, max_bytes)
    return data


def decode_utf8(path: Path, data: bytes) -> str:
    """`data` as text (a UTF-8 byte-order mark dropped: Windows editors write one); a
    BaselineError naming the file and the line of the first byte that is not UTF-8."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise BaselineError(
            str(path),
            f"not UTF-8 text (byte {data[error.start]:#04x} at offset {error.start}: "
            f"{error.reason}); fix the file or restore it from git",
            line,
        ) from None


def _check_node(path: Path, status: os.stat_result, kind: str, max_bytes: int) -> None:
    mode = status.st_mode
    if stat.S_ISDIR(mode):
        raise BaselineError(str(path), f"is a directory, not {kind}")
    if not stat.S_ISREG(mode):
        what = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        raise BaselineError(
            str(path),
            f"is {what}, not {kind}; it was not opened. Put a regular file there (or "
            "restore it from git)",
        )
    if status.st_size > max_bytes:
        _too_large(path, status.st_size, kind, max_bytes)


def _too_large(path: Path, size: int, kind: str, max_bytes: int) -> None:
    raise BaselineError(
        str(path),
        f"is {size:,} bytes, more than {kind} may be ({max_bytes:,} bytes); it was not "
        "read. Is it the file you meant? Restore it from git",
    )
