"""Ctrl-C and SIGTERM after the tests: during the prune, while the reports are written, in
pytest's own JUnit writer, and during collection. Each ends in the summary, the reports that
could be written, exit 2, and no traceback; the baseline file is whole (old or new) and no
temporary lies beside it.

The slow step is made slow on purpose (an inner conftest sleeps in it and touches a marker),
so the signal lands where it should whatever the machine's load.
"""

from __future__ import annotations

import json
import signal
import time

import pytest

from tests.plugin.test_save_faults import (
    OLD_ENTRIES,
    PLAIN,
    finish,
    inject,
    left_intact,
    no_traceback,
    start,
    wait_for,
)

# Appended to the inner conftest: with $H25_FAULT=slow-report the JSON report's writer, with
# slow-junit pytest's JUnit writer (its makedirs), with slow-step-summary the append to
# $GITHUB_STEP_SUMMARY (after it appended), touches $H25_MARKER.slow and sleeps, only while the
# session finishes ($H25_MARKER itself INJECT touches when the session's end begins).
SLOW_REPORT = """

import pytest_gpuperf.record.json_report as _json_report
import pytest_gpuperf.report as _report


@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session):
    real, real_makedirs = _json_report.write_json, os.makedirs

    def slow(path, document):  # the first call only: the stop's report is written at once
        if not os.path.exists(os.environ["H25_MARKER"] + ".slow"):
            open(os.environ["H25_MARKER"] + ".slow", "w").close()
            time.sleep(60)
        return real(path, document)

    real_append = _report.append_github_step_summary

    def append_then_slow(text):  # appended, then the stop: it must not be appended again
        done = real_append(text)
        if not os.path.exists(os.environ["H25_MARKER"] + ".slow"):
            open(os.environ["H25_MARKER"] + ".slow", "w").close()
            time.sleep(60)
        return done

    def slow_makedirs(*args, **kwargs):
        open(os.environ["H25_MARKER"] + ".slow", "w").close()
        time.sleep(60)
        return real_makedirs(*args, **kwargs)

    if os.environ.get("H25_FAULT") == "slow-report":
        _json_report.write_json = slow
    if os.environ.get("H25_FAULT") == "slow-junit":
        os.makedirs = slow_makedirs
    if os.environ.get("H25_FAULT") == "slow-step-summary":
        _report.append_github_step_summary = append_then_slow
    try:
        return (yield)
    finally:
        _json_report.write_json, os.makedirs = real, real_makedirs
        _report.append_github_step_summary = real_append
"""


def stopped_in(
    gp, step: str, *args: str, fault: str = "", stop: int = signal.SIGTERM, extra: str = ""
) -> str:
    """pytest with `args` in a child process, the fault injector (and `extra`) in its conftest;
    `stop` is sent once the marker file `step` appears (the slow step has begun). The output,
    once the run ended with exit 2 and no traceback."""
    conftest = inject(gp)
    conftest.write_text(conftest.read_text() + extra)
    process = start(gp, *args, fault=fault, marker=gp.path / step.split(".")[0])
    wait_for(gp.path / step, process)
    process.send_signal(stop)
    code, output = finish(process)
    assert code == pytest.ExitCode.INTERRUPTED, output
    no_traceback(output)
    return output


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stop_during_the_prune_ends_in_the_summary_and_the_reports(gp, stop):
    """Before: `UnboundLocalError: cannot access local variable 'stopped'`, exit 1, no summary
    and no JSON (finish.py read an `except ... as` name after its block)."""
    gp.test_file(PLAIN)
    orphan = {"id": "test_perf.py::test_add", "name": "renamed", "efficiency": 0.4}
    path = gp.baseline("mi300x-sim", [*OLD_ENTRIES, orphan])
    before = path.read_bytes()
    # fault "slow": the prune's fsync sleeps (nothing else is fsynced: no save)
    args = ("--gpuperf", "--gpuperf-prune", "--gpuperf-json=report.json")
    output = stopped_in(gp, "pruning", *args, fault="slow", stop=stop)
    words = "SIGTERM" if stop == signal.SIGTERM else "Ctrl-C"
    assert (
        f"gpuperf: ERROR: {path}: interrupted ({words}) while writing it: not saved; "
        "the file was left as it was"
    ) in output
    assert "test_perf.py::test_add" in output  # the summary's table
    document = json.loads((gp.path / "report.json").read_text())
    assert document["interrupted"] is True
    left_intact(path, before)


