"""The pytest layer, and only that: options, ini keys, markers, the `gpu_bench` fixture, the
hooks that apply verdicts after a test body passed, and the reports at the end.

Everything that does not need `config`, `item` or `request` lives below this module:
settings.py (options and markers), session.py (device, modules, verdicts, baseline saves),
fixture.py (GpuBench), report.py (table, JSON, Markdown, JUnit properties).
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_gpuperf import settings as options
from pytest_gpuperf.errors import BaselineError, ConfigError, DeviceUnavailable, GpuPerfError
from pytest_gpuperf.fixture import GpuBench
from pytest_gpuperf.session import (
    BenchSession,
    Judgement,
    device_info_from_wire,
    device_to_wire,
    git_facts,
    row_from_wire,
    row_to_wire,
)

FIXTURE = "gpu_bench"


class GpuPerfWarning(pytest.PytestWarning):
    """A marginal result: passed on the median while its interval straddles the floor.

    Turn these into failures with `-W error::pytest_gpuperf.plugin.GpuPerfWarning`.
    """


@dataclass(eq=False)  # registered as a plugin: must stay hashable
class _State:
    """What the plugin keeps per pytest process; registered as a plugin itself, to receive
    every test report (from xdist workers too) without a module-level global."""

    session: BenchSession
    rows: list[Any] = field(default_factory=list)  # report.Row, gathered from test reports
    devices: list[dict[str, Any]] = field(default_factory=list)
    smoke_launches: int = 0
    written: list[str] = field(default_factory=list)
    meta: Any = None  # report.ReportMeta, made once at the end

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        payload = getattr(report, "gpuperf", None)
        if report.when != "call" or not payload:
            return
        self.rows.extend(row_from_wire(row) for row in payload.get("rows", ()))
        self.smoke_launches += int(payload.get("smoke", 0))
        device = payload.get("device")
        if device and all(d["lines"] != device["lines"] for d in self.devices):
            self.devices.append(device)


STATE = pytest.StashKey[_State]()
TEST_SETTINGS = pytest.StashKey[options.TestSettings]()
BENCH = pytest.StashKey[GpuBench]()
JUDGEMENT = pytest.StashKey[Judgement]()


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
            parser.addini(
                spec.ini,
                help=f"ini equivalent of {spec.flag}: {spec.help}",
                type="bool" if spec.is_flag else "string",
                default=None,
            )


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
    worker = options.xdist_worker_number()
    state = _State(BenchSession(built, rootdir=Path(config.rootpath), worker=worker))
    config.stash[STATE] = state
    config.pluginmanager.register(state, "gpuperf-state")


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is not None:
        state.session.close()
        config.pluginmanager.unregister(state)


def _state(config: pytest.Config) -> _State:
    return config.stash[STATE]


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _is_xdist_controller(config: pytest.Config) -> bool:
    return bool(getattr(config.option, "numprocesses", None)) and not _is_xdist_worker(config)


def pytest_report_header(config: pytest.Config) -> list[str]:
    settings = _state(config).session.settings
    if not settings.measure:
        return [
            "gpuperf: smoke mode (each gpu_bench call launches once, no timing, no gate); "
            "--gpuperf measures and gates"
        ]
    lines = [f"gpuperf: {options.describe(settings)}"]
    if "sim" in settings.backends:
        first = settings.backends[0]
        which = "is the only backend" if first == "sim" else "is the fallback when no GPU is found"
        lines.append(f"gpuperf: the SIMULATED device {which} (--gpuperf-backend)")
    return lines


def pytest_sessionstart(session: pytest.Session) -> None:
    """A broken baseline file stops the run before any test, naming its file and line."""
    state = _state(session.config)
    if state.session.settings.measure:
        try:
            state.session.check_baseline_files()
        except BaselineError as broken:
            raise pytest.UsageError(f"pytest-gpuperf: {broken}") from None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marker arguments are checked at collection: a bad one is a usage error naming the test.
    Last, so markers other hooks add (a conftest turning its own marks into min_bw) count."""
    settings = _state(config).session.settings
    for item in items:
        try:
            item.stash[TEST_SETTINGS] = _test_settings(settings, item)
        except ConfigError as problem:
            raise pytest.UsageError(f"pytest-gpuperf: {problem}") from None


def _test_settings(settings: options.Settings, item: pytest.Item) -> options.TestSettings:
    def marker(name: str) -> options.MarkerArgs | None:
        mark = item.get_closest_marker(name)
        return options.MarkerArgs(tuple(mark.args), dict(mark.kwargs)) if mark else None

    return options.settings_for_test(
        settings, item.nodeid, min_bw=marker("min_bw"), gpuperf=marker("gpuperf")
    )


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    """Open the device as soon as some collected test needs it, so the header says which
    device runs the tests, and says SIMULATED when it is."""
    if config.option.collectonly or _is_xdist_controller(config):
        return []
    if not any(FIXTURE in getattr(item, "fixturenames", ()) for item in items):
        return []
    try:
        return _state(config).session.device().describe()
    except DeviceUnavailable as unavailable:
        return [f"gpuperf: {unavailable}; tests using {FIXTURE} will be skipped"]
    except GpuPerfError as problem:
        return [f"gpuperf: the device could not be set up: {problem}"]


# -- the fixture ---------------------------------------------------------------------------------


