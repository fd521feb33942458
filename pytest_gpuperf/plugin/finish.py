"""The end of the run: save the baselines, gather the workers' accounts in the controller,
list or prune orphaned entries, write the JSON and Markdown files, print the summary, and
turn every fault on the way into a summary line and an exit status.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_gpuperf.errors import GpuPerfError, SaveInterrupted, defer_sigterm, stop_words
from pytest_gpuperf.plugin import run_warnings
from pytest_gpuperf.plugin.state import (
    EXIT_NOW,
    MAIN_WORKER,
    STOPPED,
    PluginState,
    ctrl_c_stopped,
    is_xdist_worker,
    state_of,
)

if TYPE_CHECKING:
    from pytest_gpuperf.record.meta import ReportMeta
    from pytest_gpuperf.session.bench_session import BenchSession


@pytest.hookimpl(wrapper=True, trylast=True, specname="pytest_sessionfinish")
def pytest_sessionfinish_stopped_elsewhere(session: pytest.Session) -> Any:
    """Ctrl-C or SIGTERM in another plugin's end of the run (pytest's JUnit writer, which runs
    before ours) skips the hooks after it and, left alone, ends pytest in a traceback with
    nothing saved or reported: here it becomes the run's stop, and the end of our run (no
    save, the reports) still happens. A stop between the steps of our own end that catch
    theirs (the device's release, the rows' marks) ends the same way."""
    try:
        return (yield)
    except KeyboardInterrupt:
        state = state_of(session.config)
        state.interrupted = True
        state.problems.append(f"interrupted ({stop_words()}) at the end of the run")
        if not state.finished:
            _finish(session)
        elif state.ended is None and not is_xdist_worker(session.config):
            _write_files_once_more_after_a_stop(session.config, state)
            defer_sigterm()
        session.exitstatus = pytest.ExitCode.INTERRUPTED
        return None


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write the saved baselines (each worker its own, one merge per file), then the JSON and
    Markdown files (once, in the controller), and release the device.

    Every fault on the way (a read-only or full disk, a lock not granted, Ctrl-C) is caught
    here and becomes a line of the summary; the rows of what was not saved say so, the report
    files are still written, and the exit status says what happened (docs/reliability.md):
    1 when a file could not be written, 2 when Ctrl-C stopped the run."""
    _finish(session)


def _finish(session: pytest.Session) -> None:
    config = session.config
    state = state_of(config)
    state.finished = True
    stopped = session.exitstatus == pytest.ExitCode.INTERRUPTED
    config.stash[STOPPED] = stopped
    state.tests_failed, state.exitstatus = session.testsfailed, int(session.exitstatus)
    try:
        try:
            if (opened := state.opened_session) is not None:
                outcome = opened.flush_saves(interrupted=stopped or state.interrupted)
                if outcome.written:
                    state.written += _save_note(opened)
                state.problems += outcome.problems
                state.unsaved.update(outcome.unsaved)
                state.interrupted = state.interrupted or outcome.interrupted
        except KeyboardInterrupt:
            state.interrupted = True
            state.problems.append(f"interrupted ({stop_words()}) while saving baselines")
        facts = opened.gpu_facts() if (opened := state.opened_session) is not None else None
        state.note_gpu(facts, os.environ.get("PYTEST_XDIST_WORKER", MAIN_WORKER))
        if is_xdist_worker(config):
            output = config.workeroutput  # type: ignore[attr-defined]
            output["gpuperf_gpu"] = facts
            output["gpuperf_worker"] = os.environ.get("PYTEST_XDIST_WORKER", MAIN_WORKER)
            output["gpuperf_problems"] = list(state.problems)
            output["gpuperf_tree_notes"] = run_warnings.tree_notes(state)
            output["gpuperf_deselected"] = list(state.deselected)
            output["gpuperf_unsaved"] = dict(state.unsaved)
            output["gpuperf_collected"] = sorted(state.collected)
            output["gpuperf_interrupted"] = state.interrupted
            output["gpuperf_shard"] = state.shard.to_json() if state.shard is not None else None
            return
        if state.stop_reason:  # a collection error, pytest.exit: named, not called Ctrl-C
            from pytest_gpuperf.report.faults import stopped_by_pytest_line

            smoke = sum(state.smoke.values())
            state.problems.append(
                stopped_by_pytest_line(
                    state.stop_reason, state.collect_errors, state.all_rows, smoke
                )
            )
        _mark_unsaved(state)
        _confirm_saves(state, stopped=stopped or state.interrupted)
        if not (stopped or state.interrupted):  # pruning writes: not after Ctrl-C
            try:
                _orphans(state)
            except KeyboardInterrupt as stop:  # a prune's save (not named `stopped`: Python
                # deletes an `except ... as` name after its block)
                state.interrupted = True
                state.problems.append(_late_stop_line(stop))
        _write_files_once_more_after_a_stop(config, state)
        defer_sigterm()  # only printing is left: a SIGTERM now is noted (plugin/__init__.py)
        state.ended = session
        if stopped or state.interrupted:
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        elif state.problems:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    finally:
        if (opened := state.opened_session) is not None:
            opened.close()
            if opened.hung:
                config.stash[EXIT_NOW] = int(session.exitstatus or pytest.ExitCode.TESTS_FAILED)


