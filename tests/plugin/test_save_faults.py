"""What the machine or the user does to a run while it saves: a read-only or full disk, a
permission refused, Ctrl-C during the save or while waiting for the baseline lock, a save
killed between its temporary and the rename, a byte-order mark, and a lock a commit could take
along. Each ends in one line of the gpuperf summary, with the reports written, a documented
exit status (docs/reliability.md), no traceback, no stray file, and every earlier entry of the
baseline file intact.

Tests run as root here, which writes through any chmod: the file-system errors are injected
(an inner conftest replaces `tempfile.mkstemp` or `os.fsync` around the session's end only).

A signal is sent when the child says (a marker file) that it stands where the test wants it:
writing, waiting for the lock, inside a test. Nothing here waits on wall time, so a busy
machine only makes the tests slower; GUARD_S bounds a child that never gets there.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import filelock
import pytest

from pytest_gpuperf.baseline.store import lock_path_for

# The last-resort limit of every wait: a child that never reaches its marker, or never ends
# after its signal, fails the test after this long instead of hanging it.
GUARD_S = 600.0

PLAIN = """
def test_add(gpu_bench):
    add(gpu_bench)
"""

OLD_ENTRIES = [
    {"id": "tests/perf/test_old.py::test_kept", "efficiency": 0.5},
    {"id": "test_perf.py::test_add", "efficiency": 0.44},
]

# Appended to the inner conftest: the fault named by $H25_FAULT strikes only while the
# session finishes (when saves are written), and is undone after it, so an in-process run
# leaves the outer process as it found it. $H25_MARKER is touched when the save begins.
INJECT = """

import errno
import os
import tempfile
import time

import pytest

from pytest_gpuperf.baseline import shared_lock


def _fail(code):
    raise OSError(code, os.strerror(code), os.environ.get("H25_PATH") or None)


def _until_stopped(marker):
    # Stand still until a signal stops this process (the guard only bounds a lost one), and
    # say what stopped it in <marker>.stopped.
    try:
        time.sleep(GUARD_S)
    except BaseException as stopped:
        with open(marker + ".stopped", "w") as said:
            said.write(type(stopped).__name__)
        raise


@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session):
    fault = os.environ.get("H25_FAULT", "")
    marker = os.environ.get("H25_MARKER")
    real_mkstemp, real_fsync, real_flock = tempfile.mkstemp, os.fsync, shared_lock._flock

    def mkstemp(*args, dir=None, **kwargs):
        if fault in ("erofs", "eacces") and dir is not None and "baselines" in str(dir):
            _fail(errno.EROFS if fault == "erofs" else errno.EACCES)
        return real_mkstemp(*args, dir=dir, **kwargs)

    def fsync(fd):
        if marker:
            open(marker, "w").close()
        if fault == "enospc":
            _fail(errno.ENOSPC)
        if fault == "slow":
            _until_stopped(marker)
        return real_fsync(fd)

    def flock(fd):
        granted = real_flock(fd)
        if not granted and marker and fault == "locked":  # the save waits for the lock now
            open(marker, "w").close()
        return granted

    if marker and fault not in ("slow", "enospc", "locked"):
        open(marker, "w").close()
    time.sleep(float(os.environ.get("H25_LATE_S") or 0))  # a busy machine's child, slower
    tempfile.mkstemp, os.fsync, shared_lock._flock = mkstemp, fsync, flock
    try:
        return (yield)
    finally:
        tempfile.mkstemp, os.fsync, shared_lock._flock = real_mkstemp, real_fsync, real_flock
