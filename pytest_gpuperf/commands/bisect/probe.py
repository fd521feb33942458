"""One probe: pytest (the plugin, the user's own tests) run with a commit's kernels as head and
GOOD's as base, interleaved in one process (`--gpuperf-head=COMMIT --gpuperf-compare=GOOD`),
and what its JSON report says about the measurement the search follows.

Each probe is its own pytest process: the same path a pull request's `--gpuperf-compare`
takes (the same statistic, module loads, drift and confirming round), and a probe that
crashes or hangs is stopped and reported (`ProbeFailed`), never the bisection's own crash.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_gpuperf.errors import ConfigError, GpuPerfError, Terminated
from pytest_gpuperf.record.checks import AB_MODELLED, AB_NO_BASE, AB_UNCHANGED
from pytest_gpuperf.record.report_reader import read_report
from pytest_gpuperf.record.verdict import UNJUDGED

# States of a reading, beside the A/B states (results.AB_*) the plugin reports.
NO_BUILD = "does not build"  # a compile error: the commit is skipped, never retried
BROKEN = "test failed"  # any other failure of the followed test: retried once, then the end
PROBE_FAILED = "probe failed"  # pytest itself did not finish (a timeout, a crash): the same
GOOD_STATE = "good"
COMPILE_ERROR = "CompileError"  # the type the JSON report's tests[].error starts with
STOP_GRACE_S = 10.0  # a stopped probe's pytest gets this long to clean up before SIGKILL
_PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies
# pytest's exit codes that mean the command line, not a commit, is at fault
_USAGE_EXITS = {2: "interrupted", 3: "internal error", 4: "usage error", 5: "no tests collected"}
# Options the bisection sets itself on every probe (its own flags say how to change them).
OWNED_OPTIONS = {
    "--gpuperf-compare": "GOOD is the base of every probe",
    "--gpuperf-head": "each probe sets the commit it measures",
    "--gpuperf-json": "bisect reads each probe's report (use --json PATH for the search's)",
    "--gpuperf-budget": "use bisect's --budget",
    "--gpuperf-compare-threshold": "use bisect's --threshold",
    "--gpuperf-save": "a probe measures commits other than the work tree's",
    "--gpuperf-code-facts": "every probe reads its commit's code facts (the culprit's changes)",
}


class ProbeError(GpuPerfError):
    """A probe's pytest run that says the command line is wrong (a usage error, no tests),
    not the commit: the search stops with pytest's own line."""


class ProbeFailed(GpuPerfError):
    """A probe's pytest run that did not finish with a report (it ran past --probe-timeout,
    crashed or was killed): a failure of this run, not a property of the commit."""


@dataclass(frozen=True)
class Key:
    """The measurement the search follows: one test's named measurement."""

    test_id: str
    name: str

    def __str__(self) -> str:
        return f"{self.test_id} [{self.name}]"


@dataclass(frozen=True)
class Reading:
    """One measurement's A/B result at a probe: head (the probed commit) over GOOD's time."""

    state: str
    ratio: float | None = None
    ratio_ci: tuple[float, float] | None = None
    pairs: int = 0
    threshold: float = 0.0
    detail: str = ""  # why there is no ratio (the compiler's line), or what decided
    modelled_by: str = ""  # AB_MODELLED: where the simulated device's one model came from
    # the probe's code facts (its verdict's explain.code: "head" is this commit's, "base"
    # GOOD's), None where the probe gave none
    code: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    # what the vendor's profiler counted for one launch of this commit and of GOOD (its
    # verdict's explain.traffic: a confirmed regression on a GPU with the profiler), or None
    traffic: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def measured(self) -> bool:
        """A speed the search may use: timed, the same code as GOOD, or (simulated) GOOD's
        model (the state says which)."""
        return self.ratio is not None

    @property
    def retried(self) -> bool:
        """A failure that is not the commit's own (anything but a compile error): the probe
        runs once more, and a second failure ends the search."""
        return self.state in (BROKEN, PROBE_FAILED)