STEP_SUMMARY_WRITTEN = "appended to $GITHUB_STEP_SUMMARY"


def _write_files_once_more_after_a_stop(config: pytest.Config, state: PluginState) -> None:
    """The report files; a stop while they are written (each is whole or absent) writes them
    once more, saying the run was interrupted: a CI job cancelled at that moment otherwise
    kept no report at all. A second stop leaves them as they are."""
    for attempt in range(2):
        try:
            _write_files(config, state)
            return
        except KeyboardInterrupt as stop:
            state.interrupted = True
            if attempt == 0:
                state.problems.append(_late_stop_line(stop))
                state.meta = None  # again, with the stop in it
                state.written = [w for w in state.written if w.startswith(STEP_SUMMARY_WRITTEN)]
            else:
                state.problems.append(f"interrupted ({stop_words()}) again: not all written")


def _late_stop_line(stop: KeyboardInterrupt) -> str:
    """What a stop after the tests and the saves interrupted: a prune's save (replaced or
    not), or the report files."""
    if not isinstance(stop, SaveInterrupted):
        return f"interrupted ({stop_words()}) while writing the reports: written again"
    if stop.saved:
        return f"{stop.path}: interrupted ({stop_words()}) after it was saved (pruned)"
    return f"{stop}: not saved; the file was left as it was"


def _mark_unsaved(state: PluginState) -> None:
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


def _confirm_saves(state: PluginState, *, stopped: bool) -> None:
    """Each "saved" row checked against its file, read back under its lock (save_check.py);
    stopped while reading back, no save is claimed."""
    from pytest_gpuperf.gate import save_check
    from pytest_gpuperf.session.bench_session import relative

    def confirmed(*, locked: bool) -> save_check.Checked:
        return save_check.confirm_saves(
            state.rows,
            state.session.baselines(),
            workers=state.row_workers,
            crashed=state.crashed,
            stopped=stopped or not locked,
            where=lambda path: relative(path, state.rootdir),
            locked=locked,
        )

    try:
        checked = confirmed(locked=True)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM while reading the files back: read them
        state.interrupted = True  # once more without waiting for their lock (they were
        try:  # saved, or not: "not saved" for a save in the file was a wrong claim)
            checked = confirmed(locked=False)
        except (KeyboardInterrupt, GpuPerfError):  # a second stop: nothing is claimed
            checked = save_check.unconfirmed(state.rows)
    state.rows = checked.rows
    state.problems += checked.problems