def test_a_stop_while_the_reports_are_written_ends_in_the_summary(gp):
    """Before: the same UnboundLocalError; 2 of 40 random SIGTERMs on a save run hit it (the
    file saved, no report). The reports are now written once more, saying so."""
    gp.test_file(PLAIN)
    args = ("--gpuperf", "--gpuperf-json=report.json", "--gpuperf-markdown=summary.md")
    output = stopped_in(gp, "reporting.slow", *args, fault="slow-report", extra=SLOW_REPORT)
    line = "interrupted (SIGTERM) while writing the reports: written again"
    assert f"gpuperf: ERROR: {line}" in output
    assert "test_perf.py::test_add" in output
    document = json.loads((gp.path / "report.json").read_text())  # whole, and says so
    assert document["interrupted"] is True and line in document["problems"]
    assert "- interrupted (SIGTERM)" in (gp.path / "summary.md").read_text()
    assert not list(gp.path.glob(".*.tmp"))  # no temporary left


def test_a_stop_after_the_step_summary_was_appended_does_not_append_it_twice(gp):
    gp.test_file(PLAIN)
    step_summary = gp.path / "step-summary.md"
    gp.monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    args = ("--gpuperf", "--gpuperf-json=report.json", "--gpuperf-markdown=summary.md")
    output = stopped_in(gp, "steps.slow", *args, fault="slow-step-summary", extra=SLOW_REPORT)
    assert "gpuperf: ERROR: interrupted (SIGTERM) while writing the reports" in output
    assert step_summary.read_text().count("test_perf.py::test_add") == 1  # once, not twice
    assert json.loads((gp.path / "report.json").read_text())["interrupted"] is True


def test_sigterm_in_pytests_junit_writer_still_ends_our_run(gp):
    """pytest's JUnit writer runs before our end of the run. Before: SIGTERM there was a
    `Terminated` traceback, exit 1, no summary, no report, nothing saved (and no word why)."""
    gp.test_file(PLAIN)
    path = gp.baseline("mi300x-sim", OLD_ENTRIES)
    before = path.read_bytes()
    args = ("--gpuperf-save", "--gpuperf-json=report.json", "--junitxml=junit.xml")
    output = stopped_in(gp, "junit.slow", *args, fault="slow-junit", extra=SLOW_REPORT)
    assert "gpuperf: ERROR: interrupted (SIGTERM) at the end of the run" in output
    assert "NOT saved: 1 measurement to baselines/mi300x-sim.toml (interrupted (SIGTERM))" in output
    document = json.loads((gp.path / "report.json").read_text())
    assert document["interrupted"] is True
    assert document["results"][0]["verdict"]["save"]["saved"] is False
    left_intact(path, before)


LATE_SUMMARY = """

@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter):
    open(os.environ["H25_MARKER"] + ".summary", "w").close()  # (the marker itself: INJECT's,
    go = os.environ["H25_MARKER"] + ".go"  # touched when the session's end begins)
    for _ in range(1200):  # until the test has sent its signal (at most 60 s)
        if os.path.exists(go):
            break
        time.sleep(0.05)
    terminalreporter.write_line("the summary went on")
"""


@pytest.mark.parametrize(
    ("stop", "words"), [(signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "Ctrl-C")], ids=["term", "int"]
)
def test_sigterm_after_the_reports_is_noted_not_a_traceback(gp, stop, words):
    """After our end of the run only printing is left: a SIGTERM there is noted (exit 2, one
    line) instead of a `Terminated` traceback out of pytest's terminal summary; so is a
    Ctrl-C (bench/save_signals.py: 16 of 100 random Ctrl-Cs ended in a KeyboardInterrupt
    traceback out of our summary's code, after the saves and the reports)."""
    gp.test_file(PLAIN)
    conftest = inject(gp)
    conftest.write_text(conftest.read_text() + LATE_SUMMARY)
    marker = gp.path / "summary"
    process = start(gp, "--gpuperf", "--gpuperf-json=report.json", marker=marker)
    wait_for(gp.path / "summary.summary", process)
    process.send_signal(stop)
    time.sleep(0.2)
    (gp.path / "summary.go").touch()
    code, output = finish(process)
    assert code == pytest.ExitCode.INTERRUPTED, output
    no_traceback(output)
    assert "the summary went on" in output
    assert f"gpuperf: {words} arrived after the saves and the reports were written" in output
    assert json.loads((gp.path / "report.json").read_text())["interrupted"] is False