@dataclass(frozen=True)
class ProbeRun:
    """What one pytest process reported: a reading per measurement, the kernel files each
    test loaded, the device, and the run's own facts."""

    readings: Mapping[Key, Reading]
    kernel_files: Mapping[str, tuple[str, ...]]  # test id -> files relative to rootdir
    rootdir: str
    device: str
    simulated: bool
    wall_s: float
    exit_code: int
    failures: Mapping[str, str] = field(default_factory=dict)  # test id -> why it stopped


def pytest_command(
    pytest_args: Sequence[str],
    *,
    good: str,
    head: str,
    json_path: Path,
    budget_s: float,
    threshold: float,
) -> list[str]:
    """The probe's command: the user's pytest arguments, then the options the search owns
    (pytest's cache plugin off: a probe must not rewrite the user's `.pytest_cache`, the
    last-failed list of the user's own runs)."""
    return [
        sys.executable,
        "-m",
        "pytest",
        *pytest_args,
        "-p",
        "no:cacheprovider",
        "--gpuperf",
        f"--gpuperf-compare={good}",
        f"--gpuperf-head={head}",
        f"--gpuperf-json={json_path}",
        f"--gpuperf-budget={budget_s:g}",
        f"--gpuperf-compare-threshold={threshold:g}",
        "--gpuperf-code-facts",
    ]


def run_probe(
    pytest_args: Sequence[str],
    *,
    good: str,
    head: str,
    budget_s: float,
    threshold: float,
    cwd: Path,
    timeout_s: float | None = None,
) -> ProbeRun:
    """Run pytest once for `head` against `good`; ProbeError when pytest refused the command
    line (its exit code and its last line)."""
    with tempfile.TemporaryDirectory(prefix="gpuperf-bisect-") as scratch:
        json_path = Path(scratch) / "probe.json"
        command = pytest_command(
            pytest_args,
            good=good,
            head=head,
            json_path=json_path,
            budget_s=budget_s,
            threshold=threshold,
        )
        began = time.monotonic()
        returncode, stdout, stderr = _run_child(command, cwd, timeout_s, head)
        wall_s = time.monotonic() - began
        if returncode in _USAGE_EXITS:
            said = _last_line(stderr) or _last_line(stdout)
            given = shlex.join(["pytest", *pytest_args])
            raise ProbeError(f"{given}: {_USAGE_EXITS[returncode]}: {said}")
        if not json_path.is_file():
            said = _last_line(stderr) or _last_line(stdout)
            how = (
                f"was killed by signal {-returncode}"
                if returncode < 0
                else f"ended with exit status {returncode}"
            )
            raise ProbeFailed(
                f"the probe of {head[:12]} {how} without a report" + (f": {said}" if said else "")
            )
        try:
            document = read_report(json_path).document  # the one reader (record/)
        except ConfigError as problem:
            raise ProbeFailed(
                f"the probe of {head[:12]} wrote a report bisect cannot read: {problem}"
            ) from None
    return parse_report(document, wall_s=wall_s, exit_code=returncode)


def _run_child(
    command: Sequence[str], cwd: Path, timeout_s: float | None, head: str
) -> tuple[int, str, str]:
    """Run the probe's pytest; its exit status and output.

    The child has its own session, so a terminal's Ctrl-C reaches the bisection only, and the
    bisection passes on exactly one stop: Ctrl-C as SIGINT, SIGTERM (raised here as
    `Terminated`) or the timeout as SIGTERM. The child then has STOP_GRACE_S to end as the
    plugin ends a stopped run (its GPU lock released, its files whole) before SIGKILL: a
    bisection never leaves a probe running."""
    child = subprocess.Popen(
        command,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        start_new_session=True,
        preexec_fn=_end_with_parent,
    )
    try:
        stdout, stderr = child.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _stop(child, signal.SIGTERM)
        raise ProbeFailed(
            f"the probe of {head[:12]} ran longer than {timeout_s:g} s (--probe-timeout)"
        ) from None
    except Terminated:
        _stop(child, signal.SIGTERM)
        raise
    except BaseException:
        _stop(child, signal.SIGINT)
        raise
    return child.returncode, stdout, stderr