"""


def inject(gp) -> Path:
    conftest = gp.path / "conftest.py"
    conftest.write_text(conftest.read_text() + INJECT + f"\nGUARD_S = {GUARD_S}\n")
    return conftest


def setup_project(gp) -> Path:
    """The test file, an existing baseline file with an entry no test of this run makes,
    and the fault injector. Returns the baseline file."""
    gp.test_file(PLAIN)
    inject(gp)
    return gp.baseline("mi300x-sim", OLD_ENTRIES)


def no_traceback(output: str) -> None:
    assert "Traceback" not in output and "INTERNALERROR" not in output, output


def left_intact(path: Path, before: bytes) -> None:
    """The file is byte-identical and no temporary or lock lies beside it."""
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def the_row(gp) -> dict:
    (row,) = gp.report()["results"]
    return row


# -- file-system errors ------------------------------------------------------------------


def test_a_read_only_baseline_folder_stops_a_save_before_anything_is_measured(gp):
    path = setup_project(gp)
    before = path.read_bytes()
    real = __import__("tempfile").mkstemp

    def read_only(*args, dir=None, **kwargs):
        if dir is not None and "baselines" in str(dir):
            raise OSError(30, "Read-only file system", str(dir))
        return real(*args, dir=dir, **kwargs)

    gp.monkeypatch.setattr("tempfile.mkstemp", read_only)
    result = gp.run("--gpuperf-save", "--gpuperf-json=report.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*baselines: --gpuperf-save cannot write here (*baselines: Read-only file system "
            "(EROFS)); the file system is read-only: write elsewhere with "
            "--gpuperf-baseline-dir=DIR; nothing was measured*"
        ]
    )
    no_traceback(result.stdout.str() + result.stderr.str())
    left_intact(path, before)


@pytest.mark.parametrize(
    ("fault", "words", "remedy"),
    [
        ("erofs", "Read-only file system (EROFS)", "write elsewhere with --gpuperf-baseline-dir"),
        ("enospc", "No space left on device (ENOSPC)", "free some space there, then run again"),
        ("eacces", "Permission denied (EACCES)", "make it writable for this user"),
    ],
)
def test_a_save_the_disk_refuses_is_one_line_and_the_reports_say_not_saved(
    gp, fault, words, remedy
):
    """The disk turns read-only, fills up or refuses permission after the tests ran: the
    summary says so in one line, the rows say NOT saved, the reports are written, exit 1."""
    path = setup_project(gp)
    before = path.read_bytes()
    gp.monkeypatch.setenv("H25_FAULT", fault)
    result = gp.run(
        "--gpuperf-save",
        "--gpuperf-json=report.json",
        "--gpuperf-markdown=summary.md",
        "--junitxml=junit.xml",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1)
    output = result.stdout.str()
    no_traceback(output)
    (line,) = [x for x in output.splitlines() if x.startswith("gpuperf: ERROR:")]
    assert "mi300x-sim.toml: not saved: cannot write " in line
    assert f"{words}; " in line and remedy in line and line.endswith("left as it was")
    result.stdout.fnmatch_lines(
        [
            "*vector_add*NOT saved*",
            f"note: not saved: {words}, see the error below*",
            "gpuperf: NOT saved: 1 measurement to baselines/mi300x-sim.toml (see the error below)",
        ]
    )
    assert "gpuperf: saved" not in output
    row = the_row(gp)
    assert row["verdict"]["save"]["saved"] is False
    assert row["verdict"]["save"]["why_not"] == "write"
    assert words in row["verdict"]["save"]["error"]
    assert gp.report()["problems"] == [line.removeprefix("gpuperf: ERROR: ")]
    assert "NOT saved" in (gp.path / "summary.md").read_text()
    assert "#### Errors" in (gp.path / "summary.md").read_text()
    assert 'name="gpuperf_efficiency"' in (gp.path / "junit.xml").read_text()
    left_intact(path, before)


def test_a_report_the_disk_refuses_late_names_the_path_and_the_errno(gp):
    gp.test_file(
        """
import errno, os
from pathlib import Path
import pytest_gpuperf.record.json_report as json_report

def test_add(gpu_bench):
    add(gpu_bench)

    def full(path, document):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    json_report.write_json = full  # the disk fills up while the tests run
