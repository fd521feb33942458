"""Nothing hangs, nothing lies, nothing is lost: faults and bad input through pytest on the
simulated device (its fault injection stands in for a GPU that misbehaves; tests/gpu has the
same on the H100)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PLAIN = """
def test_add(gpu_bench):
    add(gpu_bench)
"""

TWO = """
def test_a_first(gpu_bench):
    add(gpu_bench)

def test_b_second(gpu_bench):
    add(gpu_bench)
"""


# -- hangs and faults -------------------------------------------------------------------------


@pytest.mark.slow
def test_a_kernel_that_never_finishes_trips_the_watchdog(gp):
    gp.test_file(TWO)
    gp.monkeypatch.setenv("GPUPERF_SIM_HANG", "vector_add")
    result = gp.run_subprocess(
        "--gpuperf", "--gpuperf-kernel-timeout=0.3", "--gpuperf-json=report.json", "-rA"
    )
    assert result.ret == 1
    output = result.stdout.str() + result.stderr.str()
    assert "did not finish within the kernel timeout of 0.3 s" in output
    assert "the last kernel launched was 'vector_add'" in output
    assert "test_b_second" in output and "not run: " in output  # failed with the reason
    assert "Traceback" not in output and "INTERNALERROR" not in output
    result.assert_outcomes(failed=1, errors=1)
    assert gp.report()["summary"] is not None  # the reports were still written
    # The lock was released: the same lock folder serves the next run at once.
    gp.monkeypatch.delenv("GPUPERF_SIM_HANG")
    gp.run_subprocess("--gpuperf", "--gpuperf-kernel-timeout=5").assert_outcomes(passed=2)


@pytest.mark.slow
def test_a_sticky_device_fault_fails_cleanly_and_keeps_the_summary(gp):
    gp.test_file(TWO)
    gp.monkeypatch.setenv("GPUPERF_SIM_FAULT", "vector_add")
    result = gp.run_subprocess("--gpuperf", "--gpuperf-markdown=summary.md")
    result.assert_outcomes(failed=1, errors=1)
    output = result.stdout.str()
    assert "illegal memory access (simulated sticky fault)" in output
    assert "Traceback" not in output and "INTERNALERROR" not in output
    assert "gpuperf — SIMULATED DEVICE" in output  # the summary is still there
    assert (gp.path / "summary.md").exists()


# -- bad input ----------------------------------------------------------------------------------


def test_a_callable_that_queues_no_gpu_work_is_refused(gp):
    gp.test_file(
        """
def test_nothing(gpu_bench):
    gpu_bench.run(lambda: None, bytes=1024)
"""
    )
    result = gp.run("--gpuperf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the callable queued no GPU work on the stream being timed*"])


@pytest.mark.parametrize(
    ("expression", "accepted", "message"),
    [
        ("np.int64(12 * N)", True, ""),
        ("np.array([4 * N, 8 * N]).sum()", True, ""),
        ("np.float64(12 * N)", False, "got the float *12582912.0*; a byte count is*"),
        ("12.5 * N", False, "a byte count is a whole number"),
    ],
)
def test_numpy_byte_counts(gp, expression, accepted, message):
    gp.test_file(
        f"""
