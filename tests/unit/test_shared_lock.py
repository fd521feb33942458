"""Locks every user of a machine can take (shared_lock.py), with real users.

As root (CI runs as root), forked children switch to uids 2001-2003 with os.setuid after their
imports, so they need nothing but the kernel. With the newest filelock (4.3.1 when written)
FileLock refused a lock file another uid had created in the sticky shared folder ("lock file
belongs to uid 2002"); these locks do not go through it. Also here: the lock folder's own checks
(non-root cases in a child), a relative GPUPERF_LOCK_DIR, and save locks keyed by the folder's
identity (one folder through a bind mount or a symbolic link: one lock).
"""

from __future__ import annotations

import codecs
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_gpuperf.baseline import BaselineStore
from pytest_gpuperf.baseline import store as store_module
from pytest_gpuperf.baseline.shared_lock import (
    GPU_LOCK_NAMES,
    SAVE_LOCK_NAMES,
    LockTimeout,
    SharedFileLock,
    ensure_lock_dir,
    lock_dir,
    unreadable_lock,
)
from pytest_gpuperf.errors import GpuPerfError
from pytest_gpuperf.session.gpu_lock import GpuLock
from tests.unit.test_baseline import make_entry
from tests.unit.test_gpu_lock import INFO

as_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="needs root to switch to other users (CI runs as root)",
)

GPU1 = replace(INFO, index=1, pci_bus_id="0000:C2:00.0")  # another GPU than test_gpu_lock's


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder like /tmp that every user can reach (pytest's tmp_path is root's, mode 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="gpuperf-shared-"))
    folder.chmod(0o1777)  # like /tmp
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _child(uid: int, action: Callable[[], None], results) -> None:
    try:
        # what the action would import lazily, while root can still read the interpreter's
        # files (a CI venv lies in a folder only root may enter)
        codecs.lookup("utf-8-sig")
        import tomli_w  # noqa: F401

        if uid:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        action()
        results.put("ok")
    except BaseException as problem:  # the parent asserts on what came back
        results.put(f"{type(problem).__name__}: {problem}")


def as_user(uid: int, action: Callable[[], None]) -> str:
    """Run `action` in a forked child as `uid` (0: stay root); "ok" or the error it raised."""
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_child, args=(uid, action, results))
    child.start()
    child.join(60)
    return results.get(timeout=5)


@as_root
def test_users_sharing_a_lock_folder_take_each_others_gpu_lock(shared):
    locks = shared / "locks"

    def measure() -> None:
        with GpuLock(GPU1, directory=locks, timeout_s=5).held("a test"):
            pass

    assert as_user(2002, measure) == "ok"  # uid 2002 creates the folder and GPU 1's lock
    lock_file = locks / "pci-0000-c2-00.0.lock"
    assert lock_file.stat().st_uid == 2002
    assert oct(locks.stat().st_mode & 0o7777) == oct(0o1777)
    assert as_user(2001, measure) == "ok"
    assert as_user(2003, measure) == "ok"
    assert as_user(0, measure) == "ok"
    assert lock_file.stat().st_uid == 2002  # the same file served everyone


@as_root
def test_a_lock_file_created_under_another_users_umask_still_locks(shared):
    """flock needs no write access: a 0644 lock file of another user is still a lock."""
    locks = shared / "locks"
    ensure_lock_dir(locks)
    path = locks / "save-x.lock"
    path.touch()
    path.chmod(0o644)
    os.chown(path, 2002, 2002)

    def hold_then_wait() -> None:
        with SharedFileLock(path, timeout_s=5):
            pass

    assert as_user(2001, hold_then_wait) == "ok"


@as_root
def test_a_holder_of_another_user_keeps_the_others_waiting_and_is_named(shared):
    locks = shared / "locks"
    context = multiprocessing.get_context("fork")
    ready, release = context.Event(), context.Event()

    def hold() -> None:
        os.environ["PYTEST_XDIST_WORKER"] = "gw3"
        with GpuLock(GPU1, directory=locks).held("test_big [copy]"):
            ready.set()
            release.wait(30)

    results = context.Queue()
    holder = context.Process(target=_child, args=(2003, hold, results))
    holder.start()
    try:
        assert ready.wait(30)
        messages: list[str] = []
        waiting = GpuLock(GPU1, directory=locks, timeout_s=0.6, notify=messages.append)
        with (
            pytest.raises(GpuPerfError, match=r"pid \d+, pytest-xdist worker gw3 \(test_big"),
            waiting.held("mine"),
        ):
            pass
    finally:
        release.set()
        holder.join(30)
    assert results.get(timeout=5) == "ok"
    with GpuLock(GPU1, directory=locks, timeout_s=5).held("mine"):
        pass


