"""The run before its first test: the checks that stop a broken run at once (baseline files,
the comparison ref, the report paths), the degraded-GPU probe an xdist controller hands its
workers, which tests were collected and measure, their settings from their markers, and the
header line naming the device.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from pytest_gpuperf.config import settings as options
from pytest_gpuperf.errors import BaselineError, ConfigError, DeviceUnavailable, GpuPerfError
from pytest_gpuperf.plugin.state import (
    FIXTURE,
    MARKER_PROBLEM,
    SIM_SEED_SHARED,
    TEST_SETTINGS,
    PluginState,
    is_xdist_controller,
    is_xdist_worker,
    state_of,
)


def pytest_sessionstart(session: pytest.Session) -> None:
    """A broken baseline file (or directory), a lock folder that cannot be used, or a report
    that could not be written, stops the run before any test, naming it: found after the
    tests, it would cost the summary (found at the first measurement, every test failed)."""
    state = state_of(session.config)
    state.narrowed = _narrowed_by(session.config)
    _note_the_checkout(session.config, state)
    if state.settings.measure:
        try:
            state.session.check_baseline_files()
        except BaselineError as broken:
            raise pytest.UsageError(f"pytest-gpuperf: {broken}") from None
        _no_baseline_folder(state)
    if state.settings.measure or state.settings.save:
        from pytest_gpuperf.baseline.shared_lock import (
            GPU_LOCK_NAMES,
            SAVE_LOCK_NAMES,
            ensure_lock_dir,
            lock_dir,
            unreadable_lock,
        )

        try:
            folder = ensure_lock_dir(lock_dir())
        except GpuPerfError as unusable:
            raise pytest.UsageError(f"pytest-gpuperf: {unusable}") from None
        saves = state.settings.save or state.settings.prune
        problem = unreadable_lock(folder, GPU_LOCK_NAMES + (SAVE_LOCK_NAMES if saves else ()))
        if problem:
            raise pytest.UsageError(f"pytest-gpuperf: {problem}")
    if state.settings.measure or state.settings.static:
        from pytest_gpuperf.session.base_tree import cache_in_checkout

        problem = cache_in_checkout(state.rootdir)
        if problem:
            raise pytest.UsageError(f"pytest-gpuperf: {problem}")
        try:
            state.session.check_compare_ref()
            state.session.check_head_ref()
        except GpuPerfError as unresolved:
            raise pytest.UsageError(f"pytest-gpuperf: {unresolved}") from None
    if not is_xdist_worker(session.config):
        from pytest_gpuperf.record.files import unwritable

        settings = state.settings
        active = settings.measure or settings.static  # a plain run stays as cheap as pytest's
        others = _pytest_reports(session.config) if active else []
        problem = unwritable(settings, others=others)
        if problem:
            raise pytest.UsageError(f"pytest-gpuperf: {problem}")
        if state.settings.gpu_index is not None:
            from pytest_gpuperf.session.device import gpu_index_problem

            problem = gpu_index_problem(state.settings)
            if problem:
                raise pytest.UsageError(f"pytest-gpuperf: {problem}")
    if is_xdist_controller(session.config):
        _share_sim_seed(session.config, state)
        _probe_gpus(session.config, state)


def _no_baseline_folder(state: PluginState) -> None:
    """A measuring run whose baseline folder, given by option or ini key, does not exist
    judges nothing against a stored baseline: under --gpuperf-strict that stops it before
    the first test; otherwise finish.py says it once in the summary (which runs count:
    PluginState's `missing_baseline_folder`)."""
    if state.settings.strict and state.missing_baseline_folder():
        from pytest_gpuperf.report.faults import missing_baseline_dir_line
        from pytest_gpuperf.session.bench_session import relative

        shown = relative(state.settings.baseline_dir, state.rootdir)
        raise pytest.UsageError(f"pytest-gpuperf: {missing_baseline_dir_line(shown, strict=True)}")


def _narrowed_by(config: pytest.Config) -> str:
    """What selected tests within the run's files (baseline/orphans.py's `narrowed_by`)."""
    from pytest_gpuperf.baseline.orphans import narrowed_by

    option = config.option
    return narrowed_by(
        [str(arg) for arg in config.args],
        keyword=getattr(option, "keyword", "") or "",
        markers=getattr(option, "markexpr", "") or "",
        deselected=getattr(option, "deselect", None) or (),
        last_failed=bool(getattr(option, "lf", False)),
        shard=state_of(config).settings.shard,
    )


def _note_the_checkout(config: pytest.Config, state: PluginState) -> None:
    """The checkout's commit and dirtiness for the reports, read before the run writes
    anything: read at the end, the baseline file a save had just rewritten made every saving
    run of a clean checkout "dirty" (and shards run with and without --gpuperf-save then
    disagreed on the commit)."""
    settings = state.settings
    if is_xdist_worker(config) or not (
        settings.measure
        or settings.static
        or settings.json_path
        or settings.benchmark_json_path
        or settings.markdown_path
    ):
        return
    from pytest_gpuperf.session.provenance import git_facts

    # the baseline folder is the run's data, not the code measured (a save's own provenance
    # ignores it too: the second save of a series is of the same, clean code)
    state.checkout = git_facts(Path(config.rootpath), ignore=[settings.baseline_dir])


def _pytest_reports(config: pytest.Config) -> list[tuple[str, Path]]:
    """pytest's own report files (--junitxml), which must not replace a file of ours."""
    xmlpath = getattr(config.option, "xmlpath", None)
    if not xmlpath:
        return []
    where = Path(config.invocation_params.dir) / os.path.expanduser(xmlpath)
    return [("--junitxml", Path(os.path.abspath(where)))]


def _share_sim_seed(config: pytest.Config, state: PluginState) -> None:
    """A run on the simulated device is one simulated machine, whatever the number of
    workers: the probe and every worker draw from the controller's seed (workers inherit its
    environment), so the run prints one seed and GPUPERF_SIM_SEED=<it> with the same -n
    reproduces it; else each worker would model its own machine and print its own seed.
    Restored when the session ends (in-process runs share os.environ)."""
    settings = state.settings
    if "sim" not in settings.allowed_backends:
        return
    from pytest_gpuperf.simulate.device_model import SEED_ENV, resolve_seed

    if os.environ.get(SEED_ENV):
        return
    config.stash[SIM_SEED_SHARED] = (SEED_ENV, os.environ.get(SEED_ENV))
    os.environ[SEED_ENV] = str(resolve_seed(None))


def _probe_gpus(config: pytest.Config, state: PluginState) -> None:
    """The degraded-GPU probe, once per run in the pytest-xdist controller, started here (this
    hook runs before xdist's, which starts the workers) and run while the workers start
    (session/probe_handoff.py): each worker reads the findings before it opens its GPU, so a
    refused GPU gets no worker and results are marked; _joined_probe waits for them before
    any test is handed out."""
    workers = config.getoption("numprocesses", None)
    if not isinstance(workers, int) or workers < 2:
        return
    from pytest_gpuperf.session.device import probe_for_workers
    from pytest_gpuperf.session.probe_handoff import ProbeInBackground

    settings, notify = state.settings, state.notify
    state.probe_handoff = ProbeInBackground(
        lambda: probe_for_workers(settings, workers, notify=notify)
    )


def _joined_probe(state: PluginState) -> None:
    """The controller's probe findings, once it has ended; a failed probe stops the run
    before any test, one line naming why."""
    handoff = state.probe_handoff
    if handoff is None:
        return
    try:
        state.probe = handoff.result()
    except GpuPerfError as problem:
        raise pytest.UsageError(f"pytest-gpuperf: degraded-GPU probe: {problem}") from None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: tell each worker where the controller's probe findings will be."""
    handoff = state_of(node.config).probe_handoff
    if handoff is not None:
        node.workerinput["gpuperf_probe_file"] = [str(handoff.path), os.getpid()]


def pytest_deselected(items: list[pytest.Item]) -> None:
    """Deselected tests exist: their baseline entries are not orphans; the measuring ones
    among them are remembered, for a strict run to name (--gpuperf-shard takes them out
    again: another shard measures them)."""
    if items:
        state = state_of(items[0].config)
        state.collected.update(item.nodeid for item in items)
        measuring = (item.nodeid for item in items if FIXTURE in getattr(item, "fixturenames", ()))
        state.deselected.update(dict.fromkeys(measuring))


def pytest_collection_finish(session: pytest.Session) -> None:
    state = state_of(session.config)
    state.collected.update(item.nodeid for item in session.items)
    state.count_checks(
        sum(1 for item in session.items if FIXTURE in getattr(item, "fixturenames", ()))
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marker arguments are read at collection, last, so marks other hooks add (a conftest
    turning its own marks into min_bw) count. A bad marker fails its own test when it runs,
    naming it; it does not abort a session in which that test is deselected."""
    state = state_of(config)
    settings = state.settings
    registered = _registered_markers(config) if settings.measure else set()
    for item in items:
        try:
            item.stash[TEST_SETTINGS] = item_settings(settings, item)
        except ConfigError as problem:
            item.stash[MARKER_PROBLEM] = f"pytest-gpuperf: {problem}"
        if settings.measure and MARKER_PROBLEM not in item.stash:
            typo = _misspelt(item, registered)
            if typo:
                item.stash[MARKER_PROBLEM] = f"pytest-gpuperf: {typo}"
    if settings.shard is not None:
        _select_shard(config, state, items)


def _registered_markers(config: pytest.Config) -> set[str]:
    """The names of the markers the run knows (pytest's, ours, the ini's, plugins')."""
    lines = config.getini("markers")
    return {str(line).split(":", 1)[0].split("(", 1)[0].strip() for line in lines}


def _misspelt(item: pytest.Item, registered: set[str]) -> str:
    """Under --gpuperf, the first marker of `item` that misspells one of ours, as the line
    that fails the test ("" when none does): a `min_bww` sets no floor, silently."""
    from pytest_gpuperf.config.parsing import misspelt_marker

    for mark in item.iter_markers():
        ours = misspelt_marker(mark.name, registered)
        if ours:
            return (
                f"{item.nodeid}: unknown marker '{mark.name}': did you mean '{ours}'? A "
                f"misspelt marker sets nothing (register '{mark.name}' in the ini's markers if "
                "it is another plugin's; --strict-markers makes any unknown marker an error)"
            )
    return ""


def _select_shard(config: pytest.Config, state: PluginState, items: list[pytest.Item]) -> None:
    """--gpuperf-shard=K/N: keep this runner's part of what every other selection left (-k,
    -m, a conftest), and count the whole suite's measuring tests for the false-alarm budget."""
    from pytest_gpuperf.session.shard import plan_shard

    index, count = state.settings.shard or (1, 1)
    device_key, costs = state.session.recorded_costs()
    tests = [(item.nodeid, FIXTURE in getattr(item, "fixturenames", ())) for item in items]
    plan = plan_shard(index, count, tests, costs, device_key=device_key)
    keep = set(plan.selected)
    deselected = [item for item in items if item.nodeid not in keep]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if item.nodeid in keep]
        for item in deselected:  # measured by the shard the plan gave it
            state.deselected.pop(item.nodeid, None)
    state.shard = plan
    state.count_checks(plan.suite_tests)


def item_settings(settings: options.Settings, item: pytest.Item) -> options.TestSettings:
    def marks(name: str) -> list[options.MarkerArgs]:
        return [
            options.MarkerArgs(tuple(mark.args), dict(mark.kwargs))
            for mark in item.iter_markers(name)
        ]

    return options.settings_for_test(
        settings,
        item.nodeid,
        min_bw=marks("min_bw"),
        gpuperf=marks("gpuperf"),
        min_flops=marks("min_flops"),
        min_roofline=marks("min_roofline"),
    )


@pytest.hookimpl(tryfirst=True)  # before pytest's loop, and before xdist's hands out tests
def pytest_runtestloop(session: pytest.Session) -> None:
    """--gpuperf-require on a machine without the required GPU: one session-level error,
    before any test runs, instead of the same long reason as a setup error of every test.
    The run fails (exit 1), the summary and the report files say why."""
    config = session.config
    state = state_of(config)
    settings = state.settings
    _joined_probe(state)
    if is_xdist_worker(config) or config.option.collectonly or not settings.require:
        return
    if settings.static:  # gpuperf-static: --gpuperf-require asks for the clang there
        return
    if is_xdist_controller(config):
        from pytest_gpuperf.session.device import required_device_missing

        missing = required_device_missing(settings)
    elif not any(FIXTURE in getattr(item, "fixturenames", ()) for item in session.items):
        return
    else:
        try:
            state.session.device()
            return
        except DeviceUnavailable as unavailable:
            missing = unavailable
        except GpuPerfError:  # a device that is there but cannot be set up: its tests say so
            return
    if missing is None:
        return
    state.problems.append(str(missing))
    session.shouldfail = (
        f"gpuperf: --gpuperf-require={settings.require} found no such GPU: no test ran"
    )
    raise session.Failed(session.shouldfail)


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    """Open the device as soon as some collected test needs it, so the header says which
    device runs the tests, and says SIMULATED when it is."""
    if config.option.collectonly or is_xdist_controller(config):
        return []
    state = state_of(config)
    shard = [f"gpuperf: {state.shard.describe()}"] if state.shard is not None else []
    if not any(FIXTURE in getattr(item, "fixturenames", ()) for item in items):
        return shard
    try:
        return shard + state.session.device().describe(verbose=config.get_verbosity() > 0)
    except DeviceUnavailable as unavailable:
        if state.settings.require:  # with or without --gpuperf: a missing GPU fails
            return [
                *shard,
                f"gpuperf: --gpuperf-require={state.settings.require} and no usable GPU: the "
                "run stops before its first test (why: the summary's ERROR line)",
            ]
        return [*shard, f"gpuperf: {unavailable}; tests using {FIXTURE} will be skipped"]
    except GpuPerfError as problem:
        return [*shard, f"gpuperf: the device could not be set up: {problem}"]
