"""Text read from a file, made safe to print on a terminal: the one place that does it.

A test id, a board name or a measurement name in a baseline file or a shard's report is
whatever the file says. Printed raw, `ESC]0;...BEL` retitles the terminal, `ESC[2J` clears it,
a carriage return overwrites the start of the line with what follows (a forged "PASSED" over
"FAILED"), and a newline forges a line of our output. Every string that came from a file goes
through `visible` before it is printed: control characters (C0, DEL, C1, which holds the
8-bit CSI), the Unicode line and paragraph separators and the bidirectional overrides
("Trojan Source", CVE-2021-42574) become escapes a reader sees (`\\x1b`, `\\r`, `\\u202e`),
as Python's repr writes them; every other character, accents and CJK included, is kept.
"""

from __future__ import annotations

# The characters that act on a terminal or on the order of the text around them.
_BIDI = (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)
_SEPARATORS = (0x2028, 0x2029)
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(code: int) -> str:
    character = chr(code)
    if character in _NAMED:
        return _NAMED[character]
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


_TABLE = {
    code: _escape(code) for code in (*range(0x00, 0x20), *range(0x7F, 0xA0), *_BIDI, *_SEPARATORS)
}


def visible(text: object) -> str:
    """`text` (str() of it) with every control character escaped visibly: one line, that
    cannot move the cursor, clear or retitle the terminal, or reorder what follows."""
    return str(text).translate(_TABLE)


__all__ = ["visible"]
