"""The degraded-GPU probe in the background: the pytest-xdist controller probes while its
workers start, and each worker waits for the findings only when it opens its GPU.

Run before the workers started, the probe (a CUDA context per GPU, a streaming kernel, the
GPU locks) delayed every worker by its whole length, about 1.1-1.4 s on a 2xH200 host
(docs/benchmarks.md, "Two GPUs"), while a worker's own start-up (the interpreter, pytest,
imports, collection) took as long again. Now the controller starts the probe in a thread and
the workers start at once; the thread writes its findings (or why it failed) to a file in a
private folder, and a worker reads that file before it opens its device, so that no worker
measures before the probe has refused a degraded GPU, and no worker's context creation falls
inside a probe's timing. The controller joins the thread before it hands out any test: a probe
that failed stops the run there, as it did before.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from pytest_gpuperf.baseline.file_write import write_whole
from pytest_gpuperf.errors import GpuPerfError
from pytest_gpuperf.session.gpu_probe import ProbeReport

PROBE_FILE = "probe.json"
POLL_S = 0.005


class ProbeInBackground:
    """`probe()` run in a daemon thread; its outcome written to `path` for the workers."""

    def __init__(self, probe: Callable[[], ProbeReport | None]) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="gpuperf-probe-"))  # 0700: ours alone
        self.path = self.folder / PROBE_FILE
        self._probe = probe
        self._report: ProbeReport | None = None
        self._error = ""
        self._thread = threading.Thread(target=self._run, name="gpuperf-probe", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from pytest_gpuperf.engine.plain import to_plain

        try:
            self._report = self._probe()
        except GpuPerfError as problem:
            self._error = str(problem)
        except Exception as unexpected:  # a worker must not wait forever
            self._error = f"{type(unexpected).__name__}: {unexpected}"
        outcome = {"report": to_plain(self._report), "error": self._error}
        # whole or not at all, for the workers; an OSError: the run ended first (close
        # removed the folder) and nobody waits
        with contextlib.suppress(OSError):
            write_whole(self.path, json.dumps(outcome))

    def result(self) -> ProbeReport | None:
        """The findings, once the probe has ended; GpuPerfError if it failed."""
        self._thread.join()
        if self._error:
            raise GpuPerfError(self._error)
        return self._report

    def close(self) -> None:
        """Remove the folder, without waiting for a probe still running: a run stopped before
        its tests (a collection error, Ctrl-C) must not wait out a probe that may itself wait
        for another run's GPU lock; that probe's late write finds no folder and is dropped."""
        shutil.rmtree(self.folder, ignore_errors=True)


def wait_for_probe(path: Path, controller_pid: int | None) -> ProbeReport | None:
    """The controller's findings from `path`, waiting until its probe has written them (the
    probe may itself wait for a GPU lock another run holds). A controller that ended first
    (this process's parent changed) is one GpuPerfError line, not a wait without end."""
    from pytest_gpuperf.engine.plain import from_plain
    from pytest_gpuperf.record.json_text import read_json_file

    while not path.exists():
        if controller_pid is not None and os.getppid() != controller_pid:
            raise GpuPerfError("the pytest-xdist controller ended before its degraded-GPU probe")
        time.sleep(POLL_S)
    outcome = read_json_file(path, "the degraded-GPU probe's findings")
    if outcome["error"]:
        raise GpuPerfError(f"degraded-GPU probe: {outcome['error']}")
    return from_plain(ProbeReport, outcome["report"]) if outcome["report"] else None
