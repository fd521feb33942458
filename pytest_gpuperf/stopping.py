"""SIGTERM handled as Ctrl-C: the summary, every report, no temporary file left behind.

A CI job that times out or is cancelled ends with SIGTERM (GitHub Actions sends SIGINT, then
SIGTERM; GitLab, Jenkins, `timeout` and Kubernetes send SIGTERM), whose default action kills
the process where it stands: no summary, no report, exit -15, and a save in progress leaves
its `.<file>.XXXX.tmp` for `git status` to show. Raising KeyboardInterrupt from the handler
makes it take the road Ctrl-C takes, which the plugin already walks to the end (pytest's
INTERRUPTED, exit 2): the tests stop, the saves stop and remove their temporaries, the
reports are written and say "interrupted (SIGTERM)".

Installed only in the main thread of a run that measures, saves or writes reports, and never
over a handler someone else set (a harness with its own SIGTERM plan keeps it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterable
from types import FrameType


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: raised where Ctrl-C's KeyboardInterrupt would be."""


_received: list[int] = []  # the signals this process was stopped by, in order


def install(forward: Callable[[], Iterable[int]] = tuple) -> Callable[[], None] | None:
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
        raise Terminated(
            "SIGTERM: stopped as Ctrl-C would stop it (the summary and the reports follow)"
        )

    signal.signal(signal.SIGTERM, stop)

    def restore() -> None:
        if signal.getsignal(signal.SIGTERM) is stop:
            signal.signal(signal.SIGTERM, previous)

    return restore


def stop_words() -> str:
    """What stopped this process, as its messages name it: 'SIGTERM' or 'Ctrl-C'."""
    return "SIGTERM" if signal.SIGTERM in _received else "Ctrl-C"


__all__ = ["Terminated", "install", "stop_words"]
