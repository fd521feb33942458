"""Where a report may be written: a regular file (or a new name in a folder) that is not a
baseline, lock or cache file of the run. Anything else stops the run before its first test
with exit 4 and one line, and nothing is written or replaced: a baseline file stays
byte-identical, a device node stays a device node. Reports get the mode the umask gives.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from pytest_gpuperf.baseline.file_write import current_umask
from pytest_gpuperf.record.files import (
    ReportPathError,
    not_regular,
    write_report,
)

PLAIN = """
def test_add(gpu_bench):
    add(gpu_bench)
"""

ENTRIES = [{"id": "test_perf.py::test_add", "efficiency": 0.44}]
REPORTS = ["--gpuperf-json", "--gpuperf-markdown", "--gpuperf-benchmark-json"]


def refused(result: pytest.RunResult, *lines: str) -> None:
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    result.stderr.fnmatch_lines(list(lines))
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert "passed" not in result.stdout.str()  # no test ran


@pytest.mark.parametrize("option", REPORTS)
def test_a_report_path_that_is_a_baseline_file_is_refused_before_any_test(gp, option):
    gp.test_file(PLAIN)
    path = gp.baseline("mi300x-sim", ENTRIES)
    before = path.read_bytes()
    result = gp.run("--gpuperf-save", f"{option}=baselines/mi300x-sim.toml")
    refused(result, f"*{option}=*mi300x-sim.toml: is a baseline file of this run*")
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["mi300x-sim.toml"]


def test_a_baseline_file_the_run_has_not_made_yet_and_a_hard_link_are_refused(gp):
    gp.test_file(PLAIN)
    path = gp.baseline("mi300x-sim", ENTRIES)
    before = path.read_bytes()
    result = gp.run("--gpuperf-save", "--gpuperf-json=baselines/h100-sxm.toml")
    refused(result, "*--gpuperf-json=*h100-sxm.toml: is a baseline file of this run*")
    os.link(path, gp.path / "linked.json")
    result = gp.run("--gpuperf-save", "--gpuperf-json=linked.json")
    refused(result, "*--gpuperf-json=*linked.json: is a baseline file of this run*")
    assert path.read_bytes() == before


def test_pytests_junitxml_on_a_baseline_file_is_refused(gp):
    gp.test_file(PLAIN)
    path = gp.baseline("mi300x-sim", ENTRIES)
    before = path.read_bytes()
    result = gp.run("--gpuperf-save", "--junitxml=baselines/mi300x-sim.toml")
    refused(result, "*--junitxml=*mi300x-sim.toml: is a baseline file of this run*")
    assert path.read_bytes() == before


def test_a_report_in_the_lock_folder_or_the_kernel_cache_is_refused(gp):
    gp.test_file(PLAIN)
    locks = Path(os.environ["GPUPERF_LOCK_DIR"])
    locks.mkdir()
    result = gp.run("--gpuperf", f"--gpuperf-json={locks / 'pci-0000-c1-00.0.lock'}")
    refused(result, "*: is in the GPU lock folder*")
    kernels = gp.path.parent / f"{gp.path.name}-kernels"  # never inside the checkout
    gp.monkeypatch.setenv("GPUPERF_CACHE_DIR", str(kernels))
    result = gp.run("--gpuperf", f"--gpuperf-markdown={kernels / 'report.md'}")
    refused(result, "*--gpuperf-markdown=*report.md: is in the kernel cache*")


def test_two_reports_on_one_file_are_refused(gp):
    gp.test_file(PLAIN)
    result = gp.run("--gpuperf", "--gpuperf-json=out.json", "--gpuperf-markdown=out.json")
    refused(result, "*--gpuperf-markdown=*out.json: is also --gpuperf-json's file*")
    result = gp.run("--gpuperf", "--gpuperf-json=out.xml", "--junitxml=out.xml")
    refused(result, "*--junitxml=*out.xml: is also --gpuperf-json's file*")
    assert not (gp.path / "out.json").exists() and not (gp.path / "out.xml").exists()


def a_device(gp) -> Path:
    """A character device this test may lose: a node of its own (mknod, as root: the code
    before this check replaced the device node it was given, and a run of these tests against
    it must not take the machine's /dev/null with it), else /dev/null, which a run without
    root cannot replace."""
    node = gp.path / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        return Path("/dev/null")
    return node


@pytest.mark.parametrize("option", REPORTS)
def test_a_device_node_is_refused_and_left_a_device(gp, option):
    gp.test_file(PLAIN)
    device = a_device(gp)
    result = gp.run("--gpuperf", f"{option}={device}")
    if device == Path("/dev/null"):
        refused(result, f"*{option}=/dev/null: names a device or a process's open file (/dev)*")
    else:
        refused(result, f"*{option}=*null: is a character device, not a regular file*")
    assert stat.S_ISCHR(os.stat(device).st_mode)


def test_what_is_not_a_regular_file_is_named():
    """Only asked (stat), never opened: the machine's own devices are safe here."""
    assert not_regular(Path("/dev/null")).startswith("is a character device, not a regular")
    assert not_regular(Path("/")).startswith("is a directory, not a regular file")


def test_dev_and_proc_are_refused_but_dev_shm_is_a_folder_like_any_other():
    from pytest_gpuperf.record.files import _system_file

    assert _system_file(Path("/dev/stdout")).startswith("names a device or a process's open")
    assert _system_file(Path("/proc/self/fd/1")).startswith("names a device or a process's")
    assert _system_file(Path("/dev/shm/out/report.json")) == ""


def test_a_fifo_is_refused_without_hanging(gp):
    gp.test_file(PLAIN)
    fifo = gp.path / "pipe.json"
    os.mkfifo(fifo)
    result = gp.run("--gpuperf", "--gpuperf-json=pipe.json")
    refused(result, "*--gpuperf-json=*pipe.json: is a FIFO (named pipe), not a regular file*")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_pytests_junitxml_at_a_fifo_is_refused_without_hanging(gp):
    """Before: pytest's JUnit writer opened the FIFO after the tests and waited for a reader
    (SIGTERM then ended it in a traceback, nothing saved). A device it writes into in place,
    /dev/null, is still fine."""
    gp.test_file(PLAIN)
    fifo = gp.path / "pipe.xml"
    os.mkfifo(fifo)
    args = gp.args("--gpuperf", "--junitxml=pipe.xml")
    result = gp.pytester.runpytest_subprocess(*args, timeout=60)
    refused(result, "*--junitxml=*pipe.xml: is a FIFO (named pipe), not a regular file*")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert gp.run("--gpuperf", "--junitxml=/dev/null").ret == pytest.ExitCode.OK


def test_standard_output_is_refused_at_the_start(gp):
    gp.test_file(PLAIN)
    result = gp.run_subprocess("--gpuperf", "--gpuperf-json=/dev/stdout")
    refused(result, "*--gpuperf-json=/dev/stdout: names a device or a process's open file*")
    result = gp.run("--gpuperf", "--gpuperf-json=-")
    refused(result, "*--gpuperf-json=-: standard output carries pytest's own output*")
    assert not (gp.path / "-").exists()


def test_a_dangling_link_is_refused(gp):
    gp.test_file(PLAIN)
    (gp.path / "report.json").symlink_to(gp.path / "nowhere" / "r.json")
    result = gp.run("--gpuperf", "--gpuperf-json=report.json")
    refused(result, "*--gpuperf-json=*report.json: is a symbolic link to *, which does not exist*")


def test_a_link_to_a_regular_file_is_written_through(gp):
    gp.test_file(PLAIN)
    (gp.path / "kept").mkdir()
    target = gp.path / "kept" / "report.json"
    target.write_text("{}")
    (gp.path / "report.json").symlink_to(target)
    result = gp.run("--gpuperf", "--gpuperf-json=report.json")
    assert result.ret == 0, result.stdout.str()
    assert (gp.path / "report.json").is_symlink()
    assert json.loads(target.read_text())["results"][0]["test_id"] == "test_perf.py::test_add"


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_reports_get_the_umasks_mode(gp, umask):
    gp.test_file(PLAIN)
    previous = os.umask(umask)
    try:
        result = gp.run(
            "--gpuperf",
            "--gpuperf-json=r.json",
            "--gpuperf-markdown=r.md",
            "--gpuperf-benchmark-json=b.json",
        )
    finally:
        os.umask(previous)
    assert result.ret == 0, result.stdout.str()
    for name in ("r.json", "r.md", "b.json"):
        assert oct(stat.S_IMODE((gp.path / name).stat().st_mode)) == oct(0o666 & ~umask), name


def test_an_existing_report_keeps_its_mode(gp):
    gp.test_file(PLAIN)
    (gp.path / "r.json").write_text("old")
    (gp.path / "r.json").chmod(0o640)
    result = gp.run("--gpuperf", "--gpuperf-json=r.json")
    assert result.ret == 0, result.stdout.str()
    assert oct(stat.S_IMODE((gp.path / "r.json").stat().st_mode)) == oct(0o640)
    assert "results" in json.loads((gp.path / "r.json").read_text())


def test_the_writer_never_replaces_what_is_not_a_regular_file(tmp_path):
    """Checked again when written: a path that became a FIFO since the start is left alone
    (the rename would have replaced it), and no temporary is left."""
    fifo = tmp_path / "r.json"
    os.mkfifo(fifo)
    with pytest.raises(ReportPathError, match="is a FIFO"):
        write_report(fifo, "{}")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
    with pytest.raises(ReportPathError, match="names a device"):
        write_report("/dev/null", "{}")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_the_umask_is_read_without_changing_it():
    previous = os.umask(0o027)
    try:
        assert current_umask() == 0o027
        assert current_umask() == 0o027
    finally:
        os.umask(previous)


# -- --gpuperf-gpu ------------------------------------------------------------------------


def test_a_gpu_index_beyond_the_device_count_stops_the_run(gp):
    gp.test_file(PLAIN)
    result = gp.run("--gpuperf", "--gpuperf-gpu=5")
    refused(result, "*--gpuperf-gpu=5: the sim backend shows 1 GPU to this process (GPU 0)*")
    result = gp.run("--gpuperf", "--gpuperf-gpu=2", "--gpuperf-sim-gpus=1,1")
    refused(result, "*--gpuperf-gpu=2: the sim backend shows 2 GPUs to this process (GPUs 0-1)*")
    result = gp.run("--gpuperf", "--gpuperf-gpu=1", "--gpuperf-sim-gpus=1,1")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*GPU 1*"])