@as_root
def test_saves_of_several_users_into_a_shared_baseline_folder(shared, monkeypatch):
    locks, baselines = shared / "locks", shared / "baselines"
    baselines.mkdir()
    baselines.chmod(0o777)  # a team's folder: everyone may replace the file
    monkeypatch.setenv("GPUPERF_LOCK_DIR", str(locks))

    def save(test_id: str) -> Callable[[], None]:
        return lambda: BaselineStore(baselines, lock_timeout_s=5).save(
            "h100-sxm", [make_entry(test_id=test_id)]
        )

    assert as_user(2002, save("t.py::test_a")) == "ok"
    assert as_user(2001, save("t.py::test_b")) == "ok"
    assert as_user(0, save("t.py::test_c")) == "ok"
    saved = {key[0] for key in BaselineStore(baselines).load("h100-sxm").entries}
    assert saved == {"t.py::test_a", "t.py::test_b", "t.py::test_c"}
    (save_lock,) = locks.glob("save-*.lock")
    assert save_lock.stat().st_uid == 2002


def _not_writable_by_2001(folder: Path) -> Callable[[], None]:
    return lambda: ensure_lock_dir(folder) and None


@as_root
def test_a_lock_folder_another_user_owns_is_refused_with_the_way_out(shared):
    theirs = shared / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, 2002, 2002)
    said = as_user(2001, _not_writable_by_2001(theirs))
    assert said.startswith("GpuPerfError: the GPU lock folder")
    assert "(owner uid 2002, mode 755) is not writable by this user" in said
    assert f"`chmod 1777 {theirs}`" in said and "GPUPERF_LOCK_DIR" in said
    mine = shared / "mine"
    mine.mkdir(mode=0o555)
    os.chown(mine, 2001, 2001)
    assert "mode 555) is not writable" in as_user(2001, _not_writable_by_2001(mine))


def test_a_relative_lock_dir_is_taken_in_the_temp_dir_not_here(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPUPERF_LOCK_DIR", "gpu-locks-of-a-test")
    assert lock_dir() == Path(tempfile.gettempdir()) / "gpu-locks-of-a-test"
    monkeypatch.setenv("GPUPERF_LOCK_DIR", "~/locks")
    assert lock_dir() == Path.home() / "locks"
    monkeypatch.setenv("GPUPERF_LOCK_DIR", "")
    assert lock_dir() == Path(tempfile.gettempdir()) / "pytest-gpuperf-locks"


def test_a_lock_replaced_while_waiting_is_taken_on_the_new_file(tmp_path):
    path = tmp_path / "x.lock"
    first = SharedFileLock(path, timeout_s=1)
    first.acquire()
    first_inode = path.stat().st_ino
    path.unlink()  # its owner removed it while we held it: a waiter must not lock the old one
    second = SharedFileLock(path, timeout_s=1)
    second.acquire()
    assert path.stat().st_ino != first_inode
    first.release()
    second.release()
    with pytest.raises(LockTimeout), SharedFileLock(path, timeout_s=0.2):
        SharedFileLock(path, timeout_s=0.2).acquire()


def test_a_fifo_or_a_link_at_the_lock_path_is_refused(tmp_path):
    os.mkfifo(tmp_path / "fifo.lock")
    with pytest.raises(OSError, match="not a regular file"):
        SharedFileLock(tmp_path / "fifo.lock", timeout_s=0.2).acquire()
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "link.lock").symlink_to(victim)
    with pytest.raises(OSError):
        SharedFileLock(tmp_path / "link.lock", timeout_s=0.2).acquire()
    assert victim.read_text() == "keep"


def test_one_folder_through_a_symbolic_link_has_one_save_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPERF_LOCK_DIR", str(tmp_path / "locks"))
    real = tmp_path / "baselines"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    one = store_module.lock_path_for(real / "h100-sxm.toml")
    assert store_module.lock_path_for(tmp_path / "link" / "h100-sxm.toml") == one
    assert store_module.lock_path_for(real / "mi300x.toml") != one


