"""The words a file-system fault is reported with, and the writers that must leave no debris
when the disk refuses them (the compile cache, the JSON report)."""

from __future__ import annotations

import errno
import json
import os

import pytest

from pytest_gpuperf.errors import os_error_remedy, os_error_words
from pytest_gpuperf.record import json_report
from pytest_gpuperf.report import os_fault_line
from pytest_gpuperf.runtime import compile as compile_module


@pytest.mark.parametrize(
    ("code", "words", "remedy"),
    [
        (errno.EROFS, "Read-only file system (EROFS)", "read-only: write elsewhere with X"),
        (errno.ENOSPC, "No space left on device (ENOSPC)", "free some space there"),
        (errno.EDQUOT, "(EDQUOT)", "your quota"),
        (errno.EACCES, "Permission denied (EACCES)", "make it writable for this user"),
        (errno.EIO, "(EIO)", "fix the path, or write elsewhere with X"),
    ],
)
def test_an_errno_is_said_in_words_with_its_name_and_a_way_out(code, words, remedy):
    error = OSError(code, os.strerror(code), "/some/file")
    assert words in os_error_words(error)
    assert remedy in os_error_remedy(error, elsewhere="X")
    line = os_fault_line("JSON report not written", error, "X")
    assert line.startswith("JSON report not written: /some/file: ") and words in line


def test_an_error_without_an_errno_keeps_its_own_text():
    assert os_error_words(OSError("disk on fire")) == "disk on fire"


def full_disk(monkeypatch, module) -> None:
    real = module.os.fdopen

    class Full:
        def __init__(self, handle):
            self.handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(module.os, "fdopen", lambda fd, *a, **k: Full(real(fd, *a, **k)))


def test_a_full_disk_leaves_no_temporary_in_the_compile_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPERF_CACHE_DIR", str(tmp_path))
    full_disk(monkeypatch, compile_module)
    compile_module._store(tmp_path / "key.bin", b"binary", "log")  # never raises
    assert list(tmp_path.iterdir()) == []


def test_a_json_report_is_whole_or_absent(tmp_path, monkeypatch):
    target = tmp_path / "out" / "report.json"
    json_report.write_json(target, {"a": 1})
    full_disk(monkeypatch, json_report)
    with pytest.raises(OSError, match="No space left"):
        json_report.write_json(target, {"a": 2})
    assert json.loads(target.read_text()) == {"a": 1}  # the old report, not half a new one
    assert [p.name for p in target.parent.iterdir()] == ["report.json"]
