"""Reading a hand-editable store file (baselines, static facts) without trusting what lies at
its path.

Whatever is at `baselines/<device>.toml` may not be a file someone meant to write there: a FIFO
(reading it blocks forever), a character device (/dev/zero reads forever, then MemoryError), a
2 GiB file, a TOML array nested 100,000 deep (the pure-Python TOML parser recurses once per
level: RecursionError and 3,000 lines of traceback). Each is refused with one line naming the
file (and the line, where there is one) before it can hang, exhaust memory or recurse: a node
that is not a regular file is never opened for reading, a file beyond MAX_FILE_BYTES is not
read, and nesting beyond MAX_NESTING is found by a scan that does not recurse.

The same scan bounds what nesting by brackets does not show: a dotted key (`a.a.a... = 1`,
or a header `[a.a.a...]`) nests one table per part (10,000 parts took 0.4 GB in the TOML
parser, 100,000 were killed for memory at 18.6 GB), so a key may have MAX_KEY_PARTS parts;
and a number may have MAX_DIGITS digits (Python refuses to convert an integer of more than
4,300 digits, a ValueError out of the parser: INTERNALERROR, exit 3). A key's length is bounded
by the file's size, which costs the parser no more than its size.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NoReturn

from pytest_gpuperf.baseline.regular_file import decode_utf8, read_regular_bytes
from pytest_gpuperf.errors import BaselineError

# A baseline entry with a full history renders to about 2 KB: 64 MiB is room for some 30,000
# entries, far beyond any suite, and far below what would strain a CI runner's memory.
MAX_FILE_BYTES = 64 * 1024 * 1024
# What the files the stores write nest: [[entry]] > [[entry.save]] > an interval's list. 32
# leaves hand edits every freedom and stays far from Python's recursion limit (1000).
MAX_NESTING = 32
# The keys these files hold have one to three parts (entry.save, a test id in quotes).
MAX_KEY_PARTS = 32
# A 64-bit integer has at most 19 digits, a float's digits beyond 17 change nothing.
MAX_DIGITS = 100

# What can hold a bracket without opening a level: strings of the four TOML kinds and comments.
_NOT_STRUCTURE = re.compile(
    r'"""(?:[^"\\]|\\.|"(?!""))*"""'  # multi-line basic string
    r"|'''.*?'''"  # multi-line literal string
    r'|"(?:[^"\\\n]|\\.)*"'  # basic string
    r"|'[^'\n]*'"  # literal string
    r"|#[^\n]*",  # comment
    re.DOTALL,
)
_TOKEN = re.compile(
    rf"{_NOT_STRUCTURE.pattern}|(?P<open>[\[{{])|(?P<close>[\]}}])|(?P<dot>\.)|(?P<apart>[\n=,:])"
    rf"|(?P<digits>[0-9][0-9_]{{{MAX_DIGITS},}})",
    re.DOTALL,
)


def read_store_text(path: Path, kind: str) -> str:
    """The text of the store file at `path`, or a BaselineError naming it (and the line) when
    it is not a regular file, too large, not UTF-8 or nested too deep. `kind` ("a baseline
    file") says what a directory or a device is not. A UTF-8 byte-order mark is dropped."""
    # one bounded read for every file a user may have edited (record/json_text.py)
    text = decode_utf8(path, read_regular_bytes(path, kind, MAX_FILE_BYTES))
    check_nesting(path, text)
    return text


_BRACKETS_ONLY = str.maketrans("", "", "".join(chr(c) for c in range(128) if chr(c) not in "[]{}"))
_LONG_DIGITS = re.compile(rf"[0-9][0-9_]{{{MAX_DIGITS},}}")
_MANY_DOTS = re.compile(rf"(?:\.[^\[{{\n=,:.]*){{{MAX_KEY_PARTS}}}")


def _surely_within_limits(text: str) -> bool:
    """True when `text` holds nothing check_nesting refuses, found at C speed (the token scan
    below is a Python loop over every comma and colon: 0.6 s a 0.7 MB report, most of a
    publish of 100 reports); False sends it to that scan, which finds the line."""
    bare = _NOT_STRUCTURE.sub(" ", text)
    if _LONG_DIGITS.search(bare) or _MANY_DOTS.search(bare):
        return False
    depth = deepest = 0
    for bracket in bare.translate(_BRACKETS_ONLY):  # ASCII brackets only: a few a row
        if bracket in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif bracket in "]}":  # not any other character the translation kept
            depth = max(depth - 1, 0)
    return deepest <= MAX_NESTING


def check_nesting(path: Path, text: str) -> None:
    """BaselineError at the line where arrays and inline tables nest deeper than MAX_NESTING,
    a dotted key has more than MAX_KEY_PARTS parts, or a number more than MAX_DIGITS digits."""
    if _surely_within_limits(text):
        return
    depth = dots = 0

    def refuse(match: re.Match[str], problem: str) -> NoReturn:
        raise BaselineError(
            str(path),
            f"{problem} (the files this plugin writes hold nothing like it); fix the file or "
            "restore it from git",
            text.count("\n", 0, match.start()) + 1,
        )

    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        if kind == "open":
            depth, dots = depth + 1, 0
            if depth > MAX_NESTING:
                refuse(match, f"arrays or tables nest more than {MAX_NESTING} deep here")
        elif kind == "close":
            depth = max(depth - 1, 0)
        elif kind == "dot":  # a part of a dotted key (or a number's point: one, then a break)
            dots += 1
            if dots >= MAX_KEY_PARTS:
                refuse(match, f"a dotted key of more than {MAX_KEY_PARTS} parts here")
        elif kind == "apart":  # a new line, a value, the next item: a new key begins
            dots = 0
        elif kind == "digits":
            refuse(match, f"a number of more than {MAX_DIGITS} digits here")
        # else a string or a comment: its brackets, dots and digits are text
