"""report/visible.py: text from a file printed on a terminal can neither act on the terminal
nor break out of its line, and reads the same otherwise."""

from __future__ import annotations

from pytest_gpuperf.report.visible import visible


def test_control_characters_are_escaped_as_python_writes_them():
    assert visible("a\x1b]0;owned\x07b") == "a\\x1b]0;owned\\x07b"  # a terminal title
    assert visible("\x1b[2J\x1b[H") == "\\x1b[2J\\x1b[H"  # clear the screen
    assert visible("FAILED\rPASSED\n") == "FAILED\\rPASSED\\n"  # overwrite, forge a line
    assert visible("\t\x00\x7f") == "\\t\\x00\\x7f"
    assert visible("\x9b2J\x85") == "\\x9b2J\\x85"  # C1: the 8-bit CSI, next line


def test_bidirectional_overrides_and_separators_are_escaped():
    """'Trojan Source' (CVE-2021-42574): text that reads in another order than it is."""
    assert visible("ok\u202egnp.exe") == "ok\\u202egnp.exe"
    assert visible("a\u2066b\u2069c\u200f") == "a\\u2066b\\u2069c\\u200f"
    assert visible("a\u2028b\u2029") == "a\\u2028b\\u2029"


def test_everything_else_is_kept():
    text = "tests/perf/test_dot.py::test_dot[8M-ä-漢字-🙂] [dot, cold] 75.0% ±0.5% µs"
    assert visible(text) == text
    assert visible(Exception("x\x1by")) == "x\\x1by"  # anything str() turns into text
