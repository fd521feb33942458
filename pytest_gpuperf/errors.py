"""The exceptions pytest-gpuperf raises for its users, and the stop a SIGTERM raises.

One base class so callers can catch everything we raise; each subclass carries the
facts a message must name (kernel, file:line, device, what was tried) and the way out.
A stop (Ctrl-C, or SIGTERM raised as Ctrl-C: `stop_on_sigterm`) is a KeyboardInterrupt, not
one of ours; `stop_words` names which one it was for every message that reports it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import FrameType


class GpuPerfError(Exception):
    """Base class of every error pytest-gpuperf raises on purpose."""


@dataclass(frozen=True)
class Attempt:
    """One backend that was tried while looking for a device, and why it failed."""

    backend: str
    reason: str


class DeviceUnavailable(GpuPerfError):
    """No usable GPU: says which backends were tried and why each one failed."""

    def __init__(self, attempts: Sequence[Attempt], hint: str = "") -> None:
        self.attempts = tuple(attempts)
        tried = "; ".join(f"{a.backend}: {a.reason}" for a in self.attempts) or "nothing"
        message = f"no usable GPU ({tried})"
        if hint:
            message += f". {hint}"
        super().__init__(message)


class CompileError(GpuPerfError):
    """A kernel did not compile; carries the full compiler log and where it failed."""

    def __init__(
        self,
        message: str,
        *,
        log: str = "",
        source_path: str | None = None,
        line: int | None = None,
    ) -> None:
        self.log = log
        self.source_path = source_path
        self.line = line
        where = ""
        if source_path:
            where = f"{source_path}:{line}: " if line else f"{source_path}: "
        full = f"{where}{message}"
        if log.strip():
            full += "\n--- compiler log ---\n" + log.rstrip()
        super().__init__(full)

    @property
    def first_error(self) -> str:
        """The compiler's first error line as it wrote it, location included
        (`k.hip:3:10: fatal error: 'hip/x.h' file not found`, NVRTC's `k.hip(3): error: ...`),
        or "" when the log has none: what a one-line report of this failure quotes."""
        return next((line.strip() for line in self.log.splitlines() if "error:" in line), "")


class LaunchError(GpuPerfError):
    """A kernel could not be launched, or its launch failed on the device."""


class ArgumentError(LaunchError):
    """Kernel arguments do not match the kernel's signature; raised before any launch."""


class KernelNotFound(GpuPerfError):
    """A module has no kernel of that name; lists the kernels it does have."""

    def __init__(self, name: str, available: Sequence[str], where: str = "") -> None:
        self.name = name
        self.available = tuple(available)
        listing = ", ".join(self.available) or "none"
        source = f" in {where}" if where else ""
        super().__init__(
            f"no kernel named {name!r}{source}; the module has: {listing}. "
            'Kernels need extern "C" (or the GPUPERF_KERNEL macro) to keep their names.'
        )


class OutOfDeviceMemory(GpuPerfError):
    """An allocation asked for more memory than the device has free."""


class BaselineError(GpuPerfError):
    """A baseline file is unreadable or breaks the schema; names the file and line."""

    def __init__(self, path: str, message: str, line: int | None = None, short: str = "") -> None:
        self.path = path
        self.line = line
        self.short = short  # a few words for a report row ("Read-only file system (EROFS)")
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {message}")


class ConfigError(GpuPerfError):
    """A setting, marker or fixture argument is invalid; names it and the valid values."""


class NotMeasured(GpuPerfError):
    """A measurement that could not be taken (its work gave no usable sample): the test is
    not judged, and the message says what the measurement saw."""

    def __init__(self, label: str, what: str) -> None:
        self.label = label
        super().__init__(f"{label}: not measured: {what}")


class MeasurementTimeout(NotMeasured):
    """A measurement (or an A/B round, a confirmation, a save's) reached its hard wall-clock
    limit before it could be taken: the test is not judged, and the message says what the
    measurement saw by then (samples kept and dropped, where the time went)."""

    def __init__(self, label: str, limit_s: float, what: str) -> None:
        self.limit_s = limit_s
        super().__init__(label, what)


class DeviceFault(LaunchError):
    """The device can no longer be used in this process: a sticky fault (an illegal address)
    or a kernel that did not finish within the watchdog's limit. Every later GPU test of the
    session fails with the same reason instead of hanging or crashing."""


class KernelTimeout(DeviceFault):
    """A launch did not finish within --gpuperf-kernel-timeout; names the kernel."""


class SaveInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) arrived while a file was being saved or while waiting for its lock.

    A KeyboardInterrupt, so whatever does not know it still stops at once; the session that
    does catches it, says what was saved and what not, and still writes its reports.
    `saved` is true when the file had already been replaced (the save reached the disk)."""

    def __init__(self, path: str, phase: str, *, saved: bool = False) -> None:
        self.path = path
        self.phase = phase  # "waiting for its lock" | "writing it"
        self.saved = saved
        super().__init__(f"{path}: interrupted ({stop_words()}) while {phase}")


def os_error_words(error: OSError) -> str:
    """The errno's words and its name, 'Read-only file system (EROFS)', as `ls` and `cp`
    would say them; the exception's own text when it carries no errno."""
    name = errno.errorcode.get(error.errno or -1, "")
    words = error.strerror or str(error) or type(error).__name__
    return f"{words} ({name})" if name else words


