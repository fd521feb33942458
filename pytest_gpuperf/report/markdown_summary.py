"""The Markdown summary: for the CI job summary and the pull-request comment."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pytest_gpuperf.errors import stop_words
from pytest_gpuperf.record.meta import ReportMeta
from pytest_gpuperf.record.verdict import FAIL, MARGINAL, Row
from pytest_gpuperf.report.ab_words import compared_lines
from pytest_gpuperf.report.cells import COLUMNS, HEADERS, LEFT_ALIGNED, cells
from pytest_gpuperf.report.devices import device_lines, gpu_lines
from pytest_gpuperf.report.failure import failure_text
from pytest_gpuperf.report.text import SIMULATED_BANNER, row_labels, run_notes, summary_line
from pytest_gpuperf.report.traffic_words import explain_block
from pytest_gpuperf.report.visible import visible

# Marks the comment the CI recipe updates in place on every push (docs/ci.md).
COMMENT_MARKER = "<!-- pytest-gpuperf -->"


def markdown(
    rows: Sequence[Row],
    meta: ReportMeta | None = None,
    *,
    update_command: Callable[..., str] | None = None,
) -> str:
    """A GitHub-flavoured summary: device, counts, the table, the notes once each, then every
    failure and marginal result with its full message."""
    out = [COMMENT_MARKER, "### pytest-gpuperf", ""]
    # One `Device:` line (the models measured on), then a line per GPU used
    lines = device_lines(rows, meta)
    gpus = set(gpu_lines(rows, meta))
    models = [line for line in lines if line not in gpus and line != SIMULATED_BANNER]
    if models:
        out.append(f"Device: {md_escape('; '.join(models))}  ")
    for line in lines:
        if line in gpus:
            out.append(f"{md_escape(line)}  ")
        elif line == SIMULATED_BANNER:
            out.append(f"> **{line}**")
    if meta is not None and meta.compare_ref:
        out.append(f"A/B against `{meta.compare_ref}` ({meta.compare_commit[:12]})  ")
    out += ["", f"**{summary_line(rows)}**", ""]
    if rows:
        table = [cells(row) for row in rows]
        columns = [c for c in COLUMNS if any(cell[c] != "—" for cell in table) or c == "verdict"]
        columns = ["test", *columns]
        out.append("| " + " | ".join(HEADERS.get(c, c) for c in columns) + " |")
        out.append("|" + "|".join("---" if c in LEFT_ALIGNED else "--:" for c in columns) + "|")
        for row, cell, label in zip(rows, table, row_labels(rows), strict=True):
            values: Mapping[str, str] = {**cell, "test": f"`{md_escape(label)}`"}
            shown = [md_escape(values[c]) if c != "test" else values[c] for c in columns]
            if row.verdict.status == FAIL:
                shown[columns.index("verdict")] = f"**{shown[columns.index('verdict')]}**"
            out.append("| " + " | ".join(shown) + " |")
    notes = run_notes(rows, row_labels(rows), update_command=update_command)
    if notes:
        out += ["", "#### Notes", ""]
        out += [f"- {md_escape(note.text)}" for note in notes]
    compared = compared_lines(rows)
    if compared:  # a callable's A/B: the files compared with REF, folded (one line a test)
        out += ["", "<details><summary>Files compared with the base revision</summary>", ""]
        out += [f"- {md_escape(line)}" for line in compared]
        out += ["", "</details>"]
    if meta is not None and meta.accept_warnings:
        out += ["", "#### Warnings", ""]
        out += [f"- {md_escape(line)}" for line in meta.accept_warnings]
    if meta is not None and (meta.problems or meta.interrupted):
        out += ["", "#### Errors", ""]
        if meta.interrupted:
            out.append(
                f"- interrupted ({stop_words()}): the rows above are what was measured before"
            )
        out += [f"- {md_escape(problem)}" for problem in meta.problems]
    for status, title in ((FAIL, "Failures"), (MARGINAL, "Marginal")):
        listed = [row for row in rows if row.verdict.status == status]
        if listed:
            out += ["", f"#### {title}", ""]
            for row in listed:
                out.append(f"- `{md_escape(row.test_id)}` ({md_escape(row.measurement.name)}):")
                text = failure_text(row.measurement, row.verdict, test_id=row.test_id)
                text += explain_block(row.verdict.explain)
                # the failure and explain lines hold text from files and compilers (ids, a
                # compiler's error): escaped, so no raw ESC or bidi override lands in the page
                out += ["  ```", *(f"  {visible(line)}" for line in text.splitlines()), "  ```"]
    return "\n".join(out) + "\n"


def md_escape(text: str) -> str:
    """Table-safe text: pipes escaped, newlines (ids may hold them) turned into spaces, every
    other control character escaped visibly (report/visible.py)."""
    flat = text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")
    return visible(flat)


def append_github_step_summary(
    markdown_text: str, env: Mapping[str, str] = os.environ
) -> Path | None:
    """Append to the file GitHub Actions names in $GITHUB_STEP_SUMMARY; None when unset. A
    path that is not a regular file (a FIFO, a device) is refused, never waited on
    (files.append_report)."""
    from pytest_gpuperf.record.files import append_report

    target = env.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    text = markdown_text if markdown_text.endswith("\n") else markdown_text + "\n"
    return append_report(target, text)
