"""Strange things at a baseline file's path (a FIFO, a character device, a 2 GiB file, an array
nested 100,000 deep, bytes that are not UTF-8): each stops the run before any test with exit 4
and one line naming the file (and its line where it has one), never a hang, a MemoryError or
a RecursionError traceback, and the node at the path is left as it was. The static gate's
facts files are read the same way (tests/unit/test_baseline_file_read.py)."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from pytest_gpuperf.baseline.file_read import MAX_FILE_BYTES, MAX_NESTING

PLAIN = """
def test_add(gpu_bench):
    add(gpu_bench)
"""

HEADER = 'schema = 2\ndevice = "mi300x-sim"\n'


def _stops_with_one_line(result, pattern: str) -> None:
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1, errors
    result.stderr.fnmatch_lines([f"ERROR: pytest-gpuperf: *baselines/mi300x-sim.toml{pattern}"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in result.stdout.str()


@pytest.mark.parametrize("option", ["--gpuperf", "--gpuperf-save"])
def test_a_fifo_at_the_baseline_path_is_refused_without_opening_it(gp, option):
    gp.test_file(PLAIN)
    path = gp.path / "baselines" / "mi300x-sim.toml"
    path.parent.mkdir()
    os.mkfifo(path)
    opened = threading.Event()

    def writer() -> None:  # would block until a reader opened the FIFO; tells if one did
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # ENXIO: no reader has it open
            return
        opened.set()
        os.close(fd)

    result = gp.run(option)
    _stops_with_one_line(
        result, ": is a FIFO (named pipe), not a baseline file; it was not opened*"
    )
    writer()
    assert not opened.is_set()
    assert stat.S_ISFIFO(os.lstat(path).st_mode)  # still the FIFO


def test_a_character_device_at_the_baseline_path_is_refused(gp):
    """/dev/zero reads forever (MemoryError before); a link to it is what a user without root
    can make, and root's mknod gives the same node type."""
    gp.test_file(PLAIN)
    path = gp.path / "baselines" / "mi300x-sim.toml"
    path.parent.mkdir()
    path.symlink_to("/dev/zero")
    result = gp.run("--gpuperf")
    _stops_with_one_line(result, ": is a character device, not a baseline file; it was not opened*")
    assert os.readlink(path) == "/dev/zero"


def test_a_file_beyond_the_size_limit_is_not_read(gp):
    gp.test_file(PLAIN)
    path = gp.path / "baselines" / "mi300x-sim.toml"
    path.parent.mkdir()
    with path.open("wb") as handle:  # sparse: 2 GiB on paper, nothing on disk
        handle.write(HEADER.encode())
        handle.truncate(2 * 1024**3)
    result = gp.run("--gpuperf-save")
    _stops_with_one_line(
        result,
        f": is 2,147,483,648 bytes, more than a baseline file may be ({MAX_FILE_BYTES:,} bytes)*",
    )
    assert path.stat().st_size == 2 * 1024**3


@pytest.mark.parametrize("option", ["--gpuperf", "--gpuperf-save"])
def test_an_array_nested_100k_deep_is_refused_at_its_line(gp, option):
    gp.test_file(PLAIN)
    text = HEADER + "\n# a comment with [[[[ in it\nx = " + "[" * 100_000 + "]" * 100_000 + "\n"
    path = gp.path / "baselines" / "mi300x-sim.toml"
    path.parent.mkdir()
    path.write_text(text)
    result = gp.run(option)
    _stops_with_one_line(result, f":5: arrays or tables nest more than {MAX_NESTING} deep here*")
    assert path.read_text() == text


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("a" + ".a" * 10_000 + " = 1", "a dotted key of more than 32 parts here"),
        ("x = " + "9" * 5000, "a number of more than 100 digits here"),
    ],
    ids=["dotted-key", "5000-digits"],
)
def test_a_dotted_key_or_a_huge_number_is_refused_before_parsing(gp, line, words):
    """Before: 10,000 dotted parts took 0.4 GB (100,000 were killed for memory), a 5,000-digit
    integer was an INTERNALERROR (exit 3)."""
    gp.test_file(PLAIN)
    path = gp.path / "baselines" / "mi300x-sim.toml"
    path.parent.mkdir()
    path.write_text(HEADER + line + "\n")
    result = gp.run("--gpuperf")
    _stops_with_one_line(result, f":3: {words}*")


def test_bytes_that_are_not_utf8_name_their_line(gp):
    gp.test_file(PLAIN)
    path = gp.baseline("mi300x-sim", [{"id": "test_perf.py::test_add", "efficiency": 0.5}])
    data = path.read_bytes().replace(b"efficiency = 0.5", b"efficiency = 0.5 # caf\xe9", 1)
    line = data[: data.index(b"\xe9")].count(b"\n") + 1
    path.write_bytes(data)
    result = gp.run("--gpuperf-save")
    _stops_with_one_line(result, f":{line}: not UTF-8 text (byte 0xe9 at offset *")
    assert path.read_bytes() == data