@pytest.hookimpl(optionalhook=True)
def pytest_testnodeready(node: Any) -> None:
    """pytest-xdist: a worker is up; its pid lets SIGTERM reach it (errors.py)."""
    popen = getattr(getattr(getattr(node, "gateway", None), "_io", None), "popen", None)
    pid = getattr(popen, "pid", None)
    if isinstance(pid, int):
        state_of(node.config).worker_pids[_worker_id(node)] = pid


def _worker_id(node: Any) -> str:
    return str(getattr(node, "workerinput", {}).get("workerid") or node.gateway.id)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist: a worker's save errors reach the controller's summary and exit code;
    a worker that died is remembered, so its rows cannot say "saved"."""
    output = getattr(node, "workeroutput", None) or {}
    state = state_of(node.config)
    state.worker_pids.pop(_worker_id(node), None)
    if error is not None:
        state.crashed[_worker_id(node)] = _crash_words(error)
    state.problems.extend(output.get("gpuperf_problems", ()))
    state.tree_notes.extend(output.get("gpuperf_tree_notes", ()))
    state.deselected.update(dict.fromkeys(output.get("gpuperf_deselected", ())))
    state.unsaved.update(output.get("gpuperf_unsaved", {}))
    state.collected.update(output.get("gpuperf_collected", ()))
    state.interrupted = state.interrupted or bool(output.get("gpuperf_interrupted"))
    state.note_gpu(output.get("gpuperf_gpu"), output.get("gpuperf_worker") or MAIN_WORKER)
    if output.get("gpuperf_shard") and state.shard is None:  # every worker plans the same
        from pytest_gpuperf.session.shard import plan_from_json

        state.shard = plan_from_json(output["gpuperf_shard"])
        state.count_checks(state.shard.suite_tests)


def _crash_words(error: Any) -> str:
    """xdist's error of a dead worker in a few words ('Not properly terminated', ...)."""
    text = str(error).strip().splitlines()
    return text[-1][:120] if text else "it died"


def _orphans(state: PluginState) -> None:
    """List (or with --gpuperf-prune remove) the baseline entries no test of this run made."""
    rows = state.all_rows
    if not (state.settings.measure and rows):
        return
    from pytest_gpuperf.baseline.orphans import RunTests, find_orphans, prune
    from pytest_gpuperf.gate.judge import baseline_keys
    from pytest_gpuperf.session.bench_session import relative

    produced: dict[str, set[tuple[str, str]]] = {}
    for row in rows:
        if row.test_outcome == "passed":  # a test that failed midway did not measure it all
            made = (row.measurement.name, row.measurement.cache)
            produced.setdefault(row.test_id, set()).add(made)
    store = state.session.baselines()
    keys = {baseline_keys(row.measurement)[0] for row in rows}
    whole = not state.narrowed
    try:
        orphans = find_orphans(store, keys, RunTests(state.collected, produced, whole=whole))
    except GpuPerfError as problem:
        state.problems.append(f"orphaned baselines not checked: {problem}")
        return
    if state.settings.prune and not whole:
        state.orphan_lines.append(
            f"--gpuperf-prune: this run selected tests ({state.narrowed}): the entries of tests "
            "it left out are kept (prune from a run of the whole suite)"
        )
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


