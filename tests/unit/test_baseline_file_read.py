"""The reader both stores share (baseline/file_read.py): what is not a regular file is never
opened, size and nesting are bounded, every decode error has its line; the static gate's facts
files get the same."""

from __future__ import annotations

import os

import pytest

from pytest_gpuperf.baseline import BaselineStore, file_read
from pytest_gpuperf.baseline.file_read import check_nesting, read_store_text
from pytest_gpuperf.errors import BaselineError
from pytest_gpuperf.gate.static.store import StaticStore


def test_the_static_facts_store_refuses_a_fifo_and_deep_nesting(tmp_path):
    folder = tmp_path / "baselines" / "static"
    folder.mkdir(parents=True)
    os.mkfifo(folder / "gfx942.toml")
    with pytest.raises(BaselineError, match=r"is a FIFO .*not a static facts file"):
        StaticStore(tmp_path / "baselines").load("gfx942")
    (folder / "gfx942.toml").unlink()
    (folder / "gfx942.toml").write_text(
        'schema = 1\narch = "gfx942"\nx = ' + "[" * 5000 + "]" * 5000
    )
    with pytest.raises(BaselineError, match=r"gfx942.toml:3: arrays or tables nest more than 32"):
        StaticStore(tmp_path / "baselines").load("gfx942")


def test_brackets_in_strings_and_comments_do_not_nest(tmp_path):
    text = (
        "# [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n"
        'a = "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["\n'
        "b = '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[['\n"
        'c = """\n[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\"""\n"""\n'
        "d = '''\n[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[['''\n"
        "e = [[1, 2], {x = [3]}]\n"
    )
    check_nesting(tmp_path / "f.toml", text)
    deep = text + "f = " + "[" * 33 + "]" * 33 + "\n"
    with pytest.raises(BaselineError, match=r"f.toml:10: "):
        check_nesting(tmp_path / "f.toml", deep)


def test_a_recursion_the_scan_missed_is_still_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(file_read, "MAX_NESTING", 10**6)
    path = tmp_path / "baselines" / "mi300x.toml"
    path.parent.mkdir()
    path.write_text('schema = 2\ndevice = "mi300x"\nx = ' + "[" * 100_000 + "]" * 100_000)
    with pytest.raises(BaselineError, match="nests too deep to parse"):
        BaselineStore(path.parent).load("mi300x")


def test_a_file_that_grows_past_the_limit_while_read_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "a.toml"
    path.write_text("x = 1\n" * 100)
    monkeypatch.setattr(file_read, "MAX_FILE_BYTES", 50)
    with pytest.raises(BaselineError, match="is 600 bytes, more than a baseline file may be"):
        read_store_text(path, "a baseline file")


def test_non_utf8_names_the_line_and_the_byte(tmp_path):
    path = tmp_path / "a.toml"
    path.write_bytes(b"x = 1\ny = 2\nz = '\xff'\n")
    with pytest.raises(BaselineError, match=r"a.toml:3: not UTF-8 text \(byte 0xff at offset 17"):
        read_store_text(path, "a baseline file")
    path.write_bytes(b"\xef\xbb\xbfx = 1\n")  # a byte-order mark is not an error
    assert read_store_text(path, "a baseline file") == "x = 1\n"


@pytest.mark.parametrize(
    "line",
    [
        "a" + ".a" * 100_000 + " = 1",  # 100,000 parts were killed for memory at 18.6 GB
        "[" + ".".join(["a"] * 10_000) + "]",  # a table header nests the same way
        'x = {"a"' + '."a"' * 1_000 + " = 1}",  # quoted parts, in an inline table
    ],
    ids=["key", "header", "quoted"],
)
def test_a_dotted_key_of_too_many_parts_is_refused_at_its_line(tmp_path, line):
    text = 'schema = 2\ndevice = "h100-sxm"\n' + line + "\n"
    with pytest.raises(BaselineError, match=r"f.toml:3: a dotted key of more than 32 parts"):
        check_nesting(tmp_path / "f.toml", text)


def test_a_number_of_5000_digits_is_refused_at_its_line(tmp_path):
    """Python converts no integer of more than 4,300 digits: a ValueError out of the parser
    (INTERNALERROR, exit 3, before)."""
    for text in ("a = 1\nb = " + "9" * 5000 + "\n", '{"a": 1,\n"b": ' + "9" * 5000 + "}"):
        with pytest.raises(BaselineError, match=r"f:2: a number of more than 100 digits"):
            check_nesting(tmp_path / "f", text)


def test_what_the_files_hold_is_not_refused(tmp_path):
    text = (
        f'"tests/perf/test_x.py::test_y[{".".join("abcdefghijklmnopqrstuvwxyz01234567")}]" = 1\n'
        "entry.save.more = [1.5, 2.5e-3, 3.25, 0.999999999999999999999, 1_000.5]\n"
        "when = 2026-11-27T07:00:00.123456Z\n"
        f'big = "{"9" * 5000}"  # digits in a string are text\n'
        f"# {'a.' * 100} in a comment\n"
    )
    check_nesting(tmp_path / "f.toml", text)