STOP_AFTER_RENAME = """

import signal


@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session):
    real = os.replace

    def replace_then_stop(source, target, *args, **kwargs):
        real(source, target, *args, **kwargs)
        if str(target).endswith(".toml"):  # the baseline file is in place: Ctrl-C now
            os.kill(os.getpid(), signal.SIGINT)

    os.replace = replace_then_stop
    try:
        return (yield)
    finally:
        os.replace = real
"""


def test_ctrl_c_right_after_the_rename_says_saved(gp):
    """Once in 40 random Ctrl-Cs the file was written but the terminal said "NOT saved": the
    stop came after the rename, before the code could note it. Saved or not is now read from
    the file."""
    gp.test_file(PLAIN)
    conftest = inject(gp)
    conftest.write_text(conftest.read_text() + STOP_AFTER_RENAME)
    path = gp.baseline("mi300x-sim", OLD_ENTRIES)
    before = path.read_bytes()
    process = start(gp, "--gpuperf-save", "--gpuperf-json=report.json")
    code, output = finish(process)
    assert code == pytest.ExitCode.INTERRUPTED, output
    no_traceback(output)
    assert path.read_bytes() != before  # the save reached the file
    assert "NOT saved" not in output
    assert "gpuperf: saved 1 measurement to baselines/mi300x-sim.toml" in output
    document = json.loads((gp.path / "report.json").read_text())
    assert document["results"][0]["verdict"]["save"]["saved"] is True
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


SLOW_START = """

@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    if os.environ.get("H25_FAULT") == "slow-start":
        open(os.environ["H25_MARKER"], "w").close()
        time.sleep(60)
"""

SLOW_COLLECTION = """
import os, time

open(os.environ["H25_MARKER"], "w").close()
time.sleep(60)


def test_never():
    pass
"""


def test_sigterm_before_the_tests_says_only_what_is_true(gp):
    """Before: "the summary and the reports follow", and neither followed (a stop in the
    session's start: pytest ends no session then; a smoke run stopped in collection printed
    no gpuperf line)."""
    gp.test_file(PLAIN)
    args = ("--gpuperf", "--gpuperf-json=report.json")
    output = stopped_in(gp, "starting", *args, fault="slow-start", extra=SLOW_START)
    assert "follow" not in output
    assert (
        "gpuperf: interrupted (SIGTERM) before the tests began: nothing was measured or saved, "
        "and no report was written"
    ) in output
    assert not (gp.path / "report.json").exists()

    gp.test_file(SLOW_COLLECTION, name="test_slow_import")  # a smoke run, stopped collecting
    marker = gp.path / "collecting"
    process = start(gp, "--gpuperf-json=report.json", marker=marker)
    wait_for(marker, process)
    process.send_signal(signal.SIGTERM)
    code, output = finish(process)
    assert code == pytest.ExitCode.INTERRUPTED, output
    assert "follow" not in output
    assert "gpuperf: interrupted (SIGTERM): no measurement completed" in output
    assert json.loads((gp.path / "report.json").read_text())["interrupted"] is True


STOP_IN_OUR_END = """

import signal

from pytest_gpuperf.session.bench_session import BenchSession

_real_facts = BenchSession.gpu_facts


def _facts_then_stop(self):  # a step of the end of the run that catches no stop of its own
    os.kill(os.getpid(), signal.SIGTERM)
    return _real_facts(self)


BenchSession.gpu_facts = _facts_then_stop
"""


def test_sigterm_between_the_steps_of_our_end_still_writes_the_reports(gp):
    gp.test_file(PLAIN)
    conftest = inject(gp)
    conftest.write_text(conftest.read_text() + STOP_IN_OUR_END)
    process = start(gp, "--gpuperf", "--gpuperf-json=report.json")
    code, output = finish(process)
    assert code == pytest.ExitCode.INTERRUPTED, output
    no_traceback(output)
    assert "gpuperf: ERROR: interrupted (SIGTERM) at the end of the run" in output
    document = json.loads((gp.path / "report.json").read_text())
    assert document["interrupted"] is True


