"""The table printed at the end of a session.

Test ids are never cut: when a row would be wider than the terminal (80 columns in most CI
logs), each test id gets a line of its own and its measurements follow, indented; columns are
dropped, least useful first, until the rows fit. Each distinct note is printed once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from pytest_gpuperf.record.meta import ReportMeta
from pytest_gpuperf.record.verdict import FAIL, Row
from pytest_gpuperf.report.cells import COLUMNS, HEADERS, LEFT_ALIGNED, cells
from pytest_gpuperf.report.devices import device_lines
from pytest_gpuperf.report.text import SIMULATED_BANNER, row_labels, run_notes, summary_line
from pytest_gpuperf.report.visible import visible

TABLE_WIDTH = 160
# Columns in the order they are dropped when a row does not fit (first dropped first).
DROP_ORDER = (
    "kernel",
    "occ",
    "GB/s",
    "mode",
    "time ± CI",
    "allow",
    "delta",
    "floor",
    "TFLOP/s",
)
# Short headers for the grouped layout of narrow terminals (legend under the table).
SHORT_HEADERS = {
    "eff": "eff",
    "base": "base",
    "allow": "allow",
    "occ": "occ",
    "name": "measurement",
    "roof": "roof",
}


def terminal_table(
    rows: Sequence[Row],
    meta: ReportMeta | None = None,
    *,
    width: int = TABLE_WIDTH,
    update_command: Callable[..., str] | None = None,
) -> str:
    """The end-of-session table, at most `width` columns wide apart from long test ids, which
    get their own line rather than being cut."""
    lines = [
        line if line == SIMULATED_BANNER else f"gpuperf device: {line}"
        for line in device_lines(rows, meta)
    ]
    if not rows:
        return "\n".join(visible(line) for line in [*lines, "gpuperf: no measurements"])
    table = [cells(row) for row in rows]
    columns = [c for c in COLUMNS if any(cell[c] != "—" for cell in table) or c == "verdict"]
    labels = row_labels(rows)
    flat = _layout(
        ["test", *columns],
        [{**cell, "test": label} for cell, label in zip(table, labels, strict=True)],
    )
    if _width(flat) <= width:
        lines += flat
    else:
        lines += _grouped(rows, table, columns, width)
    for note in run_notes(rows, labels, update_command=update_command):
        about = _about(note.labels, len(rows))
        line = f"note: {note.text}{about}"
        if len(line) > NOTE_WIDTH and about.startswith(" (") and ";" in about:
            # the rows it is about, each on a line of its own (test ids are never cut)
            lines.append(f"note: {note.text}:")
            lines += [f"  {label}" for label in note.labels]
        else:
            lines.append(line)
    lines.append(summary_line(rows))
    # each line is one line: a test id or a board read from a file cannot break out of it
    return "\n".join(visible(line) for line in lines)


NOTE_WIDTH = 120  # a note longer than this lists the rows it is about below it


def _about(labels: Sequence[str], total: int) -> str:
    if not labels or len(labels) == total:
        return "" if not labels else " (all measurements)"
    if len(labels) <= 3:
        return " (" + "; ".join(labels) + ")"
    return f" ({len(labels)} measurements)"


def _grouped(
    rows: Sequence[Row], table: list[dict[str, str]], columns: list[str], width: int
) -> list[str]:
    """Each test id on a line of its own, its measurements below it, indented."""
    shown = ["name", *columns]
    body = [{**cell, "name": row.measurement.name} for row, cell in zip(rows, table, strict=True)]
    for column in DROP_ORDER:
        if _width(_layout(shown, body, SHORT_HEADERS)) + 4 <= width:
            break
        if column in shown:
            shown.remove(column)
    laid = _layout(shown, body, SHORT_HEADERS)
    header, rule, rendered = laid[0], laid[1], laid[2:]
    out = ["    " + header, "    " + rule]
    failed = {row.test_id for row in rows if row.verdict.status == FAIL}
    previous = None
    for row, line in zip(rows, rendered, strict=True):
        if row.test_id != previous:
            marker = "!" if row.test_id in failed else " "
            out.append(f"{marker} {row.test_id}")
            previous = row.test_id
        out.append("    " + line)
    return out


def _layout(
    columns: list[str], table: Sequence[Mapping[str, str]], headers: Mapping[str, str] = HEADERS
) -> list[str]:
    widths = {c: max(len(headers.get(c, c)), *(len(cell[c]) for cell in table)) for c in columns}

    def line(values: Mapping[str, str]) -> str:
        return "  ".join(
            values[c].ljust(widths[c]) if c in LEFT_ALIGNED else values[c].rjust(widths[c])
            for c in columns
        ).rstrip()

    header = line({c: headers.get(c, c) for c in columns})
    return [header, "-" * len(header), *(line(cell) for cell in table)]


def _width(lines: Sequence[str]) -> int:
    return max(len(line) for line in lines)
