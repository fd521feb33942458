"""The GPU lock: one measurement at a time per GPU, safe in a folder every user shares."""

from __future__ import annotations

import multiprocessing
import os
import time

import pytest

from pytest_gpuperf.errors import GpuPerfError
from pytest_gpuperf.runtime.info import DeviceInfo
from pytest_gpuperf.session.gpu_lock import GpuLock, lock_key

INFO = DeviceInfo(
    backend="cuda",
    index=0,
    name="NVIDIA H100 80GB HBM3",
    arch="sm_90",
    compute_units=132,
    l2_bytes=50 << 20,
    memory_bytes=80 << 30,
    warp_size=32,
    max_threads_per_block=1024,
    shared_bytes_per_block=49152,
    pci_bus_id="0000:C1:00.0",
)


def test_the_key_is_the_pci_bus_id():
    assert lock_key(INFO) == "pci-0000-c1-00.0"


def test_nothing_is_created_until_a_measurement(tmp_path):
    folder = tmp_path / "locks"
    GpuLock(INFO, directory=folder)
    assert not folder.exists()
    with GpuLock(INFO, directory=folder).held("t"):
        assert (folder / f"pci-0000-c1-00.0.{os.getuid()}.holder").exists()
    assert oct(folder.stat().st_mode & 0o7777) == oct(0o1777)
    assert (folder / "pci-0000-c1-00.0.lock").stat().st_mode & 0o666 == 0o666
    assert not list(folder.glob("*.holder"))


def test_a_link_at_the_lock_path_is_never_followed(tmp_path):
    """filelock before 3.20.1 followed it and truncated the target (CVE-2025-68146)."""
    victim = tmp_path / "victim"
    victim.write_text("secret")
    victim.chmod(0o600)
    folder = tmp_path / "locks"
    folder.mkdir()
    (folder / "pci-0000-c1-00.0.lock").symlink_to(victim)
    with (
        pytest.raises(GpuPerfError, match="is a symbolic link"),
        GpuLock(INFO, directory=folder).held("t"),
    ):
        pass
    assert victim.read_text() == "secret" and victim.stat().st_mode & 0o777 == 0o600


def test_a_linked_or_file_folder_is_refused_with_the_way_out(tmp_path):
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    with (
        pytest.raises(GpuPerfError, match=r"symbolic link.*GPUPERF_LOCK_DIR"),
        GpuLock(INFO, directory=link).held("t"),
    ):
        pass
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with (
        pytest.raises(GpuPerfError, match="is a file, not a folder"),
        GpuLock(INFO, directory=blocker).held("t"),
    ):
        pass


def _hold(folder: str, ready, release) -> None:
    os.environ["PYTEST_XDIST_WORKER"] = "gw7"  # this forked child's own environment
    with GpuLock(INFO, directory=__import__("pathlib").Path(folder)).held("holder test [k]"):
        ready.set()
        release.wait(30)


def test_a_waiting_process_says_who_holds_the_gpu_and_for_how_long(tmp_path, monkeypatch):
    monkeypatch.setattr("pytest_gpuperf.session.gpu_lock.WAIT_REPORT_S", 0.3)
    context = multiprocessing.get_context("fork")
    ready, release = context.Event(), context.Event()
    holder = context.Process(target=_hold, args=(str(tmp_path), ready, release))
    holder.start()
    try:
        assert ready.wait(30)
        messages: list[str] = []
        lock = GpuLock(INFO, directory=tmp_path, timeout_s=1.0, notify=messages.append)
        began = time.monotonic()
        with (
            pytest.raises(
                GpuPerfError,
                match=r"waited 1 s.*pid \d+, pytest-xdist worker gw7 \(holder test \[k\]\)",
            ),
            lock.held("me"),
        ):
            pass
        assert time.monotonic() - began < 10
        assert messages and f"pid {holder.pid}" in messages[0] and "holder test [k]" in messages[0]
    finally:
        release.set()
        holder.join(30)
    with GpuLock(INFO, directory=tmp_path, timeout_s=5).held("after"):
        pass  # released when the holder ended


def test_the_lock_is_reentrant_within_a_process(tmp_path):
    lock = GpuLock(INFO, directory=tmp_path)
    with lock.held("outer"), lock.held("inner"):
        assert lock.is_held
    assert not lock.is_held and os.path.exists(tmp_path / "pci-0000-c1-00.0.lock")


def test_the_lock_counts_the_time_it_was_held_once_per_outer_hold(tmp_path):
    lock = GpuLock(INFO, directory=tmp_path)
    assert (lock.held_s, lock.waited_s, lock.holds) == (0.0, 0.0, 0)
    with lock.held("outer"), lock.held("inner (re-entrant: not a second hold)"):
        time.sleep(0.02)
    assert lock.holds == 1 and lock.held_s >= 0.02 and lock.waited_s >= 0.0
    with lock.held("again"):
        pass
    assert lock.holds == 2