def _write_files(config: pytest.Config, state: PluginState) -> None:
    from pytest_gpuperf import report
    from pytest_gpuperf.record import files, json_report

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
        except GpuPerfError as problem:  # the path turned into a device, a FIFO... since
            state.problems.append(f"{what} not written: {problem}")  # the start
            return
        if done is not None:
            state.written.append(f"{what}: {done}")

    static = config.pluginmanager.get_plugin("gpuperf-static")
    static_json = static.json() if static is not None and settings.static else None
    if settings.json_path:
        attempt(
            "JSON report",
            "--gpuperf-json=PATH",
            lambda: json_report.write_json(
                settings.json_path, report.to_json(rows, meta, static_json)
            ),
        )
    if settings.benchmark_json_path:
        attempt(
            "pytest-benchmark JSON",
            "--gpuperf-benchmark-json=PATH",
            lambda: json_report.write_json(
                settings.benchmark_json_path, report.to_pytest_benchmark_json(rows, meta)
            ),
        )
    if settings.markdown_path:
        text = report.markdown(rows, meta, update_command=command)
        if static is not None and settings.static:  # gpuperf-static: its own summary (the
            # plugin is also registered by --gpuperf-save, which keeps this run's summary)
            text = static.markdown(meta)
        path = settings.markdown_path

        attempt(
            "Markdown summary",
            "--gpuperf-markdown=PATH",
            lambda: files.write_report(path, text),
        )
        if not state.step_summary_tried:  # appended once, whatever stopped it: a second
            state.step_summary_tried = True  # try after a stop would repeat the summary
            attempt(
                STEP_SUMMARY_WRITTEN,
                "another $GITHUB_STEP_SUMMARY",
                lambda: report.append_github_step_summary(text),
            )


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    from pytest_gpuperf import report

    if is_xdist_worker(config):
        return
    state = state_of(config)
    rows = state.all_rows
    smoke = sum(state.smoke.values())
    missing_base = run_warnings.missing_base_line(state)
    # a measuring run stopped before its first measurement still says so (and what was saved)
    settings = state.settings
    stopped_early = ctrl_c_stopped(config) and (
        settings.measure or settings.json_path or settings.markdown_path
    )
    if not (rows or state.devices or smoke or state.problems or state.interrupted or stopped_early):
        if missing_base:
            terminalreporter.write_line(missing_base, yellow=True)
        return
    writer = terminalreporter
    simulated = any(d.get("simulated") for d in state.devices) or any(
        row.measurement.simulated for row in rows
    )
    title = "gpuperf" + (" — SIMULATED DEVICE" if simulated else "")
    writer.write_sep("=", title, bold=True, yellow=simulated)
    from pytest_gpuperf.session.device import TRIED_FIRST

    shown: set[str] = set()  # several GPUs of one run say the same thing once
    verbose = config.get_verbosity() > 0
    for device in state.devices:
        for line in device["lines"][1:] if rows else device["lines"]:
            if ("FELL BACK" in line or TRIED_FIRST in line) and not verbose:
                continue  # the header said it; the title and the SIMULATED line say enough
            if line not in shown:
                shown.add(line)
                writer.write_line(line, yellow="SIMULATED" in line or "FELL BACK" in line)
    table = ""
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
    for test_id, test in state.tests.items():  # what reached its hard limit, in one line
        kind, _, what = str(test.get("error", "")).partition(": ")
        if kind in ("MeasurementTimeout", "NotMeasured"):
            from pytest_gpuperf.report.visible import visible

            writer.write_line(visible(f"gpuperf: {test_id}: {what}"), yellow=True)
    if state.shard is not None:
        writer.write_line(f"gpuperf: {state.shard.describe()}")
    # What the second measurement of a flagged regression said; with -v also the false-alarm
    # budget and the gate's words (a line each: quiet by default, a green or red run needs
    # neither to act)
    if rows:
        from pytest_gpuperf.report.suite import confirmation_lines

        for line in confirmation_lines(rows):
            writer.write_line(f"gpuperf: {line}")
    from pytest_gpuperf.report.visible import visible

    if rows and config.get_verbosity() > 0:
        from pytest_gpuperf.gate.suite import SuiteBudget
        from pytest_gpuperf.record.verdict import FAIL
        from pytest_gpuperf.report.ab_words import compared_lines
        from pytest_gpuperf.report.glossary import glossary_lines
        from pytest_gpuperf.report.suite import suite_lines

        budget = SuiteBudget(state.settings.suite_alarm, max(state.suite_checks, 1))
        for line in suite_lines(rows, budget):
            writer.write_line(f"gpuperf: {line}")
        for line in compared_lines(rows):  # a callable's A/B: the files compared with REF
            writer.write_line(f"gpuperf: {visible(line)}")
        failed = [row for row in rows if row.verdict.status == FAIL]
        texts = [table, *(report.failure_text(r.measurement, r.verdict) for r in failed)]
        for line in glossary_lines(texts):
            writer.write_line(f"gpuperf: {line}")
    from pytest_gpuperf.session.bench_session import relative

    for line in report.saved_lines(rows, state.unsaved, lambda p: relative(p, state.rootdir)):
        writer.write_line(f"gpuperf: {line}")
    for line in state.orphan_lines:  # test ids read from the baseline files
        writer.write_line(f"gpuperf: {visible(line)}")
    for line in state.written:
        writer.write_line(f"gpuperf: {line}")
    if missing_base:
        writer.write_line(missing_base, yellow=True)
    trees = dict.fromkeys([*state.tree_notes, *run_warnings.tree_notes(state)])  # each tree once
    warnings = (
        *trees,
        *run_warnings.deselected_warning(state),
        *run_warnings.baseline_dir_warning(state),
    )
    for line in (*warnings, *run_warnings.accept_warnings(state)):
        writer.write_line(f"gpuperf: WARNING: {line}", yellow=True)
    for problem in state.problems:
        writer.write_line(f"gpuperf: ERROR: {problem}", red=True)
    during_tests = ctrl_c_stopped(config)
    if state.interrupted or during_tests:
        line = report.interrupted_line(rows, smoke, during_tests=during_tests)
        writer.write_line(f"gpuperf: {line}", red=True)


