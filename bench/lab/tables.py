"""How a script prints what it measured: tables as plain text or Markdown, sizes and
percentages as the docs write them, and a marked section of a document rewritten in place."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any


def text_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [[cell(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], markdown: bool) -> str:
    """Markdown for the docs, else plain text for the terminal."""
    return (markdown_table if markdown else text_table)(headers, rows)


def cell(value: Any) -> str:
    """A table's cell: "-" for nothing (None, NaN), four digits for a float."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def pct(value: float | None, digits: int = 1, sign: str = "") -> str:
    """A fraction as a percentage ("-" for nothing); sign "+" writes it signed."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{100 * value:{sign}.{digits}f}%"


def num(value: float | None, fmt: str) -> str:
    """A number in format `fmt` ("-" for nothing)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, fmt)


def replace_section(path: Path, marker: str, body: str) -> None:
    """Write `body` between `<!-- marker:begin -->` and `<!-- marker:end -->` in `path`,
    appending the section when the markers are absent."""
    begin, end = f"<!-- {marker}:begin -->", f"<!-- {marker}:end -->"
    block = f"{begin}\n{body.rstrip()}\n{end}\n"
    text = path.read_text() if path.exists() else ""
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1].lstrip("\n")
    else:
        text = text + ("\n" if text and not text.endswith("\n") else "") + block
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def human_bytes(nbytes: float) -> str:
    for unit, scale in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if nbytes >= scale:
            value = nbytes / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{nbytes:.0f} B"


def parse_bytes(text: str) -> int:
    """ "4K", "16M", "2G" or a plain number of bytes."""
    text = text.strip().upper().rstrip("B")
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def finite_median(values: Iterable[float | None]) -> float:
    """The median of the finite values (NaN when there are none)."""
    kept = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.median(kept) if kept else math.nan
