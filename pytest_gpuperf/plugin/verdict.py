"""Each test: the `gpu_bench` fixture, and the hooks that hand its measurements to the gate
once its body is done and attach the rows to its report (as plain data, for xdist).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import warnings
from collections.abc import Generator, Iterator
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import pytest

from pytest_gpuperf.errors import (
    DeviceFault,
    DeviceUnavailable,
    GpuPerfError,
    NotMeasured,
)
from pytest_gpuperf.plugin.collect import item_settings
from pytest_gpuperf.plugin.explain_pass import EXPLAINED, judgement_strict
from pytest_gpuperf.plugin.state import (
    BENCH,
    FAILED_SUBTESTS,
    FIXTURE,
    IN_CALL,
    JUDGEMENT,
    MAIN_WORKER,
    MARKER_PROBLEM,
    NOT_MEASURED,
    RECORDER,
    TEST_SETTINGS,
    GpuPerfWarning,
    is_xdist_worker,
    state_of,
)

if TYPE_CHECKING:
    from pytest_gpuperf.session.bench_session import BenchSession, Judgement
    from pytest_gpuperf.session.callable_base import TestBody
    from pytest_gpuperf.session.fixture import GpuBench


def pytest_runtest_setup(item: pytest.Item) -> None:
    problem = item.stash.get(MARKER_PROBLEM, None)
    if problem is not None and FIXTURE in getattr(item, "fixturenames", ()):
        pytest.fail(problem, pytrace=False)


@pytest.fixture
def gpu_bench(request: pytest.FixtureRequest) -> Iterator[GpuBench]:
    """Compile, move data to and measure kernels on the session's GPU (see GpuBench).

    Skips, saying what was tried, when no usable GPU is found; fails instead under
    --gpuperf-require, so a runner that lost its GPU never goes green.
    """
    from pytest_gpuperf.session.fixture import GpuBench

    state = state_of(request.config)
    item = request.node
    test = item.stash.get(TEST_SETTINGS, None) or item_settings(state.settings, item)
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
        state.session,
        device,
        test,
        test_path=Path(item.path),
        progress=_progress(request.config),
        heartbeat=_terminal_line(request.config),
        body=(body := _test_body(item, request)),
    )
    item.stash[BENCH] = bench
    try:
        yield bench
    finally:
        problems = body.finish() if body is not None else []
        bench.close()
        for problem in problems:  # a base fixture's teardown at REF: one line, not a failure
            warnings.warn(GpuPerfWarning(f"gpuperf: {item.nodeid}: {problem}"), stacklevel=1)


def _test_body(item: pytest.Item, request: pytest.FixtureRequest) -> TestBody | None:
    """The test function, its fixture values and fixtures, and what it ran so far, for a
    callable's base (callable_base.py)."""
    from pytest_gpuperf.plugin.recording import fixture_specs
    from pytest_gpuperf.session.callable_base import TestBody
    from pytest_gpuperf.session.executed import NOT_RECORDED

    function = getattr(item, "obj", None)
    if not callable(function):
        return None
    recorder = item.stash.get(RECORDER, None)
    return TestBody(
        function,
        lambda: dict(getattr(item, "funcargs", {})),
        fixtures=lambda: fixture_specs(item),
        record=recorder.snapshot if recorder is not None else lambda: NOT_RECORDED,
        request=request,
    )


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
        if isinstance(failure, NotMeasured) and item.stash.get(BENCH, None) is not None:
            _not_measured(item, failure)  # a gpu_bench measurement's, not any test's
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
    from pytest_gpuperf.plugin.explain_pass import bytes_warnings, explain_test
    from pytest_gpuperf.record.verdict import FAIL, MARGINAL, MODELLED
    from pytest_gpuperf.report import failure_text, junit_properties, not_measured_reason
    from pytest_gpuperf.report.traffic_words import explain_block
    from pytest_gpuperf.report.visible import visible

    explained = item.stash[EXPLAINED] = explain_test(item, judgement)
    if explained:  # the profiler's counters join the code facts in each verdict's `explain`
        from pytest_gpuperf.gate.decide import with_explanation

        judgement = item.stash[JUDGEMENT] = replace(
            judgement,
            verdicts=tuple(
                (m, with_explanation(v, {"code": None, **(v.explain or {}), **explained[i]}))
                if i in explained
                else (m, v)
                for i, (m, v) in enumerate(judgement.verdicts)
            ),
        )
    verdicts = judgement.verdicts
    verbose = item.config.get_verbosity() > 0  # -v: every check, not only what decided
    for measurement, verdict in verdicts:
        prefix = "gpuperf" if len(verdicts) == 1 else f"gpuperf.{measurement.name}"
        item.user_properties.extend(junit_properties(measurement, verdict, prefix=prefix))
        if verdict.status == MARGINAL:
            text = failure_text(measurement, verdict, verbose=verbose)
            item.warn(GpuPerfWarning("\n".join(map(visible, text.split("\n")))))
        if verdict.floor is not None and verdict.floor.hot_floor:
            item.warn(
                GpuPerfWarning(
                    f"{measurement.name}: a floor in hot mode compares cache bandwidth with the "
                    "HBM peak (hot runs can read over 100%); put floors on cold or rotate "
                    "measurements"
                )
            )
    failures = [
        failure_text(m, v, verbose=verbose, test_id=item.nodeid) + explain_block(v.explain)
        for m, v in verdicts
        if v.status == FAIL
    ]
    for line in bytes_warnings(item, explained):
        item.warn(GpuPerfWarning(line))
        if state_of(item.config).settings.strict or judgement_strict(item):
            failures.append(line)
    if failures:
        # the baseline's provenance and boards come from its file: each line stays one line
        text = "\n\n".join(failures)
        pytest.fail("\n".join(map(visible, text.split("\n"))), pytrace=False)
    modelled = [(m, v) for m, v in verdicts if v.status == MODELLED]
    if modelled:  # only a measured verdict is green: xfailed, with the reason on its line
        pytest.xfail(not_measured_reason(modelled))
    return result


