"""Separate pytest processes, each with the plugin of a chosen tree (so one script can
measure two trees, main and a branch, in one device call), and what each one reported: its
--gpuperf-json report read through the plugin's one reader (pytest_gpuperf.record.
report_reader), its exit status, wall time and pytest's own session time, and where asked
pytest's JUnit XML (what happened to the tests that never measured)."""

from __future__ import annotations

import os
import re
import sys
import xml.etree.ElementTree as ElementTree
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab import REPO_ROOT
from lab.children import run

# The plugin named on the command line, pytest's cache left alone: a throwaway project's
# process loads nothing it does not name (plugin_env turns autoloading off to match).
NAMED_PLUGIN = ("-p", "no:cacheprovider", "-p", "pytest_gpuperf.plugin")
# pytest's last line: "== 19 passed in 12.34s (0:00:12) =="
SESSION_LINE = re.compile(r" in ([0-9.]+)s(?: \([0-9:]+\))? =*\s*$", re.MULTILINE)


def plugin_env(
    plugin_root: Path = REPO_ROOT,
    *,
    autoload: bool = False,
    inherit: bool = True,
    **variables: str | None,
) -> dict[str, str]:
    """The environment of a child running the plugin of `plugin_root` (first on PYTHONPATH):
    pytest's plugin autoloading off unless `autoload` (the command names the plugin with -p,
    and an installed entry point must not register it a second time), output unbuffered, no
    CI job summary (a bench run is not the job's), `variables` set (None removes one).
    `inherit` False leaves out the caller's own PYTEST_* and GPUPERF_* variables: a pytest
    that runs the script must not hand its own down."""
    env = {
        name: value
        for name, value in os.environ.items()
        if inherit or not name.startswith(("PYTEST_", "GPUPERF_"))
    }
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(plugin_root), os.environ.get("PYTHONPATH")])
    )
    env["PYTHONUNBUFFERED"] = "1"
    if not autoload:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env.pop("GITHUB_STEP_SUMMARY", None)
    for name, value in variables.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def gpuperf_args(backend: str, *, budget: Any = None, require: bool = False) -> list[str]:
    """--gpuperf on `backend`, with a budget per measurement; `require`: a GPU backend that
    finds no GPU fails the run instead of skipping it (never on the simulated device)."""
    args = ["--gpuperf", f"--gpuperf-backend={backend}"]
    if budget is not None:
        args.append(f"--gpuperf-budget={budget}")
    if require and backend != "sim":
        args.append(f"--gpuperf-require={backend}")
    return args


@dataclass(frozen=True)
class Case:
    """One test as pytest's JUnit XML reports it: `status` passed, failed, error, skipped."""

    name: str
    status: str
    message: str = ""
    time_s: float = 0.0


@dataclass(frozen=True)
class Run:
    """One pytest process: its exit status (None: killed at its bound), wall time, output,
    its report (None, and `problem` says why, when it wrote none or one the reader refuses)
    and, where JUnit XML was asked for, each test's case: what the JSON does not hold (tests
    skipped or failed before they measured, each test's wall time). `stdout` apart from
    `output`, for pytest's own last line."""

    label: str
    returncode: int | None
    wall_s: float
    output: str
    report: Any = None  # pytest_gpuperf.record.report_reader.ReadReport, or None
    problem: str = ""
    cases: dict[str, Case] = field(default_factory=dict)
    stdout: str = ""

    @property
    def rows(self) -> tuple:
        """The report's rows (record.verdict.Row: test_id, measurement, verdict)."""
        return self.report.rows if self.report is not None else ()

    def rows_of(self, test_name: str) -> list[Any]:
        """The report's rows of the test function `test_name`."""
        return [r for r in self.rows if r.test_id.split("::")[-1].split("[")[0] == test_name]

    @property
    def document(self) -> dict[str, Any]:
        """The report as written (its timing, devices, summary), checked by the reader."""
        return dict(self.report.document) if self.report is not None else {}

    @property
    def lock_s(self) -> float | None:
        """The GPU lock the whole process held (the report's timing.gpu_lock_held_s)."""
        return (self.document.get("timing") or {}).get("gpu_lock_held_s")

    @property
    def session_s(self) -> float | None:
        """pytest's own session time, the "in 12.34s" of its last line."""
        found = SESSION_LINE.findall(self.stdout)
        return float(found[-1]) if found else None

    @property
    def summary(self) -> str:
        """pytest's last line of output."""
        lines = self.stdout.strip().splitlines()
        return lines[-1] if lines else ""


