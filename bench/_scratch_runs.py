"""Scratch repositories of real libraries and the pytest processes run in them, for
bench/real_ops.py and bench/real_commits.py (not part of the plugin; not a test).

Kept apart on purpose: this is the part of those scripts that starts processes and reads
their reports back, so it can move to a shared bench harness without touching what the
scripts decide. Three things live here:

- a library's release vendored under `vendor/` of a scratch git repository, from a wheel or
  from a source folder (nothing of another project is ever committed to this one: the
  repositories are made under a temporary folder at run time);
- one pytest process with a hard wall-clock bound: it runs in a process group of its own,
  killed whole when the bound passes, so a measurement that hangs is a row ("timeout"), never
  a hung benchmark;
- its reports read back: the --gpuperf-json report through the plugin's one reader
  (pytest_gpuperf.record.report_reader), and pytest's own JUnit XML for what the JSON does
  not hold (tests skipped or failed before they measured, and each test's wall time).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
CORPUS = REPO_ROOT / "tests" / "gpu" / "real_ops"
AUTHOR = ("-c", "user.name=bench", "-c", "user.email=bench@example.com")

# The scratch repository's pytest.ini: the vendored release first on sys.path, the CUDA GPU
# required (no silent fall-back to the simulated device), baselines kept in the repository.
PYTEST_INI = """\
[pytest]
pythonpath = vendor
addopts = -p no:cacheprovider
gpuperf_backend = cuda
gpuperf_require = cuda
gpuperf_budget = {budget_s:g}
gpuperf_baseline_dir = baselines
markers =
    gpu: needs a real GPU (skipped without one)
"""


def git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *AUTHOR, *args], cwd=root, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def commit_all(root: Path, message: str) -> str:
    """Commit the whole work tree (making `root` a repository first); the commit's hash. Two
    revisions with the same files still make two commits (the A/B then says so)."""
    if not (root / ".git").exists():
        root.mkdir(parents=True, exist_ok=True)
        git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "--allow-empty", "-m", message)
    return git(root, "rev-parse", "HEAD")


def write_project(root: Path, test_file: Path, budget_s: float) -> None:
    """The corpus's conftest, one test file and the pytest.ini, at the repository's top."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "pytest.ini").write_text(PYTEST_INI.format(budget_s=budget_s))
    shutil.copyfile(CORPUS / "conftest.py", root / "conftest.py")
    shutil.copyfile(test_file, root / test_file.name)


def vendor(source: Path, package: str, root: Path) -> None:
    """Put release `source` of `package` at root/vendor/<package>, replacing what was there.
    `source` is a wheel (its `package/` members), a folder holding `package/` (an unpacked
    wheel, a `src/` tree), or the package folder itself. A source without the package ends
    the script with one line."""
    target = root / "vendor" / package
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_file() and source.suffix == ".whl":
        with zipfile.ZipFile(source) as wheel:
            members = [m for m in wheel.namelist() if m.startswith(f"{package}/")]
            if not members:
                raise SystemExit(f"{source}: a wheel without {package}/")
            wheel.extractall(target.parent, members)
        return
    for candidate in (source / package, source / "src" / package, source):
        if (candidate / "__init__.py").is_file() and candidate.name == package:
            shutil.copytree(candidate, target, ignore=shutil.ignore_patterns("__pycache__"))
            return
    raise SystemExit(f"{source}: neither a wheel nor a folder holding {package}/__init__.py")


def release_name(source: Path, package: str) -> str:
    """What a commit message calls release `source`: the wheel's name, the version its
    unpacked folder's dist-info names, or the folder's name."""
    if source.is_file():
        return source.name
    found = sorted(source.glob(f"{package}-*.dist-info"))
    return found[0].name.removesuffix(".dist-info") if found else source.name


@dataclass(frozen=True)
class Case:
    """One test as pytest's JUnit XML reports it: `status` passed, failed, error, skipped."""

    name: str
    status: str
    message: str = ""
    time_s: float = 0.0