def test_bytes(gpu_bench):
    kernel = gpu_bench.kernel("vadd.hip", "vector_add")
    N = 1 << 20
    a = gpu_bench.to_device(np.ones(N, np.float32))
    c = gpu_bench.empty(N)
    result = gpu_bench(kernel, grid=N // 256, block=256, args=(a, a, c, N), bytes={expression})
    assert result.bytes_moved == 12 * N
"""
    )
    result = gp.run("--gpuperf")
    if accepted:
        result.assert_outcomes(passed=1)
    else:
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines([f"*{message}*"])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            "gpu_bench(kernel, grid=16.0, block=256, args=(a, a, c, N), bytes=1)",
            "grid must be a positive int or a tuple of 1-3 positive ints, got 16.0 (a float",
        ),
        (
            "gpu_bench(kernel, grid=4, block=256, args=(a, a, c, N), bytes=1, shared_bytes=-1)",
            "shared_bytes must be a whole number of bytes >= 0, got -1",
        ),
        (
            "gpu_bench.launch(kernel, grid=4, block=256, args=(a, a, c, N), shared_bytes='4k')",
            "shared_bytes must be a whole number of bytes >= 0, got '4k'",
        ),
        ("gpu_bench.from_device(c, np.float32, -1)", "from_device: shape must not be negative"),
        ("gpu_bench.empty(16.0)", "empty: shape must be whole numbers, got 16.0"),
    ],
)
def test_bad_arguments_say_what_is_wrong(gp, call, message):
    gp.test_file(
        f"""
def test_bad(gpu_bench):
    kernel = gpu_bench.kernel("vadd.hip", "vector_add")
    N = 1 << 10
    a = gpu_bench.to_device(np.ones(N, np.float32))
    c = gpu_bench.empty(N)
    {call}
"""
    )
    result = gp.run("--gpuperf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*{message}*"])


def test_a_gpu_bench_kept_from_an_earlier_test_refuses_to_measure(gp):
    gp.test_file(
        """
KEPT = []

def test_keep(gpu_bench):
    KEPT.append(gpu_bench)
    add(gpu_bench)

def test_reuse(gpu_bench):
    add(KEPT[0])
"""
    )
    result = gp.run("--gpuperf")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*on the fixture of a test that has ended*"])


def test_a_non_utf8_kernel_source_names_the_file(gp):
    (gp.path / "latin1.hip").write_bytes(
        (gp.path / "vadd.hip").read_bytes().replace(b"#include", b"// caf\xe9\n#include", 1)
    )
    gp.test_file(
        """
def test_latin(gpu_bench):
    gpu_bench.kernel("latin1.hip", "vector_add")
"""
    )
    result = gp.run("--gpuperf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*latin1.hip*not UTF-8*"])


def test_a_failing_compile_is_remembered_for_the_session(gp):
    (gp.path / "broken.hip").write_text('#include "gpuperf.h"\nGPUPERF_KERNEL void k(float* x) {\n')
    gp.test_file(
        """
def test_one(gpu_bench):
    gpu_bench.kernel("broken.hip", "k")

def test_two(gpu_bench):
    gpu_bench.kernel("broken.hip", "k")
"""
    )
    result = gp.run("--gpuperf")
    result.assert_outcomes(failed=2)
    assert result.stdout.str().count("broken.hip:2: '{' is never closed") >= 2


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--gpuperf-gpu=²", "--gpuperf-gpu: expected a device index"),
        (
            "--gpuperf-kernel-timeout=0",
            "the kernel timeout must be a number of seconds in (0, 86400]",
        ),
        ("--gpuperf-compile-timeout=soon", "the compile timeout in seconds must be a number"),
        ("--gpuperf-history=0", "expected a number of saves from 1 to 100"),
    ],
)
def test_bad_options_are_usage_errors(gp, option, message):
    gp.test_file(PLAIN)
    result = gp.run("--gpuperf", option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])


def test_tolerance_zero_means_the_noise_alone(gp):
    gp.test_file(PLAIN)
    gp.run("--gpuperf", "--gpuperf-tolerance=0").assert_outcomes(passed=1)


# -- files that cannot be written ----------------------------------------------------------


@pytest.mark.parametrize(
    "option", ["--gpuperf-json", "--gpuperf-markdown", "--gpuperf-benchmark-json"]
)
def test_an_unwritable_report_path_stops_the_run_before_any_test(gp, option):
    gp.test_file(PLAIN)
    (gp.path / "taken").mkdir()
    result = gp.run("--gpuperf", f"{option}=taken")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{option}=*taken: is a directory, not a regular file*"])


def test_an_unwritable_step_summary_stops_the_run(gp):
    gp.test_file(PLAIN)
    gp.monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(gp.path / "missing" / "summary.md"))
    result = gp.run("--gpuperf", "--gpuperf-markdown=summary.md")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*$GITHUB_STEP_SUMMARY=*does not exist*"])


def test_a_report_that_fails_late_loses_neither_the_summary_nor_the_other_files(gp):
    gp.test_file(
        """
import os

def test_add(gpu_bench):
    add(gpu_bench)
    os.mkdir("report.json")  # the path turns unwritable while the tests run
"""
    )
    result = gp.run("--gpuperf", "--gpuperf-json=report.json", "--gpuperf-markdown=summary.md")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*gpuperf: ERROR: JSON report not written:*", "*1 passed*"])
    assert (gp.path / "summary.md").exists()


@pytest.mark.parametrize("kind", ["file", "dangling link"])
def test_a_baseline_folder_that_is_not_a_folder_stops_the_run(gp, kind):
    gp.test_file(PLAIN)
    target = gp.path / "baselines"
    if kind == "file":
        target.write_text("x")
    else:
        target.symlink_to(gp.path / "nowhere")
    result = gp.run("--gpuperf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*baselines*"])


# -- shared machines --------------------------------------------------------------------------


def test_a_file_where_the_lock_folder_should_be(gp):
    gp.test_file(PLAIN)
    blocker = gp.path / "locks-file"
    blocker.write_text("x")
    gp.monkeypatch.setenv("GPUPERF_LOCK_DIR", str(blocker))
    gp.run().assert_outcomes(passed=1)  # smoke mode never needs the lock
    result = gp.run("--gpuperf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # at the start, not in every test
    result.stderr.fnmatch_lines(
        ["ERROR: pytest-gpuperf: the GPU lock folder *locks-file is a file, not a folder*"]
    )
    assert [line for line in result.stderr.lines if line.strip()] == result.stderr.lines[:1]
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert blocker.read_text() == "x"


def test_a_symlinked_lock_folder_is_refused(gp):
    gp.test_file(PLAIN)
    real = gp.path / "elsewhere"
    real.mkdir()
    link = gp.path / "lock-link"
    link.symlink_to(real)
    gp.monkeypatch.setenv("GPUPERF_LOCK_DIR", str(link))
    result = gp.run("--gpuperf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: pytest-gpuperf: the GPU lock folder *is a symbolic link*"])
    assert list(real.iterdir()) == []


def test_the_lock_folder_is_created_shared(gp):
    gp.test_file(PLAIN)
    folder = gp.path / "fresh-locks"
    gp.monkeypatch.setenv("GPUPERF_LOCK_DIR", str(folder))
    gp.run("--gpuperf").assert_outcomes(passed=1)
    assert oct(folder.stat().st_mode & 0o7777) == oct(0o1777)
    (lock,) = folder.glob("*.lock")
    assert lock.stat().st_mode & 0o666 == 0o666


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file to another user")
def test_locks_another_user_created_serve_this_run_under_xdist_too(gp):
    """With filelock 4.x, a GPU lock or save lock created by another uid in the shared (sticky)
    folder failed every test ("lock file belongs to uid 2002"), the degraded-GPU probe stopped
    an xdist run, and saves were refused (tests/unit/test_shared_lock.py: real uids)."""
    gp.test_file(PLAIN)
    folder = gp.path / "shared-locks"
    folder.mkdir(mode=0o1777)
    folder.chmod(0o1777)
    gp.monkeypatch.setenv("GPUPERF_LOCK_DIR", str(folder))
    gp.run("--gpuperf-save", "--gpuperf-sim-gpus=2").assert_outcomes(passed=1)
    theirs = sorted(folder.glob("*.lock"))
    assert len(theirs) == 2  # GPU 0's lock and the baseline file's save lock
    for lock in theirs:  # as if uid 2002 had made every one of them
        os.chown(lock, 2002, 2002)
    gp.run("--gpuperf-save", "--gpuperf-sim-gpus=2").assert_outcomes(passed=1)
    result = gp.run_subprocess("--gpuperf", "--gpuperf-sim-gpus=2", "-n", "2")
    result.assert_outcomes(passed=1)
    assert {lock.stat().st_uid for lock in theirs} == {2002}  # the same files served us


def test_a_relative_lock_dir_lies_in_the_temp_dir_not_in_the_checkout(gp):
    import shutil
    import tempfile
    import uuid

    gp.test_file(PLAIN)
    name = f"gpuperf-relative-locks-{uuid.uuid4().hex[:8]}"
    gp.monkeypatch.setenv("GPUPERF_LOCK_DIR", name)
    try:
        gp.run("--gpuperf-save").assert_outcomes(passed=1)
        assert not (gp.path / name).exists()
        assert list((Path(tempfile.gettempdir()) / name).glob("*.lock"))
    finally:
        shutil.rmtree(Path(tempfile.gettempdir()) / name, ignore_errors=True)


def test_a_relative_cache_dir_lies_in_the_cache_home_not_in_the_checkout(repo, tmp_path):
    """`GPUPERF_CACHE_DIR=kcache` extracted the base revision's tree inside the checkout:
    the next run collected its test file ("import file mismatch") and ran its conftest.py,
    and `git status` listed the folder."""
    from tests.git_repo import git

    repo.monkeypatch.setenv("GPUPERF_CACHE_DIR", "kcache")
    repo.monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    for _ in range(2):  # the second run is the one that collected the extracted tree
        result = repo.run("--gpuperf", "--gpuperf-compare=HEAD")
        result.assert_outcomes(passed=1)
    assert not (repo.path / "kcache").exists()
    assert git(repo.path, "status", "--short", "--", ":!.locks") == ""  # the fixture's locks
    assert list((tmp_path / "xdg" / "kcache" / "trees").iterdir())  # taken in the cache home


def test_a_cache_dir_inside_the_checkout_stops_a_measuring_run(repo):
    inside = repo.path / "kernel-cache"
    repo.monkeypatch.setenv("GPUPERF_CACHE_DIR", str(inside))
    result = repo.run("--gpuperf", "--gpuperf-compare=HEAD")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: pytest-gpuperf: GPUPERF_CACHE_DIR={inside}: * lies inside the checkout *, "
         "where pytest would collect the base revision's tests and conftest.py extracted "
         "there and `git status` lists it; choose a folder outside it (unset, it is "
         "~/.cache/pytest-gpuperf/kernels)"]
    )  # fmt: skip
    assert not inside.exists()


HOLD_THE_SIM_GPU = """
import os, sys, time
os.environ["PYTEST_XDIST_WORKER"] = "gw5"
from pytest_gpuperf.session.gpu_lock import GpuLock
from pytest_gpuperf.runtime import open_backend

backend = open_backend("sim", 0, device="mi300x")
with GpuLock(backend.info).held("test_other.py::test_big [copy]"):
    print("holding", flush=True)
    began = time.monotonic()  # hold until the waiting test has started, then a little longer
    while not os.path.exists(sys.argv[1]) and time.monotonic() - began < 120:
        time.sleep(0.05)
    time.sleep(2.5)
"""

SAY_IT_OFTEN = """
from pytest_gpuperf.session import gpu_lock

gpu_lock.WAIT_REPORT_S = 0.5  # every 0.5 s, not every 10 s
_acquire = gpu_lock.GpuLock._acquire


def _tell_the_holder(self, lock, what):  # the holder lets go 2.5 s after this
    open({started!r}, "w").close()
    return _acquire(self, lock, what)


gpu_lock.GpuLock._acquire = _tell_the_holder
"""


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["plain", "xdist"])
def test_a_wait_for_the_gpu_is_seen_without_dash_s(gp, xdist):
    """Capture swallowed the wait message (written to the captured standard error): a run
    waiting up to the 1800 s lock timeout for another process showed nothing."""
    if xdist:
        pytest.importorskip("xdist")
    gp.test_file(PLAIN)
    started = gp.path / "test-started"
    with (gp.path / "conftest.py").open("a") as conftest:
        conftest.write(SAY_IT_OFTEN.format(started=str(started)))
    script = gp.path / "hold.py"
    script.write_text(HOLD_THE_SIM_GPU)
    holder = subprocess.Popen(
        [sys.executable, str(script), str(started)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        result = gp.run_subprocess("--gpuperf", *xdist)
    finally:
        holder.wait(30)
    result.assert_outcomes(passed=1)
    both = result.stdout.lines + result.stderr.lines
    waits = [line for line in both if "waiting" in line and "for GPU sim-" in line]
    assert waits, both
    assert re.search(
        r"gpuperf: test_perf.py::test_add \[vector_add\]: waiting \d+ s for GPU sim-\S+, held "
        r"by user \S+, pid \d+, pytest-xdist worker gw5 \(test_other.py::test_big \[copy\]\)",
        waits[0],
    ), waits[0]


# -- what a failed check leaves ----------------------------------------------------------------


def test_a_failed_subtest_keeps_its_measurements_from_passing_and_being_saved(gp):
    gp.test_file(
        """
import pytest

try:
    from _pytest.subtests import Subtests  # noqa: F401  pytest >= 9 has subtests built in
    BUILT_IN = True
except ImportError:
    BUILT_IN = False

if not BUILT_IN:
    @pytest.fixture
    def subtests(request):
        # What pytest 9's subtests do: a report per subtest while the test body runs.
        from contextlib import contextmanager
        from _pytest.runner import CallInfo

        class Subtests:
            @contextmanager
            def test(self):
                try:
                    yield
                except AssertionError:
                    call = CallInfo.from_call(lambda: (_ for _ in ()).throw(AssertionError()),
                                              "call")
                    report = request.node.ihook.pytest_runtest_makereport(
                        item=request.node, call=call)
                    request.node.ihook.pytest_runtest_logreport(report=report)

        return Subtests()


def test_checked_in_a_subtest(gpu_bench, subtests):
    kernel = gpu_bench.kernel("vadd.hip", "vector_add")
    N = 1 << 20
    a = gpu_bench.to_device(np.ones(N, np.float32))
    c = gpu_bench.empty(N)
    gpu_bench(kernel, grid=N // 256, block=256, args=(a, a, c, N), bytes=12 * N)
    with subtests.test():
        assert False, "the output check failed"
"""
    )
    result = gp.run("--gpuperf-save", "--gpuperf-json=report.json")
    (row,) = gp.report()["results"]
    assert row["verdict"]["status"] == "unjudged"
    assert row["verdict"]["save"]["saved"] is False
    assert not (gp.path / "baselines" / "mi300x-sim.toml").exists()
    assert "not judged" in result.stdout.str()


def test_reports_follow_the_final_outcome_of_a_rerun(gp):
    gp.with_reruns()
    gp.test_file(
        """
import conftest

@pytest.mark.min_bw(0.3)
def test_flaky(gpu_bench):
    add(gpu_bench)
    assert conftest.RUNS[gpu_bench.test.test_id] == 1, "fails the first time"
"""
    )
    result = gp.run("--gpuperf", "--gpuperf-json=report.json")
    assert result.ret == 0
    (row,) = gp.report()["results"]
    assert row["test_outcome"] == "passed" and row["verdict"]["status"] == "pass"
    assert gp.report()["summary"]["failed"] == 0


def test_an_in_place_kernel_failing_its_check_is_told_why(gp):
    gp.test_file(
        """
def test_in_place(gpu_bench):
    kernel = gpu_bench.kernel("vadd.hip", "vector_add")
    N = 1 << 20
    x = np.ones(N, np.float32)
    dx = gpu_bench.to_device(x)
    gpu_bench(kernel, grid=N // 256, block=256, args=(dx, dx, dx, N), bytes=12 * N)
    np.testing.assert_array_equal(gpu_bench.from_device(dx, np.float32, N), x + x)
"""
    )
    smoke = gp.run()
    smoke.assert_outcomes(passed=1)  # one launch: the doubling is right
    measured = gp.run("--gpuperf")
    measured.assert_outcomes(failed=1)
    measured.stdout.fnmatch_lines(
        [
            "*under --gpuperf each kernel runs many times on the same buffers*"
            "setup=lambda: gpu_bench.fill(out, 0)*"
        ]
    )


def test_setup_resets_an_accumulator_before_every_timed_launch(gp):
    conftest = gp.path / "conftest.py"
    conftest.write_text(
        conftest.read_text()
        + """

@simulate.model("vadd.hip", "vector_add", reads_outputs=True)
def accumulate(args, launch):
    a, b, c, n = args
    count = min(n, launch.threads_x)
    c[:count] += a[:count] + b[:count]
"""
    )
    gp.test_file(
        """
def test_accumulates(gpu_bench):
    kernel = gpu_bench.kernel("vadd.hip", "vector_add")
    N = 1 << 16
    a = np.ones(N, np.float32)
    da = gpu_bench.to_device(a)
    total = gpu_bench.to_device(np.zeros(N, np.float32))
    gpu_bench(kernel, grid=N // 256, block=256, args=(da, da, total, N), bytes=12 * N,
              setup=lambda: gpu_bench.fill(total, 0))
    np.testing.assert_array_equal(gpu_bench.from_device(total, np.float32, N), 2 * a)
"""
    )
    gp.run("--gpuperf").assert_outcomes(passed=1)


def test_gpuperf_marks_merge_by_keyword_the_closest_winning(gp):
    gp.test_file(
        """
pytestmark = pytest.mark.gpuperf(cache="hot", strict=True)

@pytest.mark.gpuperf(budget_s=0.01)
def test_merged(gpu_bench):
    result = add(gpu_bench)
    assert result.cache == "hot"
    assert gpu_bench.test.strict and gpu_bench.test.budget_s == 0.01
"""
    )
    result = gp.run("--gpuperf")
    result.assert_outcomes(failed=1)  # strict (from the module) fails: no baseline
    result.stdout.fnmatch_lines(["*a baseline is required (strict baselines)*"])


def test_a_bad_marker_on_a_deselected_test_does_not_stop_the_session(gp):
    gp.test_file(
        """
@pytest.mark.min_bw(80)
def test_bad(gpu_bench):
    add(gpu_bench)

def test_good(gpu_bench):
    add(gpu_bench)
"""
    )
    gp.run("--gpuperf", "-k", "good").assert_outcomes(passed=1)
    result = gp.run("--gpuperf")
    result.stdout.fnmatch_lines(["*min_bw(80): the floor is a fraction*did you mean 0.8*"])
    assert result.ret != 0


def test_the_environment_of_these_tests_is_clean():
    assert "GPUPERF_SIM_HANG" not in os.environ and Path.cwd().exists()