def os_error_remedy(error: OSError, *, elsewhere: str) -> str:
    """What to do about a file-system error; `elsewhere` names the option that picks another
    place (e.g. '--gpuperf-baseline-dir=DIR')."""
    code = error.errno
    if code == errno.EROFS:
        return f"the file system is read-only: write elsewhere with {elsewhere}"
    if code in (errno.ENOSPC, errno.EDQUOT):
        return "the disk (or your quota) is full: free some space there, then run again"
    if code in (errno.EACCES, errno.EPERM):
        return f"make it writable for this user, or write elsewhere with {elsewhere}"
    return f"fix the path, or write elsewhere with {elsewhere}"


# -- stops: SIGTERM handled as Ctrl-C ----------------------------------------------------------
#
# SIGTERM handled as Ctrl-C: the summary, every report, no temporary file left behind.
#
# A CI job that times out or is cancelled ends with SIGTERM (GitHub Actions sends SIGINT, then
# SIGTERM; GitLab, Jenkins, `timeout` and Kubernetes send SIGTERM), whose default action kills
# the process where it stands: no summary, no report, exit -15, and a save in progress leaves
# its `.<file>.XXXX.tmp` for `git status` to show. Raising KeyboardInterrupt from the handler
# makes it take the road Ctrl-C takes, which the plugin already walks to the end (pytest's
# INTERRUPTED, exit 2): the tests stop, the saves stop and remove their temporaries, the
# reports are written and say "interrupted (SIGTERM)".
#
# Installed only in the main thread of a run that measures, saves or writes reports, and never
# over a handler someone else set (a harness with its own SIGTERM plan keeps it).


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: raised where Ctrl-C's KeyboardInterrupt would be."""


_received: list[int] = []  # the signals this process was stopped by, in order


def stop_on_sigterm(forward: Callable[[], Iterable[int]] = tuple) -> Callable[[], None] | None:
    """Handle SIGTERM as Ctrl-C from now on; returns what restores the previous handler, or
    None when nothing was installed (not the main thread, or a handler is already set).

    `forward` names processes that get the signal too: a pytest-xdist controller's workers,
    which Ctrl-C reaches through the terminal's process group but a SIGTERM sent to the
    controller alone would not (they would finish, and save, a run that was stopped)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    previous = signal.getsignal(signal.SIGTERM)
    if previous is not signal.SIG_DFL:
        return None
    _received.clear()

    def stop(signum: int, frame: FrameType | None) -> None:
        _received.append(signum)
        for pid in forward():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        # no promise here of what follows: a stop before the session began has no summary
        raise Terminated("SIGTERM: stopped as Ctrl-C would stop it")

    signal.signal(signal.SIGTERM, stop)
    _ours[:] = [stop]

    def restore() -> None:
        if signal.getsignal(signal.SIGTERM) in (stop, _noted):
            signal.signal(signal.SIGTERM, previous)
        if signal.getsignal(signal.SIGINT) is _noted:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        _ours.clear()
        _received.clear()  # this run's: a pytest run in the same process starts afresh

    return restore


_ours: list[Callable[[int, FrameType | None], None]] = []  # stop_on_sigterm's handler
_late: list[int] = []  # SIGTERMs and SIGINTs noted after defer_sigterm


def _noted(signum: int, frame: FrameType | None) -> None:
    """A SIGTERM or Ctrl-C once the reports are written: noted, not raised; a second one
    stops the process as the first would have (a runner or a user that insists is obeyed)."""
    if _late:
        if signum == signal.SIGINT:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            raise KeyboardInterrupt
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    _late.append(signum)
    _received.append(signum)


def defer_sigterm() -> None:
    """From now on a SIGTERM, and a Ctrl-C, is noted, not raised: the saves and the reports
    are done, only pytest's printing is left, and a stop raised there ended the run in a
    traceback through the summary's code (bench/save_signals.py found Ctrl-C's: 16 runs in
    100); `sigterm_after_the_end` tells the exit status. Only over stop_on_sigterm's handler,
    and Ctrl-C only where Python's own handler is in place."""
    _late.clear()
    if _ours and signal.getsignal(signal.SIGTERM) is _ours[0]:
        signal.signal(signal.SIGTERM, _noted)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _noted)


def sigterm_after_the_end() -> bool:
    """Whether a SIGTERM (or a Ctrl-C) arrived after defer_sigterm."""
    return bool(_late)


def sigterm_received() -> bool:
    """Whether a SIGTERM reached stop_on_sigterm's handler (or its note) in this run."""
    return signal.SIGTERM in _received


def stop_words() -> str:
    """What stopped this process, as its messages name it: 'SIGTERM' or 'Ctrl-C'."""
    return "SIGTERM" if signal.SIGTERM in _received else "Ctrl-C"