def pytest_command(*args: str, profile: Path | None = None) -> list[str]:
    """This interpreter running pytest on `args` (under cProfile writing `profile`)."""
    prefix = ["-m", "cProfile", "-o", str(profile)] if profile else []
    return [sys.executable, *prefix, "-m", "pytest", *args]


def run_pytest(
    args: Sequence[str],
    report: Path,
    *,
    cwd: Path = REPO_ROOT,
    env: dict[str, str] | None = None,
    timeout_s: float | None = 300.0,
    profile: Path | None = None,
    junit: Path | None = None,
) -> Run:
    """pytest on `args` in `cwd`, writing its JSON report to `report` (and with `junit` its
    JUnit XML there: an older file is removed first, so that a process that writes none is
    never read as another's), read back through the plugin's reader. With `junit` the output
    is one stream, as a terminal shows it: the log a script keeps."""
    extra = [f"--gpuperf-json={report}", *([f"--junitxml={junit}"] if junit else [])]
    for stale in (report, junit):
        if stale is not None:
            stale.unlink(missing_ok=True)
    env = env if env is not None else plugin_env()
    command = pytest_command(*args, *extra, profile=profile)
    done = run(command, cwd=cwd, env=env, timeout_s=timeout_s, merged=junit is not None)
    found, problem = read_report(report)
    if done.returncode is None:
        problem = f"killed at its bound of {timeout_s:.0f} s"
    cases = read_junit(junit) if junit else {}
    return Run(report.stem, done.returncode, done.wall_s, done.output, found, problem, cases,
               done.stdout)  # fmt: skip


def run_test_file(
    root: Path, test_file: str, options: Sequence[str], out: Path, label: str, timeout_s: float
) -> Run:
    """pytest on `test_file` in the scratch repository `root` with `options`, the plugin of
    this checkout, bounded by `timeout_s`; its log, JSON report and JUnit XML kept under
    `out` as LABEL.log/.json/.xml."""
    out.mkdir(parents=True, exist_ok=True)
    args = ["-p", "pytest_gpuperf.plugin", "-q", "-rfEs", *options, test_file]
    done = run_pytest(args, out / f"{label}.json", cwd=root, timeout_s=timeout_s,
                      junit=out / f"{label}.xml")  # fmt: skip
    (out / f"{label}.log").write_text(done.output)
    return done


def read_report(path: Path) -> tuple[Any, str]:
    """(the report at `path` through the plugin's one reader, "") or (None, why not)."""
    from pytest_gpuperf.errors import ConfigError
    from pytest_gpuperf.record.report_reader import read_report as read

    if not path.is_file():
        return None, "no JSON report"
    try:
        return read(path), ""
    except ConfigError as refused:
        return None, str(refused)


def read_junit(path: Path) -> dict[str, Case]:
    """Each test function's case in pytest's JUnit XML, by name; a module that could not be
    collected (or skipped as a whole) is the case named after its file. {} without a file."""
    try:
        tree = ElementTree.parse(path)
    except (OSError, ElementTree.ParseError):
        return {}
    cases = {}
    for element in tree.iter("testcase"):
        name = element.get("name", "").split("[")[0] or element.get("classname", "")
        status, message = "passed", ""
        for kind in ("failure", "error", "skipped"):
            found = element.find(kind)
            if found is not None:
                status = {"failure": "failed"}.get(kind, kind)
                message = found.get("message") or ""
                if message in ("", "collection skipped", "collection failure"):
                    message = _reason(found.text or message)
                break
        cases[name] = Case(name, status, first_line(message), float(element.get("time") or 0.0))
    return cases


def _reason(text: str) -> str:
    """What a skipped or broken module says: pytest's JUnit XML gives a module skipped at
    collection as `('path', line, 'Skipped: why')` and a collection error as a traceback whose
    last line is the exception."""
    found = re.search(r"Skipped: (.*?)['\"]\)\s*$", text.strip())
    if found:
        return found[1]
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def first_line(text: str) -> str:
    """The first line that says something, without pytest's "Skipped: " and cut to 160."""
    for line in text.strip().splitlines():
        if line.strip():
            return line.strip().removeprefix("Skipped: ")[:160]
    return ""
