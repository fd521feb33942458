"""What a test executed and opened: the files behind a callable's "same code" verdict.

`gpu_bench.run(fn)` measures the user's Python, and that Python is more than what the test
module imports: fixtures in conftest.py, a helper loaded with `importlib`, a kernel source
read with open(). A static walk of import statements sees none of these, so an edit there
read "same code: not timed" and (by design) switched the stored baseline off. The pytest
layer starts a `Recorder` at the test's setup; it notes the file of every Python function
that starts and every file opened for reading, until the measurement begins (the GPU lock
pauses it: session/gpu_lock.py), and callable_code.py compares those files with REF.

How, and what it costs:
- Python >= 3.12: `sys.monitoring`, a tool id of our own (4, else 3), PY_START only; the
  callback returns DISABLE, so each code object costs one event per recorded test. DISABLE
  lasts until `sys.monitoring.restart_events()`, which the next recording calls (it
  re-enables what other tools disabled too: coverage.py sees its code objects once more per
  recorded test, which it tolerates by design).
- Python 3.10/3.11: `sys.setprofile`, every call event, chained to a profile function that
  is already set; one a C profiler set (cProfile, yappi: not a Python callable) cannot be
  chained, and the recording is then incomplete rather than silently replacing it.
- Opened files: an audit hook ("open" events), installed once per process (a hook cannot be
  removed); it returns at once unless something is recording.

A recording that could not see everything says why (`Record.incomplete`): callable_code.py
then never calls the code the same on its word (docs/ci.md, "A/B for Python callables").
Threads other than the main one are not seen on 3.10/3.11 (setprofile is per thread).
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

# sys.monitoring's ids 0-2 and 5 are named for debuggers, coverage, profilers and optimizers;
# 3 and 4 are free for a tool like this one
_TOOL_IDS = (4, 3)
_TOOL_NAME = "pytest-gpuperf"
_MONITORING: Any = getattr(sys, "monitoring", None)  # Python 3.12+
_WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


@dataclass(frozen=True)
class Record:
    """What a test executed (the files of the Python functions that started) and opened for
    reading, as absolute paths; `incomplete` says why that may not be all ("" when it is)."""

    executed: frozenset[str] = frozenset()
    opened: frozenset[str] = frozenset()
    incomplete: str = ""


NOT_RECORDED = Record(incomplete="the run did not record what the test executed")


class Recorder:
    """One test's recording, from its setup until it is stopped; paused while a GPU lock is
    held (the measurement must not pay for it). One is active per process at a time."""

    def __init__(self) -> None:
        self._executed: set[str] = set()
        self._opened: set[str] = set()
        self._incomplete = ""
        self.running = False
        self._stopped = False
        self._tool: int | None = None
        self._previous: Any = None  # the profile function chained on 3.10/3.11
        self._hook: Callable[[FrameType, str, Any], Any] | None = None

    # -- what the caller sees ----------------------------------------------------------------
    def snapshot(self) -> Record:
        """Everything recorded so far."""
        self._check_hook()
        return Record(frozenset(self._executed), frozenset(self._opened), self._incomplete)

    def start(self) -> None:
        """Begin recording (the test's setup). Where the interpreter's hook is taken, the
        recording is incomplete from the start and records nothing."""
        global _active
        if _active is not None and _active is not self:
            _active.stop()
        _active = self
        _install_audit_hook()
        if _MONITORING is not None:
            self._tool = _claim_tool_id()
            if self._tool is None:
                self._incomplete = (
                    f"sys.monitoring's tool ids {_TOOL_IDS[0]} and {_TOOL_IDS[1]} are taken by "
                    "other tools"
                )
                return
            monitoring = _MONITORING
            monitoring.register_callback(self._tool, monitoring.events.PY_START, self._started)
            monitoring.restart_events()  # what earlier recordings disabled fires once again
        else:
            previous = sys.getprofile()
            if previous is not None and not callable(previous):
                self._incomplete = (
                    f"sys.setprofile is held by another profiler ({type(previous).__name__})"
                )
                return
            self._previous = previous
            self._hook = self._profile if previous is None else self._chained
        self.resume()

    def stop(self) -> Record:
        """End the recording for good and give the interpreter's hooks back."""
        global _active
        if not self._stopped:
            self.pause()
            self._stopped = True
            if self._tool is not None and self._still_ours():
                _MONITORING.register_callback(self._tool, _MONITORING.events.PY_START, None)
                _MONITORING.free_tool_id(self._tool)
            self._tool = None
        if _active is self:
            _active = None
        return self.snapshot()

    # -- pausing -------------------------------------------------------------------------------
    def resume(self) -> None:
        if self.running or self._stopped or (self._tool is None and self._hook is None):
            return
        if self._tool is not None:
            if not self._still_ours():
                return
            _MONITORING.set_events(self._tool, _MONITORING.events.PY_START)
        else:
            assert self._hook is not None
            sys.setprofile(self._hook)
        self.running = True

    def pause(self) -> None:
        if not self.running:
            return
        self.running = False
        if self._tool is not None:
            if self._still_ours():
                _MONITORING.set_events(self._tool, 0)
            return
        if sys.getprofile() is self._hook:
            sys.setprofile(self._previous)
        elif not self._incomplete:  # someone else's profile function replaced ours: theirs stays
            self._incomplete = "the test replaced the profile function while it was recorded"

    def _still_ours(self) -> bool:
        """Whether the tool id is still this recording's (a test may free it, and another
        tool take it): if not, it is left alone and the recording is incomplete."""
        if _MONITORING.get_tool(self._tool) == _TOOL_NAME:
            return True
        self._tool = None
        if not self._incomplete:
            self._incomplete = "the test freed the sys.monitoring tool id of the recording"
        return False

    def _check_hook(self) -> None:
        replaced = self._hook is not None and sys.getprofile() is not self._hook
        if self.running and replaced and not self._incomplete:
            self._incomplete = "the test replaced the profile function while it was recorded"

    # -- the hooks -------------------------------------------------------------------------------
    def _started(self, code: CodeType, offset: int) -> Any:
        self._executed.add(code.co_filename)
        return _MONITORING.DISABLE

    def _profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            self._executed.add(frame.f_code.co_filename)

    def _chained(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            self._executed.add(frame.f_code.co_filename)
        self._previous(frame, event, arg)

    def opening(self, path: str) -> None:
        if self.running:
            self._opened.add(path)


def _claim_tool_id() -> int | None:
    for tool in _TOOL_IDS:
        try:
            _MONITORING.use_tool_id(tool, _TOOL_NAME)
        except ValueError:  # another tool holds it
            continue
        return tool
    return None


_active: Recorder | None = None


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Nothing is recorded inside (a measurement under the GPU lock)."""
    recorder = _active
    if recorder is None or not recorder.running:
        yield
        return
    recorder.pause()
    try:
        yield
    finally:
        recorder.resume()


# -- opened files ----------------------------------------------------------------------------
# The watches of a base capture (callable_base.py): what the base revision's test body opened
# outside this plugin, to find a path into the work tree where REF's tree was meant.
_watches: list[set[str]] = []
_hook_installed = False
_PLUGIN_DIR = str(Path(__file__).resolve().parents[1])
_STDLIB = os.path.dirname(os.__file__)  # site-packages too, where it lies below


def _install_audit_hook() -> None:
    global _hook_installed
    if not _hook_installed:
        sys.addaudithook(_audit)
        _hook_installed = True


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event != "open" or (_active is None and not _watches):
        return
    path, mode, flags = (*args, None, None, None)[:3]
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str) or not path:
        return  # a file descriptor, or nothing
    if isinstance(mode, str):
        if any(letter in mode for letter in "wax+"):
            return
    elif isinstance(flags, int) and flags & _WRITING:
        return
    path = os.path.abspath(path)
    if _active is not None:
        _active.opening(path)
    if _watches and not _opened_by_the_plugin():
        for watch in _watches:
            watch.add(path)


def _opened_by_the_plugin() -> bool:
    """Whether the innermost frame outside the standard library is this plugin's (a kernel
    file it compiles for the base body's gpu_bench.kernel is not the body's doing)."""
    here = inspect.currentframe()  # _audit's caller, two up: what opened the file
    frame: FrameType | None = here.f_back.f_back if here and here.f_back else None
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(_PLUGIN_DIR):  # first: the plugin may be installed in site-packages
            return True
        if not (name.startswith("<frozen") or name.startswith(_STDLIB)):
            return False
        frame = frame.f_back
    return False


@contextlib.contextmanager
def watching_opens() -> Iterator[set[str]]:
    """The files opened for reading inside, by anything but this plugin (absolute paths)."""
    _install_audit_hook()
    seen: set[str] = set()
    _watches.append(seen)
    try:
        yield seen
    finally:
        _watches.remove(seen)


def source_of(path: str) -> Path:
    """The source a cached bytecode file stands for (`pkg/__pycache__/mod.cpython-311.pyc`:
    `pkg/mod.py`), as imports open the .pyc when it is fresh; other paths as they are."""
    place = Path(path)
    if place.suffix == ".pyc" and place.parent.name == "__pycache__":
        return place.parent.parent / (place.name.split(".", 1)[0] + ".py")
    return place


__all__ = ["NOT_RECORDED", "Record", "Recorder", "paused", "source_of", "watching_opens"]
