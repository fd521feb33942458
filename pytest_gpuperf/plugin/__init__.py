"""The pytest layer's entry point (the `pytest11` entry point loads this module): options, ini
keys and markers, the run's settings and state, the header, and the modules that hold the
rest of the hooks, one question each:

- plugin/collect.py: the run before its first test (checks that stop it, collection, markers);
- plugin/verdict.py: each test (the `gpu_bench` fixture, the gate once its body is done);
- plugin/finish.py: the end of the run (saves, orphans, report files, the summary);
- plugin/state.py: what they share (the per-process state, the typed stash keys);
- plugin/static_gate.py: the static gate, registered only when it is on.

Loading it is cheap: these import the settings and the errors, nothing else; NumPy, SciPy and
the backends load when a test first uses `gpu_bench` or a run measures (session/bench_session.py,
fixture.py, gate/, report/ hold everything that does not need `config`, `item` or `request`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from pytest_gpuperf.config import settings as options
from pytest_gpuperf.config.options import OptionSpec
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.plugin.state import (
    EXIT_NOW,
    RESTORE_SIGTERM,
    SIM_SEED_SHARED,
    STATE,
    PluginState,
    state_of,
    terminal_notifier,
)

# The documented name: -W error::pytest_gpuperf.plugin.GpuPerfWarning
from pytest_gpuperf.plugin.state import GpuPerfWarning as GpuPerfWarning

# Registered with this module, in this order, wherever it is loaded from (the entry point,
# -p, a conftest): a hook in a module pytest does not load as a plugin is never called.
# Nothing above may import them: pytest rewrites the asserts of a plugin module on its first
# import, and one imported earlier makes every run print a PytestAssertRewriteWarning.
pytest_plugins = (
    "pytest_gpuperf.plugin.collect",
    "pytest_gpuperf.plugin.recording",
    "pytest_gpuperf.plugin.verdict",
    "pytest_gpuperf.plugin.finish",
)


# pytest 8.4 added the int and float ini types; before it numbers are read as strings
# (and parsed by the plugin, as they are from the command line).
_NUMERIC_INI = pytest.version_tuple >= (8, 4)


def _ini_type(spec: OptionSpec) -> Any:  # pytest's own type alias is private
    if spec.is_flag:
        return "bool"
    numeric = spec.ini_type in ("int", "float")
    return "string" if numeric and not _NUMERIC_INI else spec.ini_type


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpuperf", "GPU kernel performance (pytest-gpuperf)")
    for spec in options.OPTIONS:
        argparse_help = spec.help.replace("%", "%%")  # argparse %-formats help texts
        if spec.is_flag:
            group.addoption(
                spec.flag, action="store_true", default=None, dest=spec.dest, help=argparse_help
            )
        elif spec.repeatable:
            group.addoption(
                spec.flag,
                action="append",
                dest=spec.dest,
                metavar=spec.metavar,
                default=None,
                help=argparse_help,
            )
        else:
            group.addoption(
                spec.flag, dest=spec.dest, metavar=spec.metavar, default=None, help=argparse_help
            )
        if spec.ini:  # one line in --help: the start of what the option says
            parser.addini(spec.ini, help=spec.ini_help, type=_ini_type(spec), default=None)


@pytest.hookimpl(tryfirst=True)  # before pytest-benchmark's, which reads the option below
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"min_bw(fraction): {options.MIN_BW_HELP}")
    config.addinivalue_line("markers", f"min_flops(fraction): {options.MIN_FLOPS_HELP}")
    config.addinivalue_line("markers", f"min_roofline(fraction): {options.MIN_ROOFLINE_HELP}")
    config.addinivalue_line("markers", f"gpuperf(**settings): {options.GPUPERF_HELP}")
    try:
        flag_note = _settle_measuring_flags(config)
        cli = {spec.dest: config.getoption(spec.dest) for spec in options.OPTIONS}
        ini = {spec.ini: _getini(config, spec.ini) for spec in options.OPTIONS if spec.ini}
        built = options.build_settings(
            cli,
            ini,
            rootdir=Path(config.rootpath),
            invocation_dir=Path(config.invocation_params.dir),
        )
    except ConfigError as problem:
        raise pytest.UsageError(f"pytest-gpuperf: {problem}") from None
    _quiet_pytest_benchmark(config, built)
    state = PluginState(built, Path(config.rootpath), options.xdist_worker_number())
    state.notify = terminal_notifier(config)
    state.flag_note = flag_note
    probe_file = getattr(config, "workerinput", {}).get("gpuperf_probe_file")
    if probe_file is not None:  # the controller's degraded-GPU probe (pytest_configure_node)
        path, controller_pid = probe_file
        state.probe_file = (Path(path), controller_pid if os.getppid() == controller_pid else None)
    config.stash[STATE] = state
    config.pluginmanager.register(state, "gpuperf-state")
    _ignored_profile_plan(config)
    if (
        built.measure
        or built.static
        or built.json_path
        or built.benchmark_json_path
        or built.markdown_path
    ):
        # SIGTERM (a CI timeout, a cancelled job) ends the run as Ctrl-C does, with the
        # summary and the reports (errors.py); a run with nothing to report keeps pytest's own
        # handling
        from pytest_gpuperf.errors import stop_on_sigterm

        config.stash[RESTORE_SIGTERM] = stop_on_sigterm(
            forward=lambda: tuple(state.worker_pids.values())
        )
    # gpuperf-static: the static gate's hooks, only when it is on, or when a save on a GPU
    # may record the facts of the AMD code objects it loaded (plugin/static_gate.py)
    if built.static or built.save:
        from pytest_gpuperf.plugin.static_gate import PLUGIN_NAME, StaticPlugin

        config.pluginmanager.register(StaticPlugin(state), PLUGIN_NAME)


def _settle_measuring_flags(config: pytest.Config) -> str:
    """`--no-gpuperf` against `--gpuperf` (or `--gpuperf-save`, `--gpuperf-compare`) from
    different places: the one typed on the command line wins over PYTEST_ADDOPTS and the
    ini file's addopts (config/flag_origins.py); the loser is cleared from pytest's options,
    which the xdist workers then receive as settled. The line saying so, or "" (a
    ConfigError when neither side was typed, or both were)."""
    if hasattr(config, "workerinput"):
        return ""  # the controller settled them
    import shlex

    from pytest_gpuperf.config import flag_origins

    try:
        env_args = shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))
    except ValueError:  # pytest itself has split it already; unreadable here is not given
        env_args = []
    ini_args = [str(arg) for arg in config.getini("addopts") or ()]
    typed = [str(arg) for arg in config.invocation_params.args]
    ini_name = config.inipath.name if config.inipath is not None else "the ini file"
    given = {
        flag: flag_origins.origins(
            flag,
            command_line=typed,
            env_addopts=env_args,
            ini_addopts=ini_args,
            ini_name=ini_name,
        )
        for flag in (flag_origins.NO_GPUPERF, *flag_origins.MEASURING_FLAGS)
    }
    settled = flag_origins.settle(given)
    for dest in settled.dropped:
        setattr(config.option, dest, None)
    return settled.note


def _ignored_profile_plan(config: pytest.Config) -> None:
    """An explain pass's variable this process was not given by the plugin (inherited from a
    shell, set by hand) is ignored, and said once: the run measures and gates as usual."""
    from pytest_gpuperf.session.profile_plan import inherited_plan_line

    line = inherited_plan_line()
    if line and not hasattr(config, "workerinput"):  # the controller says it for the run
        config.issue_config_time_warning(GpuPerfWarning(line), stacklevel=2)


def _getini(config: pytest.Config, key: str) -> object:
    """pytest converts typed ini values itself; a value it cannot convert (gpuperf_budget =
    fast) is a usage error naming the key, not a traceback."""
    try:
        return config.getini(key)
    except (TypeError, ValueError, pytest.UsageError) as problem:  # 9.x: a UsageError
        spec = next(s for s in options.OPTIONS if s.ini == key)
        raise ConfigError(f"{key} (ini): expected {_ini_type(spec)} ({problem})") from None


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


def pytest_report_header(config: pytest.Config) -> list[str]:
    state = state_of(config)
    settings = state.settings
    if settings.static:  # gpuperf-static: plugin/static_gate.py writes the header
        return []
    flags = [f"gpuperf: {state.flag_note}"] if state.flag_note else []
    if not settings.measure:
        return [
            *flags,
            "gpuperf: smoke mode (each gpu_bench call launches once, no timing, no gate); "
            "--gpuperf measures and gates",
        ]
    lines = flags + [
        f"gpuperf: {line}" for line in options.describe(settings, Path(config.rootpath))
    ]
    backends = settings.allowed_backends
    if "sim" in backends:
        which = (
            "is the only backend"
            if backends[0] == "sim"
            else "is the fallback when no GPU is found"
        )
        lines.append(f"gpuperf: the SIMULATED device {which} (--gpuperf-backend)")
    return lines


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """After a kernel hung, end the process once every report is out: the kernel is still
    running, and a normal interpreter exit would wait on the driver for it."""
    shared = config.stash.get(SIM_SEED_SHARED, None)
    if shared is not None:
        os.environ.pop(shared[0], None)
    state = config.stash.get(STATE, None)
    if config.stash.get(RESTORE_SIGTERM, None) is not None:  # this run handled SIGTERM
        _stopped_after_the_end(state)
    _stopped_before_the_start(config, state)
    restore = config.stash.get(RESTORE_SIGTERM, None)
    if restore is not None:
        restore()
    if state is not None:
        if (opened := state.opened_session) is not None:
            opened.close()
        if state.probe_handoff is not None:
            state.probe_handoff.close()
        config.pluginmanager.unregister(state)
    status = config.stash.get(EXIT_NOW, None)
    if status is not None:
        import sys

        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def _stopped_after_the_end(state: PluginState | None) -> None:
    """A SIGTERM after the saves and the reports (errors.defer_sigterm), or one whose stop
    Python swallowed (raised inside a cleanup callback, reported as "unraisable", and the run
    went on to its end: bench/save_signals.py saw it once in 100 runs): nothing was lost,
    and the exit status still says the run was stopped."""
    from pytest_gpuperf.errors import sigterm_after_the_end, sigterm_received, stop_words

    if state is None or state.ended is None:
        return
    late = sigterm_after_the_end()
    swallowed = sigterm_received() and state.ended.exitstatus != pytest.ExitCode.INTERRUPTED
    if not (late or swallowed):
        return
    import sys

    state.ended.exitstatus = pytest.ExitCode.INTERRUPTED
    when = (
        "after the saves and the reports were written"
        if late
        else "where Python could not stop the run (a cleanup callback), which went on to its end"
    )
    print(
        f"gpuperf: {stop_words()} arrived {when}; the saves and the reports are complete (exit 2)",
        file=sys.stderr,
    )


def _stopped_before_the_start(config: pytest.Config, state: PluginState | None) -> None:
    """SIGTERM before pytest's session began (a conftest's sessionstart, the degraded-GPU
    probe): pytest calls no end of the session then, so no summary and no report; say so."""
    from pytest_gpuperf.errors import stop_words

    if state is None or state.finished or stop_words() != "SIGTERM":
        return
    if config.stash.get(RESTORE_SIGTERM, None) is None or hasattr(config, "workerinput"):
        return
    import sys

    print(
        "gpuperf: interrupted (SIGTERM) before the tests began: nothing was measured or "
        "saved, and no report was written",
        file=sys.stderr,
    )
