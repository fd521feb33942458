"""Separate pytest processes, each with the plugin of a chosen tree (so one script can
measure two trees, main and a branch, in one device call), and what each one reported: its
--gpuperf-json report read through the plugin's one reader (pytest_gpuperf.record.
report_reader), its exit status, wall time and pytest's own session time."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab import REPO_ROOT
from lab.children import Finished, run

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
class PytestRun:
    """One pytest process: how it ended, and its report (None, and `problem` says why, when
    it wrote none or one the reader refuses)."""

    finished: Finished
    report: Any  # pytest_gpuperf.record.report_reader.ReadReport, or None
    problem: str = ""

    @property
    def returncode(self) -> int | None:
        return self.finished.returncode

    @property
    def wall_s(self) -> float:
        return self.finished.wall_s

    @property
    def rows(self) -> tuple:
        """The report's rows (record.verdict.Row: test_id, measurement, verdict)."""
        return self.report.rows if self.report is not None else ()

    @property
    def document(self) -> dict[str, Any]:
        """The report as written (its timing, devices, summary), checked by the reader."""
        return dict(self.report.document) if self.report is not None else {}

    @property
    def session_s(self) -> float | None:
        """pytest's own session time, the "in 12.34s" of its last line."""
        found = SESSION_LINE.findall(self.finished.stdout)
        return float(found[-1]) if found else None

    @property
    def summary(self) -> str:
        """pytest's last line of output."""
        lines = self.finished.stdout.strip().splitlines()
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
    timeout_s: float = 300.0,
    profile: Path | None = None,
) -> PytestRun:
    """pytest on `args` in `cwd`, writing its JSON report to `report` (an older file there
    is removed first, so that a process that writes none is never read as another's), read
    back through the plugin's reader."""
    report.unlink(missing_ok=True)
    command = pytest_command(*args, f"--gpuperf-json={report}", profile=profile)
    finished = run(
        command, cwd=cwd, env=env if env is not None else plugin_env(), timeout_s=timeout_s
    )
    found, problem = read_report(report)
    if finished.returncode is None:
        problem = f"ran out of its {timeout_s:.0f} s"
    return PytestRun(finished, found, problem)


def read_report(path: Path) -> tuple[Any, str]:
    """(the report at `path` through the plugin's one reader, "") or (None, why not)."""
    from pytest_gpuperf.errors import ConfigError
    from pytest_gpuperf.record.report_reader import read_report as read

    if not path.is_file():
        return None, "no report written"
    try:
        return read(path), ""
    except ConfigError as refused:
        return None, str(refused)