def _not_measured(item: pytest.Item, failure: NotMeasured) -> None:
    """A measurement that could not be taken (no usable sample by its budget, or its hard
    limit reached): the test is not judged, in one line. Only
    a measured verdict is green, so it is xfailed with the reason on its line (as a change
    that was not measured is), and --gpuperf-strict fails it."""
    item.stash[NOT_MEASURED] = failure
    line = f"gpuperf: {failure}"
    if state_of(item.config).settings.strict:
        pytest.fail(f"{line} (--gpuperf-strict fails a measurement not taken)", pytrace=False)
    pytest.xfail(line)


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
    session = state_of(item.config).session
    judgement = session.judge(
        bench.test, bench.taken, unjudged=unjudged, remeasure=None if unjudged else bench.confirm
    )
    judgement = _explained(session, bench, judgement)
    item.stash[JUDGEMENT] = judgement
    return judgement


def _explained(session: BenchSession, bench: GpuBench, judgement: Judgement) -> Judgement:
    """The judgement with each failure that has a base explained (explain/): a run where
    nothing fails imports none of it."""
    from pytest_gpuperf.explain import needs_explaining

    every = session.settings.code_facts  # --gpuperf-code-facts: bisect's probes
    if not every and not any(needs_explaining(verdict) for _, verdict in judgement.verdicts):
        return judgement
    from pytest_gpuperf.explain.code.failure import explain_verdicts

    explained = explain_verdicts(session, bench, judgement.verdicts, every=every)
    return replace(judgement, verdicts=explained)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Attach the test's rows to its report as plain data: pytest-xdist carries extra report
    attributes from workers to the controller, where the summary and files are made. A report
    made while the body still runs is a subtest's: a failed one keeps the test unjudged."""
    _hide_plugin_frames(item, call)
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
        report.sections.append(("gpuperf", _check_failed_hint(bench)))
    from pytest_gpuperf.engine.plain import to_plain
    from pytest_gpuperf.record.verdict import Row

    not_measured = item.stash.get(NOT_MEASURED, None)  # no type context: mypy 1.10 misreads it
    payload: dict[str, Any] = {
        "rows": [],
        "smoke": sum(1 for r in bench.results if not r.measured),
        "suite_checks": state_of(item.config).suite_checks,
        "kernel_files": bench.kernel_files(Path(item.config.rootpath)),
        "error": _gpuperf_error(call, not_measured),
    }
    judgement = item.stash.get(JUDGEMENT, None)
    if judgement is not None:
        payload["rows"] = [
            to_plain(Row(item.nodeid, m, v, test_outcome=report.outcome))
            for m, v in judgement.verdicts
        ]
    session = state_of(item.config).session
    if session.opened:
        with contextlib.suppress(GpuPerfError):
            device = session.device()
            payload["device"] = {
                "info": to_plain(device.info),
                "lines": device.describe(verbose=True),
                "simulated": device.simulated,
                "key": device.match.spec.key,
                "peak_bps": device.match.spec.peak_bps,
            }
            payload["gpu"] = session.gpu_facts()
    payload["worker"] = os.environ.get("PYTEST_XDIST_WORKER", MAIN_WORKER)
    report.gpuperf = payload  # type: ignore[attr-defined]
    return report


