"""Children of this interpreter: a worker that prints one JSON object a line (run-to-run
noise only shows between processes, so a measurement runs in its own), and any command run
in a process group of its own, killed with all it started when its time is up or the script
is stopped."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from lab import REPO_ROOT


@dataclass(frozen=True)
class Finished:
    """How a child ended: its exit status (None: it ran out of time and was killed), its
    output and its wall time."""

    returncode: int | None
    stdout: str
    stderr: str
    wall_s: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run(
    command: Sequence[str],
    *,
    cwd: Path = REPO_ROOT,
    env: Mapping[str, str] | None = None,
    timeout_s: float | None = 300.0,
    merged: bool = False,
) -> Finished:
    """Run `command` in a process group of its own; killed with its group when `timeout_s`
    passes (returncode None; None: no bound) and whenever this returns or is interrupted.
    `merged`: its stderr in its stdout, in the order written, as a terminal shows them (a
    log kept for reading)."""
    began = time.monotonic()
    child = subprocess.Popen(
        list(command), cwd=cwd, env=None if env is None else dict(env), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merged else subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    returncode: int | None = None
    try:
        stdout, stderr = child.communicate(timeout=timeout_s)
        returncode = child.returncode
    except subprocess.TimeoutExpired:
        _kill_group(child)
        stdout, stderr = child.communicate()
    finally:
        if child.poll() is None:
            _kill_group(child)
            child.wait()
    return Finished(returncode, stdout or "", stderr or "", time.monotonic() - began)


def _kill_group(child: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)


def run_child(
    args: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None
) -> list[dict]:
    """Run this interpreter on `args` (with `env` added to the environment); the child
    prints one JSON object per line (`emit`). A child that fails or runs out of time
    contributes what it printed so far, and its error is reported rather than ending the
    benchmark."""
    environment = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
    done = run([sys.executable, *args], env=environment, timeout_s=timeout_s)
    problem = done.stderr if done.returncode else ""
    if done.returncode is None:
        problem = f"timed out after {timeout_s:.0f} s"
    if problem:
        print(f"child {' '.join(args[:3])}...: {problem.strip()[-2000:]}", file=sys.stderr)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def emit(row: dict) -> None:
    """A child's result line (the parent reads lines that start with "{")."""
    print(json.dumps(row), flush=True)