"""
    )
    try:
        result = gp.run("--gpuperf", "--gpuperf-json=report.json", "--gpuperf-markdown=s.md")
    finally:
        import importlib

        import pytest_gpuperf.record.json_report as json_report

        importlib.reload(json_report)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "gpuperf: ERROR: JSON report not written: *report.json: No space left on device "
            "(ENOSPC); the disk (or your quota) is full: free some space there, then run again"
        ]
    )
    no_traceback(result.stdout.str())
    assert (gp.path / "s.md").exists()


# -- Ctrl-C and SIGKILL (separate processes) ---------------------------------------------


def ctrl_c_as_a_terminal_delivers_it() -> None:
    """In the child, before it runs: SIGINT back to its default. A suite started as a shell's
    background job (`cmd &`, nohup) ignores SIGINT, every child inherits that, and Python then
    never raises KeyboardInterrupt: a Ctrl-C test would wait out its guard (600 s) and fail."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(
    gp, *args: str, fault: str = "", marker: Path | None = None, late_s: float = 0.0
) -> subprocess.Popen:
    """The child pytest; `late_s` delays its save as a busy machine would (a signal sent on
    time, not on the child's word, would then land before the save)."""
    env = dict(os.environ, H25_FAULT=fault, H25_MARKER=str(marker or ""), H25_LATE_S=str(late_s))
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", *gp.args(*args)],
        cwd=gp.path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=ctrl_c_as_a_terminal_delivers_it,
    )


