"""One probe: pytest (the plugin, the user's own tests) run with a commit's kernels as head and
GOOD's as base, interleaved in one process (`--gpuperf-head=COMMIT --gpuperf-compare=GOOD`),
and what its JSON report says about the measurement the search follows.

Each probe is its own pytest process: the same path a pull request's `--gpuperf-compare`
takes (the same statistic, module loads, drift and confirming round), and a probe that
crashes or hangs costs that probe, not the search.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_gpuperf.engine.results import AB_MODELLED, AB_NO_BASE, AB_UNCHANGED, UNJUDGED
from pytest_gpuperf.errors import GpuPerfError

# States of a reading, beside the A/B states (results.AB_*) the plugin reports.
NO_BUILD = "does not build"
BROKEN = "test failed"
GOOD_STATE = "good"
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
    # the probe's code facts (its verdict's explain.code: "head" is this commit's, "base"
    # GOOD's), None where the probe gave none
    code: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def measured(self) -> bool:
        return self.ratio is not None


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
    """The probe's command: the user's pytest arguments, then the options the search owns."""
    return [
        sys.executable,
        "-m",
        "pytest",
        *pytest_args,
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
        try:
            done = subprocess.run(
                command,
                cwd=cwd,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
            )
        except subprocess.TimeoutExpired:
            raise ProbeError(
                f"the probe of {head[:12]} ran longer than {timeout_s:g} s (--probe-timeout)"
            ) from None
        wall_s = time.monotonic() - began
        if done.returncode in _USAGE_EXITS or not json_path.is_file():
            said = _last_line(done.stderr) or _last_line(done.stdout)
            what = _USAGE_EXITS.get(done.returncode, f"exit status {done.returncode}")
            raise ProbeError(f"pytest {' '.join(pytest_args)}: {what}: {said}")
        document = json.loads(json_path.read_text())
    return parse_report(document, wall_s=wall_s, exit_code=done.returncode)


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
    code = (verdict.get("explain") or {}).get("code")
    if state in (AB_UNCHANGED, AB_MODELLED):
        return Reading(state, 1.0, (1.0, 1.0), threshold=threshold, code=code)
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
    )