def _mount_namespaces_work() -> bool:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return False
    try:
        done = subprocess.run(["unshare", "-m", "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


@pytest.mark.skipif(
    not _mount_namespaces_work(), reason="needs root and mount namespaces (unshare -m)"
)
def test_one_folder_through_a_bind_mount_has_one_lock_and_no_save_removes_a_live_temporary(
    shared, monkeypatch
):
    """Keyed by path, the two mount paths had two locks: one save removed the other's live
    temporary (reported "NOT saved"). The bind mount lives in a private mount namespace."""
    monkeypatch.setenv("GPUPERF_LOCK_DIR", str(shared / "locks"))
    real, other = shared / "baselines", shared / "mounted"
    real.mkdir()
    other.mkdir()
    script = f"""
import os, sys
sys.path.insert(0, {str(Path(store_module.__file__).parents[2])!r})
os.environ["GPUPERF_LOCK_DIR"] = {str(shared / "locks")!r}
from pathlib import Path
from pytest_gpuperf.baseline import store
from pytest_gpuperf.baseline.shared_lock import SharedFileLock
from pytest_gpuperf.errors import BaselineError
real, other = Path({str(real)!r}), Path({str(other)!r})
assert os.stat(real / "x").st_ino == os.stat(other / "x").st_ino, "not the same folder"
assert store.lock_path_for(real / "h100-sxm.toml") == store.lock_path_for(other / "h100-sxm.toml")
live = real / ".h100-sxm.toml.abcd1234.tmp"  # a save through the first path is writing
live.write_text("half a file")
with SharedFileLock(store.lock_path_for(real / "h100-sxm.toml"), timeout_s=5):
    try:
        store.write_locked(
            other / "h100-sxm.toml", lambda: "", what="baselines", lock_timeout_s=0.3
        )
    except BaselineError as refused:
        assert "could not lock" in str(refused), refused
    else:
        raise AssertionError("the second path took its own lock")
assert live.read_text() == "half a file"
print("one lock")
"""
    (real / "x").write_text("")
    done = subprocess.run(
        [
            "unshare",
            "-m",
            "sh",
            "-c",
            f'mount --make-rprivate / && mount --bind {real} {other} && exec "$0" -c "$1"',
            sys.executable,
            script,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "one lock" in done.stdout, done.stderr
    assert not any(other.iterdir())  # the mount never left its namespace


def _planted(folder: Path, name: str) -> Path:
    """A lock file uid 2002 made 0600 in the shared folder (by hand, or an old release)."""
    ensure_lock_dir(folder)
    path = folder / name
    path.touch()
    path.chmod(0o600)
    os.chown(path, 2002, 2002)
    return path


@as_root
def test_a_lock_file_another_user_made_unreadable_is_named_before_anything_runs(shared):
    """Before: the GPU lock failed each test with a long traceback, and a save lock let the
    run measure, then advised "make it writable" (a lock needs only to be readable)."""
    locks = shared / "locks"
    gpu = _planted(locks, "sim-mi300x-0.lock")
    said = []
    assert as_user(2001, lambda: said.append(unreadable_lock(locks, GPU_LOCK_NAMES))) == "ok"
    assert unreadable_lock(locks, GPU_LOCK_NAMES) == ""  # root reads it

    def check() -> None:
        line = unreadable_lock(locks, GPU_LOCK_NAMES)
        assert line == (
            f"the lock file {gpu} (owner uid 2002, mode 600) cannot be read by this user, and "
            f"a lock needs only that: its owner can run `chmod 644 {gpu}` (or remove it), or "
            "set GPUPERF_LOCK_DIR to a folder of your own"
        ), line
        assert unreadable_lock(locks, SAVE_LOCK_NAMES) == ""

    assert as_user(2001, check) == "ok"


@as_root
def test_a_save_lock_another_user_made_unreadable_says_readable_not_writable(shared, monkeypatch):
    locks, baselines = shared / "locks", shared / "baselines"
    baselines.mkdir()
    baselines.chmod(0o777)
    monkeypatch.setenv("GPUPERF_LOCK_DIR", str(locks))
    store = BaselineStore(baselines, lock_timeout_s=5)
    lock = _planted(locks, store_module.lock_path_for(store.path_for("h100-sxm")).name)

    def save() -> None:
        BaselineStore(baselines, lock_timeout_s=5).save("h100-sxm", [make_entry()])

    said = as_user(2001, save)
    assert said.startswith("BaselineError: ") and "not saved: the lock file" in said, said
    assert f"`chmod 644 {lock}`" in said and "writable" not in said, said
    assert not (baselines / "h100-sxm.toml").exists()


@as_root
def test_a_run_with_an_unreadable_lock_stops_before_its_first_test(shared):
    """A real pytest run of uid 2001 (in a forked child, its imports made as root first)."""
    project, locks = shared / "project", shared / "locks"
    project.mkdir(mode=0o777)
    project.chmod(0o777)
    (project / "test_it.py").write_text("def test_it():\n    pass\n")
    planted = _planted(locks, "sim-mi300x-0.lock")
    # The plugin named, entry points off: uid 2001 may not list a root-only virtual
    # environment's site-packages (CI's is in a 0700 mktemp folder), where pytest would look
    # for them, and an installed entry point would register the plugin a second time.
    args = [
        "-p",
        "pytest_gpuperf.plugin",
        "-p",
        "no:cacheprovider",
        "-q",
        "--gpuperf",
        "--gpuperf-backend=sim",
        "--rootdir",
        str(project),
        str(project),
    ]

    def run() -> None:
        import pytest as inner

        os.environ["GPUPERF_LOCK_DIR"] = str(locks)
        os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        output = open(project / "out.txt", "w", buffering=1)  # noqa: SIM115 - the child's
        sys.stdout = sys.stderr = output  # terminal, up to its end
        # as root first: what the run imports is imported (the interpreter's folder is root's)
        assert inner.main(args) == inner.ExitCode.OK
        output.seek(0)
        output.truncate()
        os.setgroups([])
        os.setgid(2001)
        os.setuid(2001)
        code = inner.main(args)
        assert code == inner.ExitCode.USAGE_ERROR, code

    said = as_user(0, run)
    text = (project / "out.txt").read_text()
    assert said == "ok", text
    assert f"pytest-gpuperf: the lock file {planted} (owner uid 2002, mode 600)" in text
    assert "Traceback" not in text and "passed" not in text