@dataclass
class Run:
    """One pytest process: its exit status (None: killed at its bound), wall, output, the
    JSON report read back (None, and `problem` says why, when there is none), the tests."""

    label: str
    returncode: int | None
    wall_s: float
    output: str
    report: Any = None  # pytest_gpuperf.record.report_reader.ReadReport
    problem: str = ""
    cases: dict[str, Case] = field(default_factory=dict)

    def rows_of(self, test_name: str) -> list[Any]:
        """The report's rows (record.verdict.Row) of the test function `test_name`."""
        if self.report is None:
            return []
        return [r for r in self.report.rows if _function(r.test_id) == test_name]

    @property
    def lock_s(self) -> float | None:
        """The GPU lock the whole process held (the report's timing.gpu_lock_held_s)."""
        if self.report is None:
            return None
        return (self.report.document.get("timing") or {}).get("gpu_lock_held_s")


def _function(test_id: str) -> str:
    return test_id.split("::")[-1].split("[")[0]


def pytest_command(test_file: str, options: Sequence[str], report: Path, junit: Path) -> list[str]:
    return [
        sys.executable, "-m", "pytest", "-p", "pytest_gpuperf.plugin", "-q", "-rfEs",
        f"--junitxml={junit}", f"--gpuperf-json={report}", *options, test_file,
    ]  # fmt: skip


def run_pytest(
    root: Path, test_file: str, options: Sequence[str], out: Path, label: str, timeout_s: float
) -> Run:
    """pytest on `test_file` in `root` with `options`, bounded by `timeout_s` of wall time;
    its output, JSON report and JUnit XML kept under `out` as LABEL.log/.json/.xml. The
    plugin comes from this checkout (PYTHONPATH) and nothing else autoloads, so the package
    is loaded once whether or not it is also installed."""
    out.mkdir(parents=True, exist_ok=True)
    report, junit = out / f"{label}.json", out / f"{label}.xml"
    for stale in (report, junit):
        stale.unlink(missing_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO_ROOT), env.get("PYTHONPATH"))))
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("GITHUB_STEP_SUMMARY", None)
    returncode, output, wall_s = bounded(
        pytest_command(test_file, options, report, junit), root, env, timeout_s
    )
    (out / f"{label}.log").write_text(output)
    run = Run(label, returncode, wall_s, output, cases=read_junit(junit))
    if returncode is None:
        run.problem = f"killed at its bound of {timeout_s:.0f} s"
    run.report, problem = read_report_or_why(report)
    run.problem = run.problem or problem
    return run


def bounded(
    command: Sequence[str], cwd: Path, env: dict[str, str], timeout_s: float
) -> tuple[int | None, str, float]:
    """(exit status or None when killed at `timeout_s`, output, wall s). The child leads a
    process group of its own: the kill takes whatever it started with it."""
    started = time.monotonic()
    child = subprocess.Popen(
        list(command), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )  # fmt: skip
    try:
        output, _ = child.communicate(timeout=timeout_s)
        return child.returncode, output, time.monotonic() - started
    except subprocess.TimeoutExpired:
        _kill_group(child)
        output, _ = child.communicate()
        return None, output or "", time.monotonic() - started
    finally:
        if child.poll() is None:
            _kill_group(child)
            child.wait()


def _kill_group(child: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)


def read_report_or_why(path: Path) -> tuple[Any, str]:
    """The --gpuperf-json report at `path` through the plugin's one reader, or (None, why)."""
    from pytest_gpuperf.errors import ConfigError
    from pytest_gpuperf.record.report_reader import read_report

    if not path.exists():
        return None, "no JSON report"
    try:
        return read_report(path), ""
    except ConfigError as error:
        return None, str(error)


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
        time_s = float(element.get("time") or 0.0)
        cases[name] = Case(name, status, first_line(message), time_s)
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