def _end_with_parent() -> None:
    """In the child before it runs pytest (Linux): SIGTERM when the bisection dies, even by
    SIGKILL, so a killed bisection never leaves a probe holding the GPU lock."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _stop(child: subprocess.Popen[str], signum: int) -> None:
    with contextlib.suppress(OSError):
        child.send_signal(signum)
    try:
        child.communicate(timeout=STOP_GRACE_S)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):  # too slow, or stopped again
        child.kill()
        child.communicate()


def _last_line(text: str) -> str:
    """pytest's line that says what is wrong: argparse's `error: ...`, else its first
    `ERROR: ...` (not the usage line), else its last line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if ": error: " in line:
            return line.split(": error: ", 1)[1]
    for line in lines:
        if line.startswith("ERROR: ") and not line.startswith("ERROR: usage:"):
            return line
    meaningful = [line for line in lines if not line.startswith("=")]
    chosen = meaningful or lines
    return chosen[-1] if chosen else ""


def parse_report(document: Mapping[str, Any], *, wall_s: float, exit_code: int) -> ProbeRun:
    """The readings of a probe's JSON report (docs/json-schema.md)."""
    readings: dict[Key, Reading] = {}
    device = ""
    simulated = bool(document.get("simulated"))
    for result in document.get("results", ()):
        measurement = result["measurement"]
        device = device or measurement.get("device_name", "")
        key = Key(result["test_id"], measurement["name"])
        readings[key] = reading_of(result["verdict"])
    files: dict[str, tuple[str, ...]] = {}
    failures: dict[str, str] = {}
    for test in document.get("tests", ()):
        files[test["test_id"]] = tuple(test.get("kernel_files", ()))
        if test.get("error"):
            failures[test["test_id"]] = test["error"]
        elif test.get("outcome") == "failed" and not any(
            key.test_id == test["test_id"] for key in readings
        ):
            failures[test["test_id"]] = "the test failed before it measured"
    return ProbeRun(
        readings=readings,
        kernel_files=files,
        rootdir=str(document.get("rootdir", "")),
        device=device,
        simulated=simulated,
        wall_s=wall_s,
        exit_code=exit_code,
        failures=failures,
    )


def failure_reading(error: str) -> Reading:
    """A test that stopped before it measured: a compile error is the commit's (it does not
    build); anything else (out of device memory, a launch that failed, a kernel the test
    cannot find) may be this run's, and is retried."""
    state = NO_BUILD if error.startswith(f"{COMPILE_ERROR}:") else BROKEN
    return Reading(state, detail=error)


def reading_of(verdict: Mapping[str, Any]) -> Reading:
    """A verdict's A/B comparison as a reading: a timed pair's ratio and interval; identical
    code (unchanged) and, on the simulated device, code with GOOD's model (modelled) are
    GOOD's speed by construction (ratio 1); a measurement whose test failed its own output
    check is not trusted."""
    comparison = verdict.get("comparison")
    if verdict.get("status") == UNJUDGED:
        return Reading(BROKEN, detail="its test failed (an output check?): the time is not trusted")
    if not comparison:
        return Reading(AB_NO_BASE, detail="the measurement was not compared with GOOD")
    state = comparison["state"]
    threshold = float(comparison.get("threshold") or 0.0)
    explain = verdict.get("explain") or {}
    code = explain.get("code")
    if state == AB_UNCHANGED:
        return Reading(state, 1.0, (1.0, 1.0), threshold=threshold, code=code)
    if state == AB_MODELLED:  # GOOD's model, not a time: no interval to show
        return Reading(
            state,
            1.0,
            None,
            threshold=threshold,
            modelled_by=comparison.get("modelled_by", ""),
            code=code,
        )
    if state == AB_NO_BASE:
        return Reading(state, threshold=threshold, detail=comparison.get("detail", ""), code=code)
    ratio = comparison.get("ratio")
    ci = comparison.get("ratio_ci")
    return Reading(
        state,
        float(ratio) if ratio is not None else None,
        (float(ci[0]), float(ci[1])) if ci else None,
        pairs=int(comparison.get("pairs") or 0),
        threshold=threshold,
        code=code,
        traffic=explain.get("traffic"),
    )