def _save_note(opened: BenchSession) -> list[str]:
    """What the save recorded, when the commit it names lacks the code it measured."""
    from pytest_gpuperf.session.provenance import save_note

    note = save_note(opened.rootdir, opened.git().commit, opened.compiled_sources())
    return [f"NOTE: {note}"] if note else []


def _meta(config: pytest.Config, state: PluginState) -> ReportMeta:
    from pytest_gpuperf.engine.plain import from_plain, to_plain
    from pytest_gpuperf.record.meta import ReportMeta
    from pytest_gpuperf.runtime.info import DeviceInfo
    from pytest_gpuperf.session.provenance import git_facts

    if state.meta is not None:
        return state.meta
    # as the checkout was before the run wrote (collect.py); else without what it wrote
    facts = state.checkout or git_facts(Path(config.rootpath), ignore=[state.settings.baseline_dir])
    info = from_plain(DeviceInfo, state.devices[0]["info"]) if state.devices else None
    compare = state.settings.compare_ref or ""
    compare_commit = state.session.base_tree().commit if compare else ""
    head = state.settings.head_ref or ""
    head_commit = state.session.head_tree().commit if head else ""
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
        interrupted=state.interrupted or ctrl_c_stopped(config),
        gpus=state.gpu_records(),
        probe=to_plain(state.probe) if state.probe is not None else None,
        wall_s=time.monotonic() - state.began_s,
        accept_warnings=run_warnings.accept_warnings(state),
        shard=_shard_json(state),
        head_ref=head,
        head_commit=head_commit,
        tests=tuple({"test_id": k, **v} for k, v in state.tests.items()),
        rootdir=str(config.rootpath),
    )
    return state.meta


def _shard_json(state: PluginState) -> dict[str, Any] | None:
    """The report's "shard" object: the plan, and how pytest ended this shard's tests (the
    merge fails a shard whose tests failed, whatever its measurements said)."""
    if state.shard is None:
        return None
    return {
        **state.shard.to_json(),
        "outcomes": {
            test: state.outcomes[test] for test in state.shard.selected if test in state.outcomes
        },
        "measured": state.settings.measure,
        "tests_failed": state.tests_failed,
        "exitstatus": state.exitstatus,
    }
