"""What the pytest layers keep per process: the run's state and the typed stash keys.

The timing gate (__init__.py and its hook modules) and the static gate (static_gate.py) both
read and write these; they belong to neither, so each imports them from here (as pytest's own
plugins share `StashKey`s) and neither imports the other.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_gpuperf.config import settings as options

if TYPE_CHECKING:
    from pytest_gpuperf.errors import GpuPerfError
    from pytest_gpuperf.record.verdict import Row
    from pytest_gpuperf.session.bench_session import BenchSession, Judgement
    from pytest_gpuperf.session.executed import Recorder
    from pytest_gpuperf.session.fixture import GpuBench

FIXTURE = "gpu_bench"
MAIN_WORKER = "main"  # the worker name of a run without pytest-xdist


@dataclass(eq=False)  # registered as a plugin: must stay hashable
class PluginState:
    """What the plugin keeps per pytest process; registered as a plugin itself, to receive
    every test report (from xdist workers too) without a module-level global."""

    settings: options.Settings
    rootdir: Path
    worker: int | None
    rows: dict[str, list[Row]] = field(default_factory=dict)  # by test id: the last report wins
    # by test id: outcome, kernel_files, error (the JSON report's "tests")
    tests: dict[str, dict[str, Any]] = field(default_factory=dict)
    row_workers: dict[str, str] = field(default_factory=dict)  # test id -> the worker it ran on
    crashed: dict[str, str] = field(default_factory=dict)  # xdist workers that died -> why
    worker_pids: dict[str, int] = field(default_factory=dict)  # xdist workers alive -> pid
    collected: set[str] = field(default_factory=set)  # every test id collected, deselected too
    # what selected tests within the run's files (node ids, -k, -m...; baseline/orphans.py's
    # narrowed_by): "" when they were collected whole, and only then is a test not collected
    # gone
    narrowed: str = ""
    orphan_lines: list[str] = field(default_factory=list)
    devices: list[dict[str, Any]] = field(default_factory=list)
    smoke: dict[str, int] = field(default_factory=dict)
    written: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    unsaved: dict[str, str] = field(default_factory=dict)  # files not saved -> why not
    interrupted: bool = False  # Ctrl-C stopped a save or the writing of the reports
    finished: bool = False  # the end of the run (finish.py) has begun
    step_summary_tried: bool = False  # $GITHUB_STEP_SUMMARY appended to (or tried) once
    ended: Any = None  # the pytest.Session whose saves and reports are done (its exit status)
    meta: Any = None  # record.meta.ReportMeta, made once at the end
    checkout: Any = None  # provenance.GitFacts before the run wrote anything (collect.py)
    # The tests of the run that measure (use gpu_bench): they share the false-alarm budget.
    # Counted at collection, where every xdist worker sees the whole run; the controller
    # learns it from the workers' reports.
    suite_checks: int = 0
    probe: Any = None  # gpu_probe.ProbeReport: the controller's, handed to every worker
    # the controller's probe_handoff.ProbeInBackground; a worker's (findings file, controller pid)
    probe_handoff: Any = None
    probe_file: tuple[Path, int | None] | None = None
    # --gpuperf-shard: this runner's part (shard.ShardPlan, made at collection; an xdist
    # controller gets its workers' as plain data), and how pytest ended its tests
    shard: Any = None
    # under --gpuperf-shard, every test's outcome and a failure's one-line message, by test
    # id (the merge names each test of the suite, measuring or not)
    outcomes: dict[str, dict[str, str]] = field(default_factory=dict)
    tests_failed: int = 0
    exitstatus: int = 0
    # Each GPU used, by (backend, index, bus id): identity, workers, GPU-lock account per worker
    gpus: dict[tuple[Any, ...], dict[str, Any]] = field(default_factory=dict)
    began_s: float = field(default_factory=time.monotonic)
    # Says a GPU-lock wait on the terminal past pytest's capture (terminal_notifier)
    notify: Callable[[str], None] | None = None
    # --gpuperf on the command line over --no-gpuperf from addopts, or the reverse: the line
    # that says which one this run obeys (config/flag_origins.py; "" when they agree)
    flag_note: str = ""
    # what stopped the run when pytest itself did (a collection error, pytest.exit), in words;
    # "" for Ctrl-C or SIGTERM; and the collection errors, one line each (finish.py)
    stop_reason: str = ""
    # an extracted revision's tree found changed in the cache and extracted again (an xdist
    # controller gets its workers'): said as a warning in the summary
    tree_notes: list[str] = field(default_factory=list)
    # measuring tests a selection of this run deselected (-k, -m, --deselect, --lf, a
    # conftest), not --gpuperf-shard's own: a strict run names them (finish.py)
    deselected: dict[str, None] = field(default_factory=dict)
    collect_errors: list[str] = field(default_factory=list)
    _session: BenchSession | None = None

    @property
    def session(self) -> BenchSession:
        if self._session is None:
            from pytest_gpuperf.session.bench_session import BenchSession

            self._session = BenchSession(
                self.settings,
                rootdir=self.rootdir,
                worker=self.worker,
                probe=self.probe,
                probe_file=self.probe_file,
                notify=self.notify,
            )
            self._session.suite_checks = max(self.suite_checks, 1)
        return self._session

    @property
    def opened_session(self) -> BenchSession | None:
        """The session if a test or hook has opened it, else None: the end of the run asks
        this so that it never opens a device (and compiles nothing) only to close it."""
        return self._session

    def missing_baseline_folder(self) -> bool:
        """Whether stored baselines would gate from a folder that is not there: one given by
        --gpuperf-baseline-dir or the ini key (the default `baselines/` of a project with
        floors only, or of a first run, is no mistake: the summary names the tests without a
        baseline), in a measuring run that neither saves (a save creates it) nor compares
        (the A/B gates)."""
        settings = self.settings
        if not settings.measure or settings.save or settings.compare_ref:
            return False
        folder = settings.baseline_dir
        default = self.rootdir / options.DEFAULT_BASELINE_DIR
        return folder.resolve() != default.resolve() and not folder.exists()

    def count_checks(self, checks: int) -> None:
        self.suite_checks = max(self.suite_checks, checks)
        if self._session is not None:
            self._session.suite_checks = max(self.suite_checks, 1)

    def note_gpu(self, facts: dict[str, Any] | None, worker: str) -> None:
        """Record that `worker` measured on the GPU of `facts` (session.gpu_facts()); its
        GPU-lock account only grows, so the latest one is kept."""
        if not facts:
            return
        key = (facts["backend"], facts["index"], facts.get("pci_bus_id"))
        record = self.gpus.setdefault(key, {**facts, "accounts": {}})
        record["accounts"][worker] = facts

    def gpu_records(self) -> tuple[dict[str, Any], ...]:
        """The GPUs used, each with its workers and their GPU-lock time summed."""
        records = []
        for record in self.gpus.values():
            accounts = record["accounts"]
            records.append(
                {
                    "backend": record["backend"],
                    "index": record["index"],
                    "pci_bus_id": record.get("pci_bus_id"),
                    "uuid": record.get("uuid"),
                    "workers": sorted(accounts),
                    "lock_held_s": sum(a["lock_held_s"] for a in accounts.values()),
                    "lock_waited_s": sum(a["lock_waited_s"] for a in accounts.values()),
                    "lock_holds": sum(a["lock_holds"] for a in accounts.values()),
                }
            )
        return tuple(records)

    @property
    def all_rows(self) -> list[Row]:
        return [row for rows in self.rows.values() for row in rows]

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Every test collected, before any hook narrows the list: one that a conftest drops
        without pytest_deselected exists all the same (its entries are not orphans)."""
        self.collected.update(item.nodeid for item in items)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A file that could not be collected, in one line (an xdist controller gets its
        workers' failed collection reports too): the run it stops is named by it."""
        if report.failed:
            from pytest_gpuperf.report.faults import collect_error_line

            where = report.nodeid or str(getattr(report, "fspath", ""))
            self.collect_errors.append(collect_error_line(where, report.longreprtext))

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """pytest stops a run through its KeyboardInterrupt path for reasons of its own (errors
        during collection, `pytest.exit`, `--sw`): which one is kept, so the summary and the
        reports name it instead of "interrupted (Ctrl-C)"; Ctrl-C and SIGTERM leave none."""
        stop = excinfo.value
        if isinstance(stop, pytest.exit.Exception):
            self.stop_reason = f"pytest.exit({stop.msg!r})"
        elif isinstance(stop, pytest.Session.Interrupted):
            self.stop_reason = str(stop) or "pytest stopped the run"

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.settings.shard is not None:
            note_outcome(self.outcomes, report)
        payload = getattr(report, "gpuperf", None)
        if report.when != "call" or not payload:
            return
        from pytest_gpuperf.engine.plain import from_plain
        from pytest_gpuperf.record.verdict import Row

        # A rerun (pytest-rerunfailures) reports the same test again: the last report is
        # pytest's final word, and the reports follow it.
        self.rows[report.nodeid] = [from_plain(Row, row) for row in payload.get("rows", ())]
        self.row_workers[report.nodeid] = payload.get("worker") or MAIN_WORKER
        self.smoke[report.nodeid] = int(payload.get("smoke", 0))
        xfailed = report.skipped and hasattr(report, "wasxfail")  # not measured, or modelled
        self.tests[report.nodeid] = {
            "outcome": "xfailed" if xfailed else report.outcome,
            "kernel_files": list(payload.get("kernel_files", ())),
            "error": payload.get("error", ""),
        }
        self.suite_checks = max(self.suite_checks, int(payload.get("suite_checks", 0)))
        device = payload.get("device")
        if device and all(d["lines"] != device["lines"] for d in self.devices):
            self.devices.append(device)
        self.note_gpu(payload.get("gpu"), payload.get("worker") or MAIN_WORKER)


def note_outcome(outcomes: dict[str, dict[str, str]], report: pytest.TestReport) -> None:
    """Fold one phase's report into its test's outcome as pytest's summary counts it: a
    failed setup or teardown is an error, a failed call a failure, xfail's reports xfailed and
    xpassed; a rerun starts again at its setup. A failure keeps its first line."""
    if report.when == "setup":
        outcomes.pop(report.nodeid, None)
    record = outcomes.setdefault(report.nodeid, {"outcome": "passed", "message": ""})
    if report.outcome == "passed" and not hasattr(report, "wasxfail"):
        return
    if hasattr(report, "wasxfail"):
        outcome = "xfailed" if report.skipped else "xpassed"
    elif report.skipped:
        outcome = "skipped"
    else:
        outcome = "failed" if report.when == "call" else "error"
    if record["outcome"] in ("failed", "error"):
        return  # the first failure is the test's; a teardown error after it adds nothing
    record["outcome"] = outcome
    if outcome in ("failed", "error", "skipped"):
        record["message"] = _first_line(report)


def _first_line(report: pytest.TestReport) -> str:
    """The one line pytest's short summary shows for a failure (or a skip's reason)."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (file, line, reason)
        text = str(longrepr[2]).removeprefix("Skipped: ")
    else:
        crash = getattr(longrepr, "reprcrash", None)
        text = str(crash.message) if crash is not None else str(longrepr or "")
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 200 else line[:197] + "..."


# On the config: the run's state (__init__.py), a hung kernel's exit status (finish.py),
# Ctrl-C (finish.py), the sim seed shared with the workers and its value before
# (collect.py; __init__.py restores it).
STATE = pytest.StashKey[PluginState]()
EXIT_NOW = pytest.StashKey[int]()
STOPPED = pytest.StashKey[bool]()  # Ctrl-C stopped the tests (pytest's INTERRUPTED)
SIM_SEED_SHARED = pytest.StashKey[tuple[str, str | None]]()
RESTORE_SIGTERM = pytest.StashKey[Any]()  # stop_on_sigterm()'s undo (__init__.py)
# On each test item: its settings or the problem of its markers (collect.py), its
# bench and the gate's judgement (verdict.py, read by static_gate.py too), whether
# its body is running and how many of its subtests failed (verdict.py).
TEST_SETTINGS = pytest.StashKey[options.TestSettings]()
MARKER_PROBLEM = pytest.StashKey[str]()
BENCH: pytest.StashKey[GpuBench] = pytest.StashKey()
JUDGEMENT: pytest.StashKey[Judgement] = pytest.StashKey()
IN_CALL = pytest.StashKey[bool]()
FAILED_SUBTESTS = pytest.StashKey[int]()
# a measurement not taken (errors.NotMeasured), which xfailed (or, strict, failed) the test
NOT_MEASURED: pytest.StashKey[GpuPerfError] = pytest.StashKey()
RECORDER: pytest.StashKey[Recorder] = pytest.StashKey()  # what the test ran (recording.py)


def state_of(config: pytest.Config) -> PluginState:
    return config.stash[STATE]


def ctrl_c_stopped(config: pytest.Config) -> bool:
    """Whether Ctrl-C or SIGTERM stopped the tests, not pytest itself (a collection error,
    `pytest.exit`: `PluginState.stop_reason`) (`Stash.get` is typed loosely on pytest 8.0)."""
    stopped = STOPPED in config.stash and config.stash[STOPPED]
    return bool(stopped) and not (STATE in config.stash and config.stash[STATE].stop_reason)


def terminal_notifier(config: pytest.Config) -> Callable[[str], None]:
    """A line for the user while a test runs, that pytest's capture does not swallow (a wait
    of up to 30 minutes for another process's GPU lock must be seen without -s): capture is
    suspended for the write; the controller writes through its terminal reporter, a
    pytest-xdist worker to its standard error, which execnet leaves connected to the
    controller's (only its standard output carries the worker's channel)."""

    def notify(message: str) -> None:
        capture = config.pluginmanager.getplugin("capturemanager")
        reporter = config.pluginmanager.getplugin("terminalreporter")
        suspended = (
            capture.global_and_fixture_disabled()
            if capture is not None
            else contextlib.nullcontext()
        )
        with suspended, contextlib.suppress(Exception):
            if reporter is not None and not is_xdist_worker(config):
                reporter.write_line(message)
                reporter.flush()
            else:
                sys.stderr.write(message + "\n")
                sys.stderr.flush()

    return notify


def is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def is_xdist_controller(config: pytest.Config) -> bool:
    return bool(getattr(config.option, "numprocesses", None)) and not is_xdist_worker(config)


class GpuPerfWarning(pytest.PytestWarning):
    """A marginal result (passed on the median while its interval straddles the floor), or a
    floor that cannot mean what it says (a hot-mode floor against the HBM peak).

    Turn these into failures with `-W error::pytest_gpuperf.plugin.GpuPerfWarning`.
    """