@pytest.fixture
def gpu_bench(request: pytest.FixtureRequest) -> Iterator[GpuBench]:
    """Compile, move data to and measure kernels on the session's GPU (see GpuBench).

    Skips, saying what was tried, when no usable GPU is found.
    """
    state = _state(request.config)
    item = request.node
    test = item.stash.get(TEST_SETTINGS, None) or _test_settings(state.session.settings, item)
    try:
        device = state.session.device()
    except DeviceUnavailable as unavailable:
        pytest.skip(f"gpuperf: {unavailable}")
    bench = GpuBench(state.session, device, test, test_path=Path(item.path))
    item.stash[BENCH] = bench
    try:
        yield bench
    finally:
        bench.close()


# -- verdicts --------------------------------------------------------------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """Gate the measurements once the test body has passed: its own output checks come first,
    so a kernel with wrong results never passes on time alone. A failed gate fails the test."""
    result = yield
    bench = item.stash.get(BENCH, None)
    if bench is None or not bench.measuring:
        return result
    measurements = [r.measurement for r in bench.results if r.measurement is not None]
    if not measurements:
        return result
    try:
        judgement = _state(item.config).session.judge(bench.test, measurements)
    except GpuPerfError as problem:  # e.g. a baseline file that cannot be written
        pytest.fail(f"gpuperf: {problem}", pytrace=False)
    item.stash[JUDGEMENT] = judgement
    item.user_properties.extend(judgement.properties)
    for text in judgement.warnings:
        item.warn(GpuPerfWarning(text))
    if judgement.failures:
        pytest.fail("\n\n".join(judgement.failures), pytrace=False)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Attach the test's rows to its report as plain data: pytest-xdist carries extra report
    attributes from workers to the controller, where the summary and files are made."""
    report = yield
    if call.when != "call":
        return report
    bench = item.stash.get(BENCH, None)
    if bench is None:
        return report
    payload: dict[str, Any] = {
        "rows": [],
        "smoke": sum(1 for r in bench.results if not r.measured),
    }
    judgement = item.stash.get(JUDGEMENT, None)
    if judgement is not None:
        payload["rows"] = [row_to_wire(item.nodeid, m, v) for m, v in judgement.verdicts]
    session = _state(item.config).session
    if session.opened:
        with contextlib.suppress(GpuPerfError):
            payload["device"] = device_to_wire(session.device())
    report.gpuperf = payload  # type: ignore[attr-defined]
    return report


# -- reports ---------------------------------------------------------------------------------------


def _meta(config: pytest.Config, state: _State) -> Any:
    from pytest_gpuperf.report import ReportMeta

    if state.meta is not None:
        return state.meta
    facts = git_facts(Path(config.rootpath))
    info = device_info_from_wire(state.devices[0]) if state.devices else None
    state.meta = ReportMeta(
        device=info,
        project=Path(config.rootpath).name,
        commit=facts.commit,
        commit_time=facts.commit_time,
        branch=facts.branch,
        dirty=facts.dirty,
        command=" ".join(["pytest", *config.invocation_params.args]),
    )
    return state.meta


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write the JSON / Markdown files (once, in the controller) and release the device."""
    config = session.config
    state = _state(config)
    try:
        if not _is_xdist_worker(config):
            _write_files(config, state)
    finally:
        state.session.close()


def _write_files(config: pytest.Config, state: _State) -> None:
    from pytest_gpuperf import report

    settings = state.session.settings
    wanted = (settings.json_path, settings.benchmark_json_path, settings.markdown_path)
    if not any(wanted):
        return
    meta = _meta(config, state)
    rows = state.rows
    if settings.json_path:
        report.write_json(settings.json_path, report.to_json(rows, meta))
        state.written.append(f"JSON report: {settings.json_path}")
    if settings.benchmark_json_path:
        report.write_json(settings.benchmark_json_path, report.to_pytest_benchmark_json(rows, meta))
        state.written.append(f"pytest-benchmark JSON: {settings.benchmark_json_path}")
    if settings.markdown_path:
        text = report.markdown(rows, meta)
        settings.markdown_path.parent.mkdir(parents=True, exist_ok=True)
        settings.markdown_path.write_text(text, encoding="utf-8")
        state.written.append(f"Markdown summary: {settings.markdown_path}")
        summary = report.append_github_step_summary(text)
        if summary is not None:
            state.written.append(f"appended to $GITHUB_STEP_SUMMARY ({summary})")


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    from pytest_gpuperf import report

    if _is_xdist_worker(config):
        return
    state = _state(config)
    if not (state.rows or state.devices or state.smoke_launches):
        return
    writer = terminalreporter
    simulated = any(d.get("simulated") for d in state.devices) or any(
        row.measurement.simulated for row in state.rows
    )
    title = "gpuperf" + (" — SIMULATED DEVICE" if simulated else "")
    writer.write_sep("=", title, bold=True, yellow=simulated)
    for device in state.devices:
        for line in device["lines"][1:] if state.rows else device["lines"]:
            writer.write_line(line, yellow="SIMULATED" in line or "FELL BACK" in line)
    if state.rows:
        width = config.get_terminal_writer().fullwidth
        writer.write_line(report.terminal_table(state.rows, _meta(config, state), width=width))
        missing = state.session.missing_baselines(state.rows)
        if missing:
            writer.write_line(f"gpuperf: {missing}")
    elif state.smoke_launches:
        writer.write_line(
            f"gpuperf: smoke mode: {state.smoke_launches} gpu_bench call(s) launched once and "
            "checked, nothing timed (--gpuperf measures and gates)"
        )
    for line in state.written:
        writer.write_line(f"gpuperf: {line}")