def wait_for(marker: Path, process: subprocess.Popen, timeout_s: float = GUARD_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not marker.exists():
        if process.poll() is not None:
            raise AssertionError(f"ended before the save: {process.stdout.read()}")  # type: ignore[union-attr]
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError("the save never began")
        time.sleep(0.05)


def reported_interrupted(gp, path: Path, before: bytes) -> None:
    """The JSON says the run was interrupted and the save was not made; the file is intact."""
    document = gp.report()
    assert document["interrupted"] is True
    assert document["results"][0]["verdict"]["save"]["why_not"] == "interrupted"
    left_intact(path, before)


def finish(process: subprocess.Popen) -> tuple[int, str]:
    output, _ = process.communicate(timeout=GUARD_S)
    return process.returncode, output


@pytest.mark.slow
def test_ctrl_c_during_the_save_stops_it_and_still_reports(gp):
    path = setup_project(gp)
    before = path.read_bytes()
    marker = gp.path / "saving"
    process = start(gp, "--gpuperf-save", "--gpuperf-json=report.json", fault="slow", marker=marker)
    wait_for(marker, process)
    process.send_signal(signal.SIGINT)
    code, output = finish(process)
    # the write stopped where it stood, not after it had finished
    assert (gp.path / "saving.stopped").read_text() == "KeyboardInterrupt", output
    assert code == pytest.ExitCode.INTERRUPTED, output
    no_traceback(output)
    assert (
        "gpuperf: ERROR: " + str(path) + ": interrupted (Ctrl-C) while writing it: not saved; "
        "the file was left as it was"
    ) in output
    assert "gpuperf: interrupted (Ctrl-C): 1 measurement in 1 test taken (above)" in output
    assert "NOT saved: 1 measurement to baselines/mi300x-sim.toml (interrupted (Ctrl-C))" in output
    reported_interrupted(gp, path, before)


@pytest.mark.slow
@pytest.mark.parametrize("late_s", [0.0, 2.0], ids=["", "busy-machine"])
def test_ctrl_c_while_waiting_for_the_baseline_lock(gp, late_s):
    path = setup_project(gp)
    before = path.read_bytes()
    marker = gp.path / "saving"
    with filelock.FileLock(str(lock_path_for(path))):  # another process is saving
        process = start(
            gp,
            "--gpuperf-save",
            "--gpuperf-json=report.json",
            fault="locked",
            marker=marker,
            late_s=late_s,
        )
        wait_for(marker, process)  # its lock was refused once: it polls the lock now
        process.send_signal(signal.SIGINT)
        code, output = finish(process)
    assert code == pytest.ExitCode.INTERRUPTED, output
    no_traceback(output)
    assert f"{path}: interrupted (Ctrl-C) while waiting for its lock: not saved" in output
    assert gp.report()["results"][0]["verdict"]["save"]["saved"] is False
    left_intact(path, before)


# -- SIGTERM: a CI timeout or a cancelled job ----------------------------------------------


@pytest.mark.slow
def test_sigterm_during_the_save_is_handled_as_ctrl_c_and_leaves_no_temporary(gp):
    """Before, SIGTERM killed the process where it stood: no summary, no report, exit -15,
    and `baselines/.mi300x-sim.toml.XXXX.tmp` left for `git status` to show."""
    path = setup_project(gp)
    before = path.read_bytes()
    marker = gp.path / "saving"
    process = start(
        gp,
        "--gpuperf-save",
        "--gpuperf-json=report.json",
        "--gpuperf-markdown=summary.md",
        fault="slow",
        marker=marker,
    )
    wait_for(marker, process)  # the temporary exists: fsync is sleeping on it
    assert len(list(path.parent.iterdir())) == 2
    process.send_signal(signal.SIGTERM)
    code, output = finish(process)
    assert (gp.path / "saving.stopped").exists(), output  # stopped mid-write, not after it
    assert code == pytest.ExitCode.INTERRUPTED, output
    no_traceback(output)
    assert (
        "gpuperf: ERROR: " + str(path) + ": interrupted (SIGTERM) while writing it: not saved; "
        "the file was left as it was"
    ) in output
    assert "gpuperf: interrupted (SIGTERM): 1 measurement in 1 test taken (above)" in output
    assert "NOT saved: 1 measurement to baselines/mi300x-sim.toml (interrupted (SIGTERM))" in output
    assert "- interrupted (SIGTERM)" in (gp.path / "summary.md").read_text()
    reported_interrupted(gp, path, before)  # no temporary beside the file


@pytest.mark.parametrize(
    ("stop", "words", "said"),
    [
        (signal.SIGINT, "Ctrl-C", ["test_a_first", "NOT saved"]),
        (
            signal.SIGTERM,
            "SIGTERM",
            [
                "Terminated: SIGTERM: stopped as Ctrl-C would stop it",
                "NOT saved: 1 measurement to baselines/mi300x-sim.toml (interrupted (SIGTERM))",
            ],
        ),
    ],
    ids=["ctrl-c", "sigterm"],
)
@pytest.mark.slow
def test_a_stop_during_the_tests_saves_nothing_and_keeps_what_was_measured(gp, stop, words, said):
    """Ctrl-C, or SIGTERM handled as Ctrl-C, while a test runs: the summary and the reports
    keep the measurements taken, and nothing is saved."""
    gp.test_file(
        """
import os, time

def test_a_first(gpu_bench):
    add(gpu_bench)

def test_b_slow(gpu_bench):
    open(os.environ["H25_MARKER"], "w").close()
    time.sleep(600)  # until the signal (the test waits on the marker, never on time)
"""
    )
    path = gp.baseline("mi300x-sim", OLD_ENTRIES)
    before = path.read_bytes()
    marker = gp.path / "testing"
    process = start(gp, "--gpuperf-save", "--gpuperf-json=report.json", marker=marker)
    wait_for(marker, process)
    process.send_signal(stop)
    code, output = finish(process)
    assert code == pytest.ExitCode.INTERRUPTED, output
    no_traceback(output)
    assert (
        f"gpuperf: interrupted ({words}): 1 measurement in 1 test taken (above); the tests "
        in output
    )
    for words_said in said:
        assert words_said in output
    assert [r["test_id"] for r in gp.report()["results"]] == ["test_perf.py::test_a_first"]
    reported_interrupted(gp, path, before)


@pytest.mark.slow
def test_sigterm_under_xdist_stops_the_workers_and_claims_only_what_was_saved(gp):
    """SIGTERM to the controller alone (a CI runner signals the process it started) reaches
    its workers too, as Ctrl-C reaches them through the terminal: the worker in its test stops
    as Ctrl-C would stop it, by SIGTERM (without it, xdist stops the worker 10 s later). A
    worker that had finished its share and saved keeps its save; every row says saved exactly
    when its entry is in the file."""
    gp.test_file(
        """
import os, time

def test_a_first(gpu_bench):
    add(gpu_bench)

def test_b_slow(gpu_bench):
    add(gpu_bench, name="second")
    open(os.environ["H25_MARKER"], "w").close()
    try:
        time.sleep(600)  # until the signal
    except BaseException as stopped:  # what stopped this worker's test
        open(os.environ["H25_MARKER"] + ".stopped", "w").write(type(stopped).__name__)
        raise
"""
    )
    path = gp.baseline("mi300x-sim", OLD_ENTRIES)
    marker = gp.path / "testing"
    process = start(gp, "-n", "2", "--gpuperf-save", "--gpuperf-json=report.json", marker=marker)
    wait_for(marker, process)
    time.sleep(0.5)  # the first test's report reaches the controller
    process.send_signal(signal.SIGTERM)
    code, output = finish(process)
    # SIGTERM itself reached the worker (xdist alone would stop it 10 s later, otherwise)
    assert (gp.path / "testing.stopped").read_text() == "Terminated", output
    assert code == pytest.ExitCode.INTERRUPTED, output
    no_traceback(output)
    assert "gpuperf: interrupted (SIGTERM)" in output
    document = gp.report()
    assert document["interrupted"] is True
    text = path.read_text()
    for row in document["results"]:
        assert row["verdict"]["save"]["saved"] is (row["test_id"] in text), row
    assert "second" not in text  # the stopped test's measurement was never saved
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_a_sigterm_handler_of_the_users_own_is_kept():
    """stop_on_sigterm() never replaces a handler someone else set, and undoes its own."""
    from pytest_gpuperf.errors import stop_on_sigterm

    def own(signum, frame):  # pragma: no cover - never called
        pass

    previous = signal.signal(signal.SIGTERM, own)
    try:
        assert stop_on_sigterm() is None
        assert signal.getsignal(signal.SIGTERM) is own
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        restore = stop_on_sigterm()
        assert restore is not None and signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
        restore()
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.slow
def test_a_save_killed_before_its_rename_leaves_a_temporary_the_next_save_removes(gp):
    path = setup_project(gp)
    before = path.read_bytes()
    marker = gp.path / "saving"
    process = start(gp, "--gpuperf-save", fault="slow", marker=marker)
    wait_for(marker, process)
    process.kill()  # SIGKILL: no handler runs, the temporary stays
    process.communicate(timeout=30)
    assert path.read_bytes() == before
    (stray,) = [p for p in path.parent.iterdir() if p != path]
    assert stray.name.startswith(".mi300x-sim.toml.") and stray.name.endswith(".tmp")
    result = gp.run("--gpuperf-save")  # the next save, under the lock, cleans up
    result.assert_outcomes(passed=1)
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    text = path.read_text()
    assert "tests/perf/test_old.py::test_kept" in text  # the earlier entries are all there
    assert text.count("[[entry]]") == 2


# -- what a save leaves, and what it reads -----------------------------------------------


def test_the_save_lock_lives_outside_the_project(gp):
    gp.test_file(PLAIN)
    gp.run("--gpuperf-save").assert_outcomes(passed=1)
    project = sorted(p.name for p in (gp.path / "baselines").iterdir())
    assert project == ["mi300x-sim.toml"]  # nothing for `git add -A` to take along
    locks = sorted(p.name for p in (gp.path / ".locks").iterdir())
    assert any(name.startswith("save-mi300x-sim.toml-") for name in locks)


def test_a_baseline_file_starting_with_a_byte_order_mark_is_read(gp):
    gp.test_file(PLAIN)
    path = gp.baseline("mi300x-sim", OLD_ENTRIES)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    result = gp.run("--gpuperf", "--gpuperf-json=report.json")
    result.assert_outcomes(passed=1)
    assert the_row(gp)["verdict"]["baseline"]["baseline"]["efficiency"] == 0.44
    gp.run("--gpuperf-save").assert_outcomes(passed=1)
    assert not path.read_bytes().startswith(b"\xef\xbb\xbf")  # written back without it
    assert "tests/perf/test_old.py::test_kept" in path.read_text()


@pytest.mark.slow
def test_a_refused_save_on_an_xdist_worker_reaches_the_controllers_rows(gp):
    pytest.importorskip("xdist")
    gp.test_file(PLAIN + PLAIN.replace("test_add", "test_add_again"))
    inject(gp)
    path = gp.baseline("mi300x-sim", OLD_ENTRIES)
    before = path.read_bytes()
    gp.monkeypatch.setenv("H25_FAULT", "enospc")
    result = gp.run_subprocess("--gpuperf-save", "-n", "2", "--gpuperf-json=report.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    output = result.stdout.str()
    no_traceback(output)
    assert "No space left on device (ENOSPC)" in output and "gpuperf: saved" not in output
    saves = [r["verdict"]["save"] for r in gp.report()["results"]]
    assert [s["why_not"] for s in saves] == ["write", "write"]
    left_intact(path, before)


# -- the same on real file systems, where the machine allows it -----------------------------
# `unshare -rm` gives the inner run a user and mount namespace of its own (no privilege on the
# host, nothing mounted outside it): a 64 KiB tmpfs filled to the last byte, and one remounted
# read-only while the run finishes. Skipped where unprivileged user namespaces are disabled.


def _namespaces_work() -> bool:
    try:
        done = subprocess.run(["unshare", "-rm", "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


needs_namespaces = pytest.mark.skipif(
    not _namespaces_work(), reason="unprivileged user namespaces (unshare -rm) are unavailable"
)


def in_namespace(gp, prepare: str, *args: str) -> tuple[int, str, Path]:
    """Mount a 64 KiB tmpfs at ./disk holding the baseline file, run `prepare`, then the
    inner pytest saving there; the disk's contents are copied to ./after before the
    namespace (and its mount) goes away. Returns (pytest's status, its output, ./after)."""
    command = " ".join(
        [sys.executable, "-m", "pytest", *gp.args("--gpuperf-baseline-dir=disk", *args)]
    )
    script = f"""
        set -e
        mkdir -p disk after
        mount -t tmpfs -o size=64k tmpfs disk
        cp baselines/mi300x-sim.toml disk/
        {prepare}
        set +e
        {command} > output.txt 2>&1
        echo $? > status.txt
        cp -a disk/. after/
    """
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script],
        cwd=gp.path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    output = (gp.path / "output.txt").read_text()
    return int((gp.path / "status.txt").read_text()), output, gp.path / "after"


@needs_namespaces
def test_a_full_disk_for_real(gp):
    path = setup_project(gp)
    before = path.read_bytes()
    fill = "dd if=/dev/zero of=disk/filler bs=1k 2>/dev/null || true"
    code, output, after = in_namespace(gp, fill, "--gpuperf-save", "--gpuperf-json=report.json")
    assert code == pytest.ExitCode.TESTS_FAILED, output
    no_traceback(output)
    assert "mi300x-sim.toml: not saved: cannot write " in output
    assert "No space left on device (ENOSPC)" in output
    assert gp.report()["results"][0]["verdict"]["save"]["why_not"] == "write"
    assert (after / "mi300x-sim.toml").read_bytes() == before
    assert sorted(p.name for p in after.iterdir()) == ["filler", "mi300x-sim.toml"]


@needs_namespaces
def test_a_read_only_mount_for_real(gp):
    """Read-only from the start: the save stops before measuring. Turned read-only while the
    run finishes (the inner conftest remounts it): one line, the reports, exit 1."""
    path = setup_project(gp)
    before = path.read_bytes()
    code, output, after = in_namespace(gp, "mount -o remount,ro disk", "--gpuperf-save")
    assert code == pytest.ExitCode.USAGE_ERROR, output
    assert "disk: --gpuperf-save cannot write here" in output
    assert "Read-only file system (EROFS)" in output
    no_traceback(output)
    assert (after / "mi300x-sim.toml").read_bytes() == before

    conftest = gp.path / "conftest.py"
    conftest.write_text(
        conftest.read_text()
        + """

import subprocess


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    subprocess.run(["mount", "-o", "remount,ro", "disk"], check=True)
"""
    )
    for stale in (gp.path / "after").iterdir():
        stale.unlink()
    code, output, after = in_namespace(gp, "true", "--gpuperf-save", "--gpuperf-json=report.json")
    assert code == pytest.ExitCode.TESTS_FAILED, output
    no_traceback(output)
    assert "mi300x-sim.toml: not saved: cannot write " in output
    assert "Read-only file system (EROFS)" in output
    assert gp.report()["results"][0]["verdict"]["save"]["saved"] is False
    assert sorted(p.name for p in after.iterdir()) == ["mi300x-sim.toml"]
    assert (after / "mi300x-sim.toml").read_bytes() == before
