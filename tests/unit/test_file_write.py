"""The one whole-or-absent writer (baseline/file_write.py) that the baseline store and every
report go through: the knobs that differ (fsync, a new file's mode) and what they share (the
temporary's name, which the store's next save cleans, the mode an existing file keeps)."""

from __future__ import annotations

import os
import stat

import pytest

from pytest_gpuperf.baseline import BaselineStore, file_write
from pytest_gpuperf.baseline.file_write import (
    current_umask,
    remove_stale_temporaries,
    write_whole,
)
from pytest_gpuperf.record.files import write_report
from tests.unit.test_baseline import make_entry


def mode_of(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def fsyncs(monkeypatch):
    calls: list[int] = []
    real = os.fsync

    def fsync(fd):
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return calls


def test_durable_fsyncs_before_the_rename_and_a_report_does_not(tmp_path, fsyncs):
    write_whole(tmp_path / "a.toml", "a\n", durable=True)
    assert len(fsyncs) == 1
    write_report(tmp_path / "r.json", "{}\n")
    assert len(fsyncs) == 1


def test_a_new_file_gets_the_callers_mode_and_an_existing_one_keeps_its_own(tmp_path):
    old = os.umask(0o027)
    try:
        write_whole(tmp_path / "store.toml", "x", new_mode=0o644)
        write_report(tmp_path / "report.json", "{}")
        assert mode_of(tmp_path / "store.toml") == 0o644
        assert mode_of(tmp_path / "report.json") == 0o640 == 0o666 & ~current_umask()
        os.chmod(tmp_path / "store.toml", 0o600)
        write_whole(tmp_path / "store.toml", "y", new_mode=0o644)
        assert mode_of(tmp_path / "store.toml") == 0o600
        assert (tmp_path / "store.toml").read_text() == "y"
    finally:
        os.umask(old)


def test_line_ends_are_newlines_whatever_the_platform_and_bytes_stay_bytes(tmp_path):
    write_whole(tmp_path / "f.txt", "a\nb\u00e9\n")
    assert (tmp_path / "f.txt").read_bytes() == "a\nb\u00e9\n".encode()
    write_whole(tmp_path / "f.o", b"\x7fELF\r\n\x00")
    assert (tmp_path / "f.o").read_bytes() == b"\x7fELF\r\n\x00"


def test_the_static_build_cache_writes_through_it_and_a_full_disk_costs_nothing(
    tmp_path, monkeypatch
):
    from pytest_gpuperf.gate.static import build

    build._store(tmp_path / "cache" / "k.o", b"code")
    assert (tmp_path / "cache" / "k.o").read_bytes() == b"code"

    def full_disk(source, destination):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    build._store(tmp_path / "cache" / "k.o", b"other code")  # no error: a recompile later
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["k.o"]
    assert (tmp_path / "cache" / "k.o").read_bytes() == b"code"


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "f.json"
    path.write_text("old")

    def full_disk(source, destination):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    for write in (
        lambda: write_whole(path, "new", durable=True),
        lambda: write_report(path, "new"),
    ):
        with pytest.raises(OSError, match="No space left"):
            write()
        assert path.read_text() == "old"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["f.json"]


def test_the_stores_cleaning_finds_the_temporaries_the_writer_makes(tmp_path, monkeypatch):
    """The temporary's name and the pattern that cleans it live together: a killed save's
    temporary (here: the rename never happens) is what the next save removes."""
    path = tmp_path / "mi300x.toml"
    monkeypatch.setattr(os, "replace", lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
    monkeypatch.setattr(os, "unlink", lambda *_: None)  # a SIGKILL: nothing cleans up
    with pytest.raises(KeyboardInterrupt):
        write_whole(path, "half", durable=True)
    monkeypatch.undo()
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith(".mi300x.toml.")
    assert [p.name for p in remove_stale_temporaries(path)] == left
    assert list(tmp_path.iterdir()) == []


def test_the_store_and_the_reports_write_through_it(tmp_path, monkeypatch):
    from pytest_gpuperf.baseline import store

    seen = []

    def spy(path, text, **knobs):
        seen.append((path.name, knobs))
        real(path, text, **knobs)

    real = file_write.write_whole
    monkeypatch.setattr(file_write, "write_whole", spy)
    monkeypatch.setattr(store, "write_whole", spy)
    write_report(tmp_path / "r.json", "{}")
    BaselineStore(tmp_path / "baselines").save("mi300x", [make_entry()])
    assert seen == [
        ("r.json", {}),
        ("mi300x.toml", {"new_mode": 0o644, "durable": True}),
    ]
