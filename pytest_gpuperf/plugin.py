"""The pytest layer, and only that: options, ini keys, markers, the `gpu_bench` fixture, the
hooks that hand a test's measurements to the gate once its body is done, and the reports.

Loading it is cheap: it imports the settings and the errors, nothing else; NumPy, SciPy and the
backends load when a test first uses `gpu_bench` or a run measures (session.py, fixture.py,
gate/, report/ hold everything that does not need `config`, `item` or `request`).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pytest

from pytest_gpuperf import settings as options
from pytest_gpuperf.errors import (
    BaselineError,
    ConfigError,
    DeviceFault,
    DeviceUnavailable,
    GpuPerfError,
    SaveInterrupted,
)

if TYPE_CHECKING:
    from pytest_gpuperf.fixture import GpuBench
    from pytest_gpuperf.report import ReportMeta
    from pytest_gpuperf.results import Row
    from pytest_gpuperf.session import BenchSession, Judgement

FIXTURE = "gpu_bench"
MAIN_WORKER = "main"  # the worker name of a run without pytest-xdist


class GpuPerfWarning(pytest.PytestWarning):
    """A marginal result (passed on the median while its interval straddles the floor), or a
    floor that cannot mean what it says (a hot-mode floor against the HBM peak).

    Turn these into failures with `-W error::pytest_gpuperf.plugin.GpuPerfWarning`.
    """


@dataclass(eq=False)  # registered as a plugin: must stay hashable
class _State:
    """What the plugin keeps per pytest process; registered as a plugin itself, to receive
    every test report (from xdist workers too) without a module-level global."""

    settings: options.Settings
    rootdir: Path
    worker: int | None
    rows: dict[str, list[Row]] = field(default_factory=dict)  # by test id: the last report wins
    collected: set[str] = field(default_factory=set)  # every test id collected, deselected too
    orphan_lines: list[str] = field(default_factory=list)
    devices: list[dict[str, Any]] = field(default_factory=list)
    smoke: dict[str, int] = field(default_factory=dict)
    written: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    unsaved: dict[str, str] = field(default_factory=dict)  # files not saved -> why not
    interrupted: bool = False  # Ctrl-C stopped a save or the writing of the reports
    meta: Any = None  # report.ReportMeta, made once at the end
    # The tests of the run that measure (use gpu_bench): they share the false-alarm budget.
    # Counted at collection, where every xdist worker sees the whole run; the controller
    # learns it from the workers' reports.
    suite_checks: int = 0
    probe: Any = None  # gpu_probe.ProbeReport: the controller's, handed to every worker
    # Each GPU used, by (backend, index, bus id): identity, workers, GPU-lock account per worker
    gpus: dict[tuple[Any, ...], dict[str, Any]] = field(default_factory=dict)
    began_s: float = field(default_factory=time.monotonic)
    _session: BenchSession | None = None

    @property
    def session(self) -> BenchSession:
        if self._session is None:
            from pytest_gpuperf.session import BenchSession

            self._session = BenchSession(
                self.settings, rootdir=self.rootdir, worker=self.worker, probe=self.probe
            )
            self._session.suite_checks = max(self.suite_checks, 1)
        return self._session

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

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        payload = getattr(report, "gpuperf", None)
        if report.when != "call" or not payload:
            return
        from pytest_gpuperf.plain import from_plain
        from pytest_gpuperf.results import Row

        # A rerun (pytest-rerunfailures) reports the same test again: the last report is
        # pytest's final word, and the reports follow it.
        self.rows[report.nodeid] = [from_plain(Row, row) for row in payload.get("rows", ())]
        self.smoke[report.nodeid] = int(payload.get("smoke", 0))
        self.suite_checks = max(self.suite_checks, int(payload.get("suite_checks", 0)))
        device = payload.get("device")
        if device and all(d["lines"] != device["lines"] for d in self.devices):
            self.devices.append(device)
        self.note_gpu(payload.get("gpu"), payload.get("worker") or MAIN_WORKER)


STATE = pytest.StashKey[_State]()
TEST_SETTINGS = pytest.StashKey[options.TestSettings]()
MARKER_PROBLEM = pytest.StashKey[str]()
BENCH = pytest.StashKey["GpuBench"]()
JUDGEMENT = pytest.StashKey["Judgement"]()
IN_CALL = pytest.StashKey[bool]()
FAILED_SUBTESTS = pytest.StashKey[int]()
EXIT_NOW = pytest.StashKey[int]()
STOPPED = pytest.StashKey[bool]()  # Ctrl-C stopped the tests (pytest's INTERRUPTED)


def _stopped(config: pytest.Config) -> bool:
    """Whether Ctrl-C stopped the tests (`Stash.get` is typed loosely on pytest 8.0)."""
    return STOPPED in config.stash and config.stash[STOPPED]


# -- options, ini keys, markers -----------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpuperf", "GPU kernel performance (pytest-gpuperf)")
    for spec in options.OPTIONS:
        argparse_help = spec.help.replace("%", "%%")  # argparse %-formats help texts
        if spec.is_flag:
            group.addoption(
                spec.flag, action="store_true", default=None, dest=spec.dest, help=argparse_help
            )
        else:
            group.addoption(
                spec.flag, dest=spec.dest, metavar=spec.metavar, default=None, help=argparse_help
            )
        if spec.ini:
            ini_type: Literal["bool", "string"] = "bool" if spec.is_flag else "string"
            parser.addini(
                spec.ini,
                help=f"ini equivalent of {spec.flag}: {spec.help}",
                type=ini_type,
                default=None,
            )


@pytest.hookimpl(tryfirst=True)  # before pytest-benchmark's, which reads the option below
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"min_bw(fraction): {options.MIN_BW_HELP}")
    config.addinivalue_line("markers", f"gpuperf(**settings): {options.GPUPERF_HELP}")
    cli = {spec.dest: config.getoption(spec.dest) for spec in options.OPTIONS}
    ini = {spec.ini: config.getini(spec.ini) for spec in options.OPTIONS if spec.ini}
    try:
        built = options.build_settings(
            cli,
            ini,
            rootdir=Path(config.rootpath),
            invocation_dir=Path(config.invocation_params.dir),
        )
    except ConfigError as problem:
        raise pytest.UsageError(f"pytest-gpuperf: {problem}") from None
    _quiet_pytest_benchmark(config, built)
    state = _State(built, Path(config.rootpath), options.xdist_worker_number())
    probe = getattr(config, "workerinput", {}).get("gpuperf_probe")
    if probe is not None:  # the controller's degraded-GPU probe (pytest_configure_node)
        from pytest_gpuperf.gpu_probe import ProbeReport
        from pytest_gpuperf.plain import from_plain

        state.probe = from_plain(ProbeReport, probe)
    config.stash[STATE] = state
    config.pluginmanager.register(state, "gpuperf-state")
    # gpuperf-static: the static gate's hooks, only when it is on, or when a save on a GPU
    # may record the facts of the AMD code objects it loaded (static_plugin.py)
    if built.static or built.save:
        from pytest_gpuperf.static_plugin import PLUGIN_NAME, StaticPlugin

        config.pluginmanager.register(StaticPlugin(state), PLUGIN_NAME)


def _quiet_pytest_benchmark(config: pytest.Config, settings: options.Settings) -> None:
    """pytest-benchmark (installed with us for its JSON layout) turns itself off under
    pytest-xdist and says so on every such run, a warning about timing this run does not use:
    a measuring gpuperf run under xdist turns it off quietly instead (the same effect: its
    `benchmark` fixture then runs each function once, untimed, as docs/writing-perf-tests.md
    says), unless --benchmark-enable or --benchmark-only asks for it."""
    option = config.option
    if not (settings.measure and hasattr(option, "benchmark_disable")):
        return
    under_xdist = hasattr(config, "workerinput") or config.getoption("dist", "no") != "no"
    if under_xdist and not (
        getattr(option, "benchmark_enable", False) or getattr(option, "benchmark_only", False)
    ):
        option.benchmark_disable = True


def _state(config: pytest.Config) -> _State:
    return config.stash[STATE]


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _is_xdist_controller(config: pytest.Config) -> bool:
    return bool(getattr(config.option, "numprocesses", None)) and not _is_xdist_worker(config)


def pytest_report_header(config: pytest.Config) -> list[str]:
    settings = _state(config).settings
    if settings.static:  # gpuperf-static: static_plugin.py writes the header
        return []
    if not settings.measure:
        return [
            "gpuperf: smoke mode (each gpu_bench call launches once, no timing, no gate); "
            "--gpuperf measures and gates"
        ]
    lines = [f"gpuperf: {options.describe(settings)}"]
    backends = settings.allowed_backends
    if "sim" in backends:
        which = (
            "is the only backend"
            if backends[0] == "sim"
            else "is the fallback when no GPU is found"
        )
        lines.append(f"gpuperf: the SIMULATED device {which} (--gpuperf-backend)")
    return lines


def pytest_sessionstart(session: pytest.Session) -> None:
    """A broken baseline file (or directory), or a report that could not be written, stops
    the run before any test, naming it: found after the tests, it would cost the summary."""
    state = _state(session.config)
    if state.settings.measure:
        try:
            state.session.check_baseline_files()
        except BaselineError as broken:
            raise pytest.UsageError(f"pytest-gpuperf: {broken}") from None
    if state.settings.measure or state.settings.static:
        try:
            state.session.check_compare_ref()
        except GpuPerfError as unresolved:
            raise pytest.UsageError(f"pytest-gpuperf: {unresolved}") from None
    if not _is_xdist_worker(session.config):
        from pytest_gpuperf.report.files import unwritable

        problem = unwritable(state.settings)
        if problem:
            raise pytest.UsageError(f"pytest-gpuperf: {problem}")
    if _is_xdist_controller(session.config):
        _share_sim_seed(session.config, state)
        _probe_gpus(session.config, state)


SIM_SEED_SHARED = pytest.StashKey[tuple[str, str | None]]()


def _share_sim_seed(config: pytest.Config, state: _State) -> None:
    """Several simulated GPUs are one simulated machine: the probe and every worker draw from
    one seed (workers inherit the controller's environment), else each process would model
    its own machine. Restored when the session ends (in-process runs share os.environ)."""
    settings = state.settings
    if "sim" not in settings.allowed_backends or len(settings.sim_gpu_speeds) < 2:
        return
    from pytest_gpuperf.sim.model import SEED_ENV, resolve_seed

    if os.environ.get(SEED_ENV):
        return
    config.stash[SIM_SEED_SHARED] = (SEED_ENV, os.environ.get(SEED_ENV))
    os.environ[SEED_ENV] = str(resolve_seed(None))


def _probe_gpus(config: pytest.Config, state: _State) -> None:
    """The degraded-GPU probe, once per run in the pytest-xdist controller before any worker
    starts (this hook runs before xdist's, which starts them): every worker then gets its
    findings (pytest_configure_node), so a refused GPU gets no worker and results are marked."""
    workers = config.getoption("numprocesses", None)
    if not isinstance(workers, int) or workers < 2:
        return
    from pytest_gpuperf.session_device import probe_for_workers

    try:
        state.probe = probe_for_workers(state.settings, workers)
    except GpuPerfError as problem:
        raise pytest.UsageError(f"pytest-gpuperf: degraded-GPU probe: {problem}") from None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: hand the controller's probe findings to each worker."""
    state = _state(node.config)
    if state.probe is not None:
        from pytest_gpuperf.plain import to_plain

        node.workerinput["gpuperf_probe"] = to_plain(state.probe)


def pytest_deselected(items: list[pytest.Item]) -> None:
    """Deselected tests exist: their baseline entries are not orphans."""
    if items:
        _state(items[0].config).collected.update(item.nodeid for item in items)


def pytest_collection_finish(session: pytest.Session) -> None:
    state = _state(session.config)
    state.collected.update(item.nodeid for item in session.items)
    state.count_checks(
        sum(1 for item in session.items if FIXTURE in getattr(item, "fixturenames", ()))
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marker arguments are read at collection, last, so marks other hooks add (a conftest
    turning its own marks into min_bw) count. A bad marker fails its own test when it runs,
    naming it; it does not abort a session in which that test is deselected."""
    settings = _state(config).settings
    for item in items:
        try:
            item.stash[TEST_SETTINGS] = _test_settings(settings, item)
        except ConfigError as problem:
            item.stash[MARKER_PROBLEM] = f"pytest-gpuperf: {problem}"


def _test_settings(settings: options.Settings, item: pytest.Item) -> options.TestSettings:
    def marks(name: str) -> list[options.MarkerArgs]:
        return [
            options.MarkerArgs(tuple(mark.args), dict(mark.kwargs))
            for mark in item.iter_markers(name)
        ]

    return options.settings_for_test(
        settings, item.nodeid, min_bw=marks("min_bw"), gpuperf=marks("gpuperf")
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    problem = item.stash.get(MARKER_PROBLEM, None)
    if problem is not None and FIXTURE in getattr(item, "fixturenames", ()):
        pytest.fail(problem, pytrace=False)


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    """Open the device as soon as some collected test needs it, so the header says which
    device runs the tests, and says SIMULATED when it is."""
    if config.option.collectonly or _is_xdist_controller(config):
        return []
    if not any(FIXTURE in getattr(item, "fixturenames", ()) for item in items):
        return []
    state = _state(config)
    try:
        return state.session.device().describe()
    except DeviceUnavailable as unavailable:
        if state.settings.require:  # with or without --gpuperf: a missing GPU fails
            return [f"gpuperf: {unavailable}; tests using {FIXTURE} will FAIL"]
        return [f"gpuperf: {unavailable}; tests using {FIXTURE} will be skipped"]
    except GpuPerfError as problem:
        return [f"gpuperf: the device could not be set up: {problem}"]


# -- the fixture ---------------------------------------------------------------------------------


@pytest.fixture
def gpu_bench(request: pytest.FixtureRequest) -> Iterator[GpuBench]:
    """Compile, move data to and measure kernels on the session's GPU (see GpuBench).

    Skips, saying what was tried, when no usable GPU is found; fails instead under
    --gpuperf-require, so a runner that lost its GPU never goes green.
    """
    from pytest_gpuperf.fixture import GpuBench

    state = _state(request.config)
    item = request.node
    test = item.stash.get(TEST_SETTINGS, None) or _test_settings(state.settings, item)
    try:
        device = state.session.device()
    except DeviceUnavailable as unavailable:
        missing: DeviceUnavailable | None = unavailable
    else:
        missing = None
    if missing is not None:  # outside the except block: no "during handling of" chain
        if state.settings.require:  # smoke mode too: the runner was meant to have a GPU
            pytest.fail(f"gpuperf: {missing}", pytrace=False)
        pytest.skip(f"gpuperf: {missing}")
    if state.session.fault:
        pytest.fail(f"gpuperf: not run: {state.session.fault}", pytrace=False)
    bench = GpuBench(
        state.session, device, test, test_path=Path(item.path), progress=_progress(request.config)
    )
    item.stash[BENCH] = bench
    try:
        yield bench
    finally:
        bench.close()


# -- verdicts --------------------------------------------------------------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """Gate the measurements once the test body is done: its own output checks come first,
    so a kernel with wrong results never passes on time alone. A test whose body (or one of
    its subtests) failed keeps its rows, marked not judged, and saves nothing."""
    item.stash[IN_CALL] = True
    unmodelled = ""
    try:
        result = yield
    except BaseException as failure:
        item.stash[IN_CALL] = False
        with contextlib.suppress(GpuPerfError):
            _judge(item, unjudged=True)
        if isinstance(failure, DeviceFault):  # the facts, not a traceback into the driver
            pytest.fail(f"gpuperf: {item.nodeid}: {failure}", pytrace=False)
        unmodelled = _no_model_failure(item, failure)
        if not unmodelled:
            raise
    if unmodelled:  # outside the except block: no "during handling of" chain
        pytest.fail(unmodelled, pytrace=False)
    item.stash[IN_CALL] = False
    failed_subtests = item.stash.get(FAILED_SUBTESTS, 0)
    try:
        judgement = _judge(item, unjudged=failed_subtests > 0)
    except GpuPerfError as problem:  # e.g. a baseline file that cannot be read
        pytest.fail(f"gpuperf: {problem}", pytrace=False)
    if judgement is None:
        return result
    from pytest_gpuperf.report import failure_text, junit_properties
    from pytest_gpuperf.results import FAIL, MARGINAL

    verdicts = judgement.verdicts
    verbose = item.config.get_verbosity() > 0  # -v: every check, not only what decided
    for measurement, verdict in verdicts:
        prefix = "gpuperf" if len(verdicts) == 1 else f"gpuperf.{measurement.name}"
        item.user_properties.extend(junit_properties(measurement, verdict, prefix=prefix))
        if verdict.status == MARGINAL:
            item.warn(GpuPerfWarning(failure_text(measurement, verdict, verbose=verbose)))
        if verdict.floor is not None and verdict.floor.hot_floor:
            item.warn(
                GpuPerfWarning(
                    f"{measurement.name}: a floor in hot mode compares cache bandwidth with the "
                    "HBM peak (hot runs can read over 100%); put floors on cold or rotate "
                    "measurements"
                )
            )
    failures = [failure_text(m, v, verbose=verbose) for m, v in verdicts if v.status == FAIL]
    if failures:
        pytest.fail("\n\n".join(failures), pytrace=False)
    return result


def _no_model_failure(item: pytest.Item, failure: BaseException) -> str:
    """An output check that failed because the simulated device computed no outputs for a
    kernel it has no model of: the message that says so first ("" for any other failure)."""
    bench = item.stash.get(BENCH, None)
    if bench is None or not isinstance(failure, AssertionError):
        return ""
    try:
        kernels = bench.uncomputed()
    except GpuPerfError:
        return ""
    if not kernels:
        return ""
    import traceback

    from pytest_gpuperf.report import no_model_text

    where = ""
    for frame, line in traceback.walk_tb(failure.__traceback__):
        if Path(frame.f_code.co_filename) == Path(item.path):
            where = f"{Path(item.path).name}:{line}"
    named = [(k.name, str(k.module.source_path or k.module.source_name)) for k in kernels]
    return no_model_text(named, where, str(failure))


def _judge(item: pytest.Item, *, unjudged: bool) -> Judgement | None:
    bench = item.stash.get(BENCH, None)
    if bench is None or not bench.measuring or not bench.taken:
        return None
    judgement = _state(item.config).session.judge(
        bench.test, bench.taken, unjudged=unjudged, remeasure=None if unjudged else bench.confirm
    )
    item.stash[JUDGEMENT] = judgement
    return judgement


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Attach the test's rows to its report as plain data: pytest-xdist carries extra report
    attributes from workers to the controller, where the summary and files are made. A report
    made while the body still runs is a subtest's: a failed one keeps the test unjudged."""
    report = yield
    if call.when != "call":
        return report
    if item.stash.get(IN_CALL, False):
        if call.excinfo is not None:
            item.stash[FAILED_SUBTESTS] = item.stash.get(FAILED_SUBTESTS, 0) + 1
        return report
    bench = item.stash.get(BENCH, None)
    if bench is None:
        return report
    check_failed = call.excinfo is not None and call.excinfo.errisinstance(AssertionError)
    if (
        report.failed
        and bench.measuring
        and bench.taken
        and check_failed
        and not _uncomputed(bench)
    ):
        report.sections.append(("gpuperf", _repeated_launches_hint(bench)))
    from pytest_gpuperf.plain import to_plain
    from pytest_gpuperf.results import Row

    payload: dict[str, Any] = {
        "rows": [],
        "smoke": sum(1 for r in bench.results if not r.measured),
        "suite_checks": _state(item.config).suite_checks,
    }
    judgement = item.stash.get(JUDGEMENT, None)
    if judgement is not None:
        payload["rows"] = [
            to_plain(Row(item.nodeid, m, v, test_outcome=report.outcome))
            for m, v in judgement.verdicts
        ]
    session = _state(item.config).session
    if session.opened:
        with contextlib.suppress(GpuPerfError):
            device = session.device()
            payload["device"] = {
                "info": to_plain(device.info),
                "lines": device.describe(),
                "simulated": device.simulated,
                "key": device.match.spec.key,
                "peak_bps": device.match.spec.peak_bps,
            }
            payload["gpu"] = session.gpu_facts()
            payload["worker"] = os.environ.get("PYTEST_XDIST_WORKER", MAIN_WORKER)
    report.gpuperf = payload  # type: ignore[attr-defined]
    return report


# -- reports ---------------------------------------------------------------------------------------


def _meta(config: pytest.Config, state: _State) -> ReportMeta:
    from pytest_gpuperf.plain import from_plain, to_plain
    from pytest_gpuperf.provenance import git_facts
    from pytest_gpuperf.report import ReportMeta
    from pytest_gpuperf.runtime.info import DeviceInfo

    if state.meta is not None:
        return state.meta
    facts = git_facts(Path(config.rootpath))
    info = from_plain(DeviceInfo, state.devices[0]["info"]) if state.devices else None
    compare = state.settings.compare_ref or ""
    compare_commit = state.session.base_tree().commit if compare else ""
    state.meta = ReportMeta(
        device=info,
        project=Path(config.rootpath).name,
        commit=facts.commit,
        commit_time=facts.commit_time,
        branch=facts.branch,
        dirty=facts.dirty,
        command=" ".join(["pytest", *config.invocation_params.args]),
        compare_ref=compare,
        compare_commit=compare_commit,
        device_peaks=tuple((d["key"], d["peak_bps"]) for d in state.devices if "key" in d),
        suite_target=state.settings.suite_alarm,
        suite_checks=state.suite_checks,
        problems=tuple(state.problems),
        interrupted=state.interrupted or _stopped(config),
        gpus=state.gpu_records(),
        probe=to_plain(state.probe) if state.probe is not None else None,
        wall_s=time.monotonic() - state.began_s,
    )
    return state.meta


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write the saved baselines (each worker its own, one merge per file), then the JSON and
    Markdown files (once, in the controller), and release the device.

    Every fault on the way (a read-only or full disk, a lock not granted, Ctrl-C) is caught
    here and becomes a line of the summary; the rows of what was not saved say so, the report
    files are still written, and the exit status says what happened (docs/reliability.md):
    1 when a file could not be written, 2 when Ctrl-C stopped the run."""
    config = session.config
    state = _state(config)
    stopped = session.exitstatus == pytest.ExitCode.INTERRUPTED
    config.stash[STOPPED] = stopped
    try:
        try:
            if state._session is not None:
                outcome = state.session.flush_saves(interrupted=stopped or state.interrupted)
                state.problems += outcome.problems
                state.unsaved.update(outcome.unsaved)
                state.interrupted = state.interrupted or outcome.interrupted
        except KeyboardInterrupt:
            state.interrupted = True
            state.problems.append("interrupted (Ctrl-C) while saving baselines")
        if state._session is not None:
            state.note_gpu(
                state.session.gpu_facts(), os.environ.get("PYTEST_XDIST_WORKER", MAIN_WORKER)
            )
        if _is_xdist_worker(config):
            output = config.workeroutput  # type: ignore[attr-defined]
            output["gpuperf_gpu"] = state.session.gpu_facts() if state._session else None
            output["gpuperf_worker"] = os.environ.get("PYTEST_XDIST_WORKER", MAIN_WORKER)
            output["gpuperf_problems"] = list(state.problems)
            output["gpuperf_unsaved"] = dict(state.unsaved)
            output["gpuperf_collected"] = sorted(state.collected)
            output["gpuperf_interrupted"] = state.interrupted
            return
        _mark_unsaved(state)
        try:
            if not (stopped or state.interrupted):  # pruning writes: not after Ctrl-C
                _orphans(state)
            _write_files(config, state)
        except KeyboardInterrupt as stopped:  # a prune's save, or a report being written
            state.interrupted = True
            state.problems.append(
                f"{stopped}: not saved; the file was left as it was"
                if isinstance(stopped, SaveInterrupted) and not stopped.saved
                else "interrupted (Ctrl-C) while writing the reports"
            )
        if stopped or state.interrupted:
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        elif state.problems:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    finally:
        if state._session is not None:
            state.session.close()
            if state.session.hung:
                config.stash[EXIT_NOW] = int(session.exitstatus or pytest.ExitCode.TESTS_FAILED)


def _mark_unsaved(state: _State) -> None:
    """Rows whose save did not reach the disk say "not saved" and why (the gate planned the
    save; the file system or Ctrl-C had the last word)."""
    if not state.unsaved:
        return
    from dataclasses import replace

    from pytest_gpuperf.gate.saving import not_written

    for test_id, rows in state.rows.items():
        marked = []
        for row in rows:
            save = row.verdict.save
            reason = state.unsaved.get(save.path) if save is not None else None
            if reason is not None:
                row = replace(row, verdict=not_written(row.verdict, reason))
            marked.append(row)
        state.rows[test_id] = marked


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """After a kernel hung, end the process once every report is out: the kernel is still
    running, and a normal interpreter exit would wait on the driver for it."""
    shared = config.stash.get(SIM_SEED_SHARED, None)
    if shared is not None:
        os.environ.pop(shared[0], None)
    state = config.stash.get(STATE, None)
    if state is not None:
        if state._session is not None:
            state._session.close()
        config.pluginmanager.unregister(state)
    status = config.stash.get(EXIT_NOW, None)
    if status is not None:
        import sys

        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist: a worker's save errors reach the controller's summary and exit code."""
    output = getattr(node, "workeroutput", None) or {}
    state = _state(node.config)
    state.problems.extend(output.get("gpuperf_problems", ()))
    state.unsaved.update(output.get("gpuperf_unsaved", {}))
    state.collected.update(output.get("gpuperf_collected", ()))
    state.interrupted = state.interrupted or bool(output.get("gpuperf_interrupted"))
    state.note_gpu(output.get("gpuperf_gpu"), output.get("gpuperf_worker") or MAIN_WORKER)


def _orphans(state: _State) -> None:
    """List (or with --gpuperf-prune remove) the baseline entries no test of this run made."""
    rows = state.all_rows
    if not (state.settings.measure and rows):
        return
    from pytest_gpuperf.gate.judge import baseline_keys
    from pytest_gpuperf.orphans import find_orphans, prune
    from pytest_gpuperf.session import relative

    produced: dict[str, set[tuple[str, str]]] = {}
    for row in rows:
        produced.setdefault(row.test_id, set()).add((row.measurement.name, row.measurement.cache))
    store = state.session.baselines()
    keys = {baseline_keys(row.measurement)[0] for row in rows}
    try:
        orphans = find_orphans(store, keys, collected=state.collected, produced=produced)
    except GpuPerfError as problem:
        state.problems.append(f"orphaned baselines not checked: {problem}")
        return
    if not orphans:
        return
    if state.settings.prune:
        try:
            removed = prune(store, orphans)
        except GpuPerfError as problem:
            state.problems.append(f"orphaned baselines not pruned: {problem}")
            return
        for path, count in removed.items():
            state.orphan_lines.append(
                f"pruned {count} orphaned baseline entr{'ies' if count != 1 else 'y'} from "
                f"{relative(path, state.rootdir)}"
            )
        return
    shown = orphans[:20]
    state.orphan_lines.append(
        f"{len(orphans)} baseline entr{'ies' if len(orphans) != 1 else 'y'} no test of this run "
        "produced (a renamed or removed test, kernel or measurement? its new name then has no "
        "baseline): --gpuperf-prune removes them"
    )
    for orphan in shown:
        test_id, name, cache = orphan.key
        gone = "test not collected" if orphan.why == "test" else "not measured by its test"
        state.orphan_lines.append(
            f"  orphan: {test_id} [{name}, {cache}] in {relative(orphan.path, state.rootdir)}"
            f" ({gone})"
        )
    if len(orphans) > len(shown):
        state.orphan_lines.append(f"  ... and {len(orphans) - len(shown)} more")


def _write_files(config: pytest.Config, state: _State) -> None:
    from pytest_gpuperf import report

    settings = state.settings
    wanted = (settings.json_path, settings.benchmark_json_path, settings.markdown_path)
    if not any(wanted):
        return
    meta = _meta(config, state)
    rows = state.all_rows
    command = state.session.update_command

    def attempt(what: str, option: str, write: Any) -> None:  # one failed file must not
        try:  # cost the others
            done = write()
        except OSError as problem:
            state.problems.append(report.os_fault_line(f"{what} not written", problem, option))
            return
        if done is not None:
            state.written.append(f"{what}: {done}")

    static = config.pluginmanager.get_plugin("gpuperf-static")
    static_json = static.json() if static is not None and settings.static else None
    if settings.json_path:
        attempt(
            "JSON report",
            "--gpuperf-json=PATH",
            lambda: report.write_json(settings.json_path, report.to_json(rows, meta, static_json)),
        )
    if settings.benchmark_json_path:
        attempt(
            "pytest-benchmark JSON",
            "--gpuperf-benchmark-json=PATH",
            lambda: report.write_json(
                settings.benchmark_json_path, report.to_pytest_benchmark_json(rows, meta)
            ),
        )
    if settings.markdown_path:
        text = report.markdown(rows, meta, update_command=command)
        if static is not None and settings.static:  # gpuperf-static: its own summary (the
            # plugin is also registered by --gpuperf-save, which keeps this run's summary)
            text = static.markdown(meta)
        path = settings.markdown_path

        def write_markdown() -> Path:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            return path

        attempt("Markdown summary", "--gpuperf-markdown=PATH", write_markdown)
        attempt(
            "appended to $GITHUB_STEP_SUMMARY",
            "another $GITHUB_STEP_SUMMARY",
            lambda: report.append_github_step_summary(text),
        )


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    from pytest_gpuperf import report

    if _is_xdist_worker(config):
        return
    state = _state(config)
    rows = state.all_rows
    smoke = sum(state.smoke.values())
    missing_base = _missing_base_line(state)
    if not (rows or state.devices or smoke or state.problems or state.interrupted):
        if missing_base:
            terminalreporter.write_line(missing_base, yellow=True)
        return
    writer = terminalreporter
    simulated = any(d.get("simulated") for d in state.devices) or any(
        row.measurement.simulated for row in rows
    )
    title = "gpuperf" + (" — SIMULATED DEVICE" if simulated else "")
    writer.write_sep("=", title, bold=True, yellow=simulated)
    shown: set[str] = set()  # several GPUs of one run say the same thing once
    for device in state.devices:
        for line in device["lines"][1:] if rows else device["lines"]:
            if line not in shown:
                shown.add(line)
                writer.write_line(line, yellow="SIMULATED" in line or "FELL BACK" in line)
    if rows:
        width = config.get_terminal_writer().fullwidth
        table = report.terminal_table(
            rows, _meta(config, state), width=width, update_command=state.session.update_command
        )
        writer.write_line(table)
    elif smoke and not state.settings.static:  # gpuperf-static: nothing is timed there
        writer.write_line(
            f"gpuperf: smoke mode: {smoke} gpu_bench call(s) launched once and checked, "
            "nothing timed (--gpuperf measures and gates)"
        )
    if rows:
        from pytest_gpuperf.gate.suite import SuiteBudget
        from pytest_gpuperf.report.suite import suite_lines

        budget = SuiteBudget(state.settings.suite_alarm, max(state.suite_checks, 1))
        for line in suite_lines(rows, budget):
            writer.write_line(f"gpuperf: {line}")
    from pytest_gpuperf.session import relative

    for line in report.saved_lines(rows, state.unsaved, lambda p: relative(p, state.rootdir)):
        writer.write_line(f"gpuperf: {line}")
    for line in state.orphan_lines:
        writer.write_line(f"gpuperf: {line}")
    for line in state.written:
        writer.write_line(f"gpuperf: {line}")
    if missing_base:
        writer.write_line(missing_base, yellow=True)
    for problem in state.problems:
        writer.write_line(f"gpuperf: ERROR: {problem}", red=True)
    during_tests = _stopped(config)
    if state.interrupted or during_tests:
        line = report.interrupted_line(rows, smoke, during_tests=during_tests)
        writer.write_line(f"gpuperf: {line}", red=True)


def _uncomputed(bench: GpuBench) -> bool:
    try:
        return bool(bench.uncomputed())
    except GpuPerfError:
        return False


def _missing_base_line(state: _State) -> str:
    """Said once when --gpuperf-compare-missing-ok let a run go on without its base."""
    settings = state.settings
    if not (settings.compare_ref and settings.compare_missing_ok):
        return ""
    if not (settings.measure or settings.static) or state.session.base_tree().commit:
        return ""
    return (
        f"gpuperf: nothing was compared with {settings.compare_ref}: git cannot resolve it here, "
        "and --gpuperf-compare-missing-ok runs on without a base (every A/B is 'no base')"
    )


def _repeated_launches_hint(bench: GpuBench) -> str:
    """Why an output check that passes in smoke mode can fail under --gpuperf."""
    counts = ", ".join(
        f"{t.measurement.name}: {t.measurement.warmup_count + len(t.measurement.samples_s)}+"
        for t in bench.taken
    )
    return (
        "The output check failed after gpu_bench measured: under --gpuperf each kernel runs "
        f"many times on the same buffers (launches per measurement: {counts}). If the kernel "
        "updates a buffer in place or accumulates into its output, that buffer now holds the "
        "effect of all of them: reset it before every timed launch, e.g. "
        "gpu_bench(kernel, ..., setup=lambda: gpu_bench.fill(out, 0)), or check outputs of a "
        "separate untimed gpu_bench.launch(...) on fresh buffers (docs/writing-perf-tests.md)."
    )


def _progress(config: pytest.Config) -> Any:
    """Under -v (and not on an xdist worker, which has no terminal), a line per measurement as
    it completes: a long suite shows where it is."""
    if config.option.verbose < 1 or _is_xdist_worker(config):
        return None
    reporter = config.pluginmanager.getplugin("terminalreporter")
    capture = config.pluginmanager.getplugin("capturemanager")
    if reporter is None:
        return None

    def write(line: str) -> None:
        suspended = capture.global_and_fixture_disabled() if capture else contextlib.nullcontext()
        with suspended:
            reporter.write_line(line)

    return write