_PACKAGE = Path(__file__).resolve().parent.parent


def _hide_plugin_frames(item: pytest.Item, call: pytest.CallInfo[None]) -> None:
    """A mistake in a test (a missing kernel file, a wrong argument count, no declared bytes)
    raises one of our errors deep in the plugin; the report shows the user's frames and our
    message, not the ~40 lines of our own stack between them (pytest hides its own frames the
    same way). --fulltrace still shows everything; an error that is not ours (a bug in the
    plugin) keeps its whole traceback.

    The frames are unlinked from the raw traceback, not only filtered from pytest's view of
    it: pytest cuts the traceback at the test function by following the raw links again."""
    excinfo = call.excinfo
    if excinfo is None or not excinfo.errisinstance(GpuPerfError):
        return
    if item.config.getoption("fulltrace", False):
        return
    frames: list[TracebackType] = []
    link: TracebackType | None = excinfo.tb
    while link is not None:
        frames.append(link)
        link = link.tb_next
    kept = [tb for tb in frames if not _ours(tb.tb_frame.f_code.co_filename)]
    if not kept or len(kept) == len(frames) or kept[0] is not frames[0]:
        return
    for earlier, later in itertools.pairwise(kept):
        earlier.tb_next = later
    kept[-1].tb_next = None
    excinfo.traceback = type(excinfo.traceback)(kept[0])  # pytest's own Traceback type


def _ours(filename: str) -> bool:
    try:
        return Path(filename).resolve().is_relative_to(_PACKAGE)
    except (OSError, ValueError):
        return False


def _gpuperf_error(call: pytest.CallInfo[None], not_measured: GpuPerfError | None) -> str:
    """The first line of the gpuperf error that stopped the test body ("" for none): a
    kernel that does not compile, a missing kernel file, a launch that failed."""
    if not_measured is not None:  # xfailed (or failed under strict) in its stead
        return f"{type(not_measured).__name__}: {str(not_measured).strip().splitlines()[0]}"
    if call.excinfo is None or not call.excinfo.errisinstance(GpuPerfError):
        return ""
    lines = str(call.excinfo.value).strip().splitlines()
    return f"{call.excinfo.typename}: {lines[0] if lines else ''}"


def _uncomputed(bench: GpuBench) -> bool:
    try:
        return bool(bench.uncomputed())
    except GpuPerfError:
        return False


def _check_failed_hint(bench: GpuBench) -> str:
    """Why the output check failed after measuring: elements no launch wrote (a grid that
    does not cover the data: measuring does not cause that, and blaming repeated launches
    would send the user the wrong way), else what repeated launches do to in-place updates."""
    try:
        unwritten = bench.unwritten()
    except GpuPerfError:
        unwritten = []
    if not unwritten:
        return _repeated_launches_hint(bench)
    outputs = "; ".join(
        f"{u.count:,} of {u.total:,} elements of gpu_bench.empty #{u.number}" for u in unwritten
    )
    launches = ", ".join(
        f"{t.measurement.name} on grid {_dims(t.measurement.grid)} x block "
        f"{_dims(t.measurement.block)}"
        for t in bench.taken
        if t.measurement.grid and t.measurement.block
    )
    return (
        f"The output check failed on elements no launch wrote: {outputs} still hold its 0xFF "
        "fill. Does the grid cover every element?" + (f" Launched: {launches}." if launches else "")
    )


def _dims(dims: tuple[int, ...]) -> str:
    used = list(dims)
    while len(used) > 1 and used[-1] == 1:
        used.pop()
    return "x".join(str(d) for d in used)


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
        "gpu_bench(kernel, ..., setup=lambda: gpu_bench.fill(out, 0)) for an accumulator, "
        "setup=lambda: gpu_bench.copy(x, x_pristine) for an input updated in place, or check "
        "outputs of a separate untimed gpu_bench.launch(...) on fresh buffers "
        "(docs/writing-perf-tests.md)."
    )


def _progress(config: pytest.Config) -> Any:
    """Under -v (and not on an xdist worker, which has no terminal), a line per measurement as
    it completes: a long suite shows where it is."""
    if config.option.verbose < 1:
        return None
    return _terminal_line(config)


def _terminal_line(config: pytest.Config) -> Any:
    """A writer of one line to the terminal, past pytest's capture (None on an xdist worker,
    which has no terminal): a measurement sampling for long says where it is at any
    verbosity (engine.policy.PROGRESS_EVERY_S)."""
    if is_xdist_worker(config):
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