# -- pytest's own stops: named, not called Ctrl-C -----------------------------------------------


def test_a_collection_error_is_named_not_called_ctrl_c(gp):
    """A test file that does not import stopped the run with "interrupted (Ctrl-C)" in the
    summary and `"interrupted": true` in the JSON report."""
    gp.test_file(PLAIN)
    gp.pytester.makepyfile(test_broken="import no_such_module_here\n")
    result = gp.run("--gpuperf", "--gpuperf-json=report.json", "--gpuperf-markdown=summary.md")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # pytest's own status for it
    out = result.stdout.str()
    assert "Ctrl-C" not in out and "SIGTERM" not in out, out
    line = (
        "gpuperf: ERROR: pytest stopped the run: 1 error during collection (test_broken.py: "
        "ModuleNotFoundError: No module named 'no_such_module_here'); no test ran: nothing "
        "was measured or saved (fix the file, or --continue-on-collection-errors runs the "
        "other tests)"
    )
    result.stdout.fnmatch_lines([line])
    report = gp.report()
    assert report["interrupted"] is False
    assert report["problems"] == [line.removeprefix("gpuperf: ERROR: ")]
    summary = (gp.path / "summary.md").read_text()
    assert "Ctrl-C" not in summary and "test_broken.py: ModuleNotFoundError" in summary


def test_pytest_exit_is_named_with_its_message(gp):
    gp.test_file(PLAIN + "\n\ndef test_stop():\n    pytest.exit('the suite asked to stop')\n")
    result = gp.run("--gpuperf", "--gpuperf-json=report.json")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "Ctrl-C" not in result.stdout.str()
    result.stdout.fnmatch_lines(
        ["gpuperf: ERROR: pytest stopped the run: pytest.exit('the suite asked to stop'); 1 "
         "measurement taken (above); the tests after it did not run and nothing was saved"]
    )  # fmt: skip
    assert gp.report()["interrupted"] is False


STOP_WHILE_READING_BACK = """

from pytest_gpuperf.baseline import store as _store

_read_back = _store.BaselineStore.read_back


def _stopped_once(self, device_key):
    _store.BaselineStore.read_back = _read_back  # the next read is not stopped
    raise KeyboardInterrupt  # Ctrl-C (or SIGTERM) while the saves are read back


_store.BaselineStore.read_back = _stopped_once
"""


def test_a_stop_while_the_saves_are_read_back_still_says_what_the_file_holds(gp):
    """SIGTERM while the run read its saves back under the lock (bench/save_signals.py found
    it): every row said "not saved" though the file held every save."""
    gp.test_file(PLAIN)
    conftest = gp.path / "conftest.py"
    conftest.write_text(conftest.read_text() + STOP_WHILE_READING_BACK)
    result = gp.run("--gpuperf-save", "--gpuperf-json=report.json")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    (row,) = gp.report()["results"]
    assert row["verdict"]["save"]["saved"] is True, row["verdict"]["save"]
    assert "test_perf.py::test_add" in (gp.path / "baselines" / "mi300x-sim.toml").read_text()
    assert "Traceback" not in result.stdout.str()


SWALLOWED = """
import gc
import signal
import weakref

from gpuperf_helpers import add


def test_add(gpu_bench):
    add(gpu_bench)

    class Held:
        pass

    held = Held()
    # SIGTERM's handler runs inside a weakref callback, as a signal arriving there does:
    # Python reports the stop it raises as "unraisable" and goes on
    ref = weakref.ref(held, lambda _: signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None))
    del held
    gc.collect()
    assert ref() is None
"""


def test_a_sigterm_python_swallows_still_ends_the_run_interrupted(gp):
    """bench/save_signals.py, once in 100 runs: a SIGTERM whose stop Python swallowed (raised
    in a cleanup callback) let the run save, report and exit 0, as if no job had been
    cancelled."""
    gp.pytester.makepyfile(test_swallowed=SWALLOWED)
    result = gp.run("--gpuperf-save", "--gpuperf-json=report.json", "-W", "ignore")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert (
        "gpuperf: SIGTERM arrived where Python could not stop the run (a cleanup callback), "
        "which went on to its end; the saves and the reports are complete (exit 2)"
    ) in result.stderr.str()
    (row,) = gp.report()["results"]
    assert row["verdict"]["save"]["saved"] is True
