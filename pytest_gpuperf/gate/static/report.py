"""Text for the static gate's results in a pytest session: a failing test's message, the
terminal table, and the Markdown section (job summary, pull-request comment).

Renderers only read `StaticTestResult`s (gate/static/gate.py decides); per-kernel wording is
gate/static/render.py's. A kernel that several tests use appears once in the tables, with the
number of tests and the worst outcome among them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_gpuperf.gate.static.gate import (
    AGAINST_REF,
    CHANGED,
    ERROR,
    FAILED,
    NEW,
    UNCHANGED,
    KernelCheck,
    StaticTestResult,
)
from pytest_gpuperf.gate.static.render import render_failure, render_missing_isa, what_changed
from pytest_gpuperf.record.plural import counted

COMMENT_MARKER = "<!-- pytest-gpuperf-static -->"  # the static job's own comment (docs/ci.md)
_WORST_FIRST = (ERROR, FAILED, CHANGED, NEW, UNCHANGED)


# -- a failing test ------------------------------------------------------------------------


def failure_message(result: StaticTestResult) -> str:
    """The message a test fails with: each failing kernel entry, then how to accept it."""
    blocks = [f"gpuperf static gate: {result.test_id}"]
    accept = False
    for check in result.failing:
        if check.status == ERROR:
            blocks.append(f"{_title(check)}: could not be built for {check.arch}:\n{check.error}")
            continue
        lines: list[str] = []
        comparison = check.comparison
        if comparison is not None and check.rules_failed:
            lines.append(render_failure(comparison))
            lines.append(f"  compared with {_against(check)}")
            accept = True
        if check.missing_isa:
            lines.append(render_missing_isa(check.name, check.arch, check.missing_isa))
        if check.strict_no_base:
            lines.append(
                f"{check.name} ({check.arch}): nothing to compare with: {check.no_base} "
                "(--gpuperf-strict fails a kernel without stored facts or base version)"
            )
            accept = True
        blocks.append("\n".join(lines))
    if accept and result.update_command:
        if any(check.against == AGAINST_REF for check in result.failing):
            blocks.append(
                "if this is intended, say so in the pull request (this run compares with the "
                f"base revision); to store the new facts as well: {result.update_command}"
            )
        else:
            blocks.append(f"if this is intended, record the new facts: {result.update_command}")
    return "\n\n".join(blocks)


def _title(check: KernelCheck) -> str:
    return f"{check.name} ({check.source})"


def _against(check: KernelCheck) -> str:
    if check.against == AGAINST_REF:
        return f"the kernel at {check.against_label}"
    return f"the stored facts in {check.against_label}"


# -- rows: one per kernel entry, however many tests use it -----------------------------------


@dataclass(frozen=True)
class KernelRow:
    """One kernel entry as the tables show it: a representative check (the worst one) and
    the tests that produced the same entry."""

    check: KernelCheck
    tests: tuple[str, ...]
    outcomes: tuple[str, ...]

    @property
    def outcome(self) -> str:
        return min(self.outcomes, key=_WORST_FIRST.index)


def kernel_rows(results: Iterable[StaticTestResult], arch: str) -> list[KernelRow]:
    """The arch's kernel entries, deduplicated by (source, kernel, name, launch shape, code
    before and after), in first-seen order."""
    grouped: dict[tuple[object, ...], list[tuple[str, KernelCheck]]] = {}
    for result in results:
        for check in result.checks:
            if check.arch != arch:
                continue
            facts, before = check.facts, check.before
            key = (
                check.source,
                check.kernel,
                check.name,
                facts.block_threads if facts else None,
                facts.dynamic_lds_bytes if facts else None,
                facts.fingerprint if facts else check.error,
                before.fingerprint if before else None,
                check.missing_isa,
            )
            grouped.setdefault(key, []).append((result.test_id, check))
    rows = []
    for members in grouped.values():
        checks = [check for _, check in members]
        worst = min(checks, key=lambda c: (_WORST_FIRST.index(_outcome(c)), not c.fails))
        rows.append(
            KernelRow(worst, tuple(t for t, _ in members), tuple(_outcome(c) for c in checks))
        )
    return rows


def _outcome(check: KernelCheck) -> str:
    if check.missing_isa or (check.strict_no_base and check.fails):
        return FAILED
    return check.status


def outcome_text(row: KernelRow) -> str:
    check = row.check
    words = {
        UNCHANGED: "code unchanged",
        CHANGED: "changed (within the rules)",
        FAILED: "FAILED",
        NEW: "new",
        ERROR: "ERROR (not built)",
    }
    text = words[row.outcome]
    if row.outcome == NEW:
        text = "no stored facts" if _unrecorded(row) else "new (not at the base)"
    if check.accepted:
        text = "rules broken, accepted by --gpuperf-save"
    if check.missing_isa:
        text += " (ISA)"
    elif check.expect_isa and row.outcome != ERROR:
        text += ", ISA ok"
    if check.saved:
        text += ", saved"
    return text


# -- the terminal --------------------------------------------------------------------------

_COLUMNS = (
    "kernel", "source", "block", "VGPRs", "AGPRs", "SGPRs", "LDS B", "scratch B", "spills",
    "occupancy", "limiter", "tests", "static check",
)  # fmt: skip
_LEFT = {"kernel", "source", "limiter", "static check"}


def terminal_lines(
    results: Sequence[StaticTestResult],
    archs: Sequence[str],
    toolchains: Mapping[str, str],
    *,
    saved_to: Mapping[str, str] | None = None,
    record_command: str = "",
) -> list[str]:
    """Per arch: the toolchain, a table of every kernel's resources and occupancy at its
    launch shape with its outcome, what changed, and one count line. `record_command`
    is how entries without stored facts get some."""
    lines: list[str] = []
    for arch in archs:
        rows = kernel_rows(results, arch)
        toolchain = toolchains.get(arch, "")
        against = _against_line(rows)
        lines.append(f"{arch}: compiled with {toolchain}" + (f"; {against}" if against else ""))
        if not rows:
            lines.append("  no test loaded a kernel through gpu_bench.kernel")
            continue
        lines += _aligned([{c: c for c in _COLUMNS}, *(_cells(row) for row in rows)])
        for row in rows:
            check = row.check
            comparison = check.comparison
            if row.outcome == CHANGED and comparison is not None:
                detail = render_failure(comparison).splitlines()[1:]
                lines += [f"  {check.name}: {text.strip()}" for text in detail]
            if row.outcome == NEW and check.against == AGAINST_REF and check.no_base:
                lines.append(f"  {check.name}: new: {check.no_base}")
            if row.outcome in (FAILED, ERROR):
                more = len(row.tests) - 1
                where = row.tests[0] + (
                    f" and {more} more test{'s' if more > 1 else ''}" if more else ""
                )
                lines.append(f"  {check.name}: {row.outcome} in {where} (see the failures above)")
        unrecorded = [row for row in rows if _unrecorded(row)]
        if unrecorded and not any(row.check.saved for row in unrecorded):
            lines.append(
                f"  {len(unrecorded)} kernel entr{'ies have' if len(unrecorded) != 1 else 'y has'} "
                f"no stored facts yet; record them with: {record_command or '--gpuperf-save'}"
            )
        lines.append(f"  {count_line(rows)}")
        saved = sum(c.saved and c.arch == arch for result in results for c in result.checks)
        if saved and saved_to and arch in saved_to:
            lines.append(f"  saved the static facts of {saved} kernel entries to {saved_to[arch]}")
    return lines


def _unrecorded(row: KernelRow) -> bool:
    """A kernel entry with no stored facts (not one that is new at the base revision)."""
    return row.outcome == NEW and row.check.against != AGAINST_REF


def _aligned(table: Sequence[Mapping[str, str]]) -> list[str]:
    widths = {c: max(len(cells[c]) for cells in table) for c in _COLUMNS}
    return [
        "  ".join(
            cells[c].ljust(widths[c]) if c in _LEFT else cells[c].rjust(widths[c]) for c in _COLUMNS
        ).rstrip()
        for cells in table
    ]


def count_line(rows: Sequence[KernelRow]) -> str:
    counts = {outcome: 0 for outcome in _WORST_FIRST}
    for row in rows:
        counts[row.outcome] += 1
    tests = len({t for row in rows for t in row.tests})
    parts = [f"{counts[o]} {o}" for o in (FAILED, ERROR, CHANGED, NEW, UNCHANGED) if counts[o]]
    entries = counted(len(rows), "kernel entry", "kernel entries")
    return f"{entries} in {counted(tests, 'test')}: " + (", ".join(parts))


def _against_line(rows: Sequence[KernelRow]) -> str:
    labels = sorted({row.check.against_label for row in rows if row.check.against_label})
    return f"compared with {labels[0]}" if labels else ""


def _cells(row: KernelRow) -> dict[str, str]:
    check = row.check
    facts = check.facts
    cells = {c: "" for c in _COLUMNS}
    cells.update(kernel=check.name, source=check.source, tests=str(len(row.tests)))
    cells["static check"] = outcome_text(row)
    if facts is None:
        return cells
    block = str(facts.block_threads) + ("" if check.launched else "*")
    if facts.dynamic_lds_bytes:
        block += f"+{facts.dynamic_lds_bytes}B"
    cells.update(
        block=block,
        VGPRs=str(facts.vgprs),
        AGPRs=str(facts.agprs),
        SGPRs=str(facts.sgprs),
        **{"LDS B": str(facts.lds_bytes), "scratch B": str(facts.scratch_bytes)},
        spills=str(facts.spills),
        occupancy=_occupancy(facts.occupancy, facts.waves_per_simd),
        limiter=facts.occupancy_limiter or "-",
    )
    return cells


def _occupancy(fraction: float | None, waves: int | None) -> str:
    if fraction is None:
        return "-"
    return f"{fraction:.0%} ({waves} w/SIMD)"


# -- Markdown ------------------------------------------------------------------------------


def markdown_section(
    results: Sequence[StaticTestResult],
    archs: Sequence[str],
    toolchains: Mapping[str, str],
    *,
    record_command: str = "",
) -> str:
    """The static gate's Markdown: per arch, one sentence when no kernel's code changed, else
    a table of what changed (failures first), then every kernel's resources in a collapsed
    table, and each failing test's message."""
    out = [COMMENT_MARKER, f"### pytest-gpuperf static gate ({', '.join(archs)})", ""]
    out.append(
        "Kernels compiled offline for the architecture; the SIMULATED device ran the tests' "
        "data flow and nothing was timed, so this says what the compiler did, not how fast "
        "the code is (docs/static-gate.md)."
    )
    for arch in archs:
        rows = kernel_rows(results, arch)
        out += ["", f"#### {arch}", "", f"Compiled with {toolchains.get(arch, 'clang')}.  "]
        against = _against_line(rows)
        if against:
            out.append(f"{against[0].upper()}{against[1:]}.  ")
        out += ["", _headline(rows, arch), ""]
        moved = [row for row in rows if row.outcome != UNCHANGED and not _unrecorded(row)]
        unrecorded = [row for row in rows if _unrecorded(row)]
        if unrecorded:
            out += [
                f"{len(unrecorded)} kernel entr{'ies have' if len(unrecorded) != 1 else 'y has'} "
                f"no stored facts yet (record them with `{record_command or '--gpuperf-save'}`).",
                "",
            ]
        if moved:
            out += _changes_table(moved)
            out.append("")
        if rows:
            out += [
                "<details><summary>Resources and occupancy of every kernel</summary>",
                "",
                *_resources_table(rows),
                "",
                "</details>",
            ]
    failures = [result for result in results if result.failed]
    if failures:
        out += ["", "#### Failures", ""]
        for result in failures:
            out.append(f"- `{_md(result.test_id)}`:")
            text = failure_message(result).splitlines()
            out += ["  ```", *(f"  {line}" for line in text), "  ```"]
    return "\n".join(out) + "\n"


def _headline(rows: Sequence[KernelRow], arch: str) -> str:
    if not rows:
        return "No test loaded a kernel through `gpu_bench.kernel`."
    moved = [row for row in rows if row.outcome != UNCHANGED]
    compare = any(row.check.against == AGAINST_REF for row in rows)
    if not moved:
        if compare:
            return (
                f"**This pull request does not change the {arch} code of any kernel** "
                f"({len(rows)} checked)."
            )
        return (
            f"**No kernel's {arch} code changed against the stored facts** ({len(rows)} checked)."
        )
    return f"**{count_line(rows)}.**"


def _changes_table(rows: Sequence[KernelRow]) -> list[str]:
    lines = [
        "| kernel | source | tests | verdict | occupancy | VGPRs | SGPRs | LDS (B) | scratch (B) "
        "| spills | what changed |",
        "|---|---|--:|---|---|---|---|---|---|---|---|",
    ]
    ordered = sorted(rows, key=lambda row: _WORST_FIRST.index(row.outcome))
    for row in ordered:
        check, after, before = row.check, row.check.facts, row.check.before
        verdict = outcome_text(row)
        if row.outcome in (FAILED, ERROR):
            verdict = f"**{verdict}**"
        if after is None:
            cells = ["-"] * 6 + [_md(check.error.splitlines()[0] if check.error else "")]
        else:
            limiter = (
                (before.occupancy_limiter, after.occupancy_limiter)
                if before and before.occupancy_limiter != after.occupancy_limiter
                else None
            )
            old_occupancy = _percent(before.occupancy) if before else None
            cells = [
                _pair(old_occupancy, _percent(after.occupancy), limiter),
                _pair(before.vgprs if before else None, after.vgprs),
                _pair(before.sgprs if before else None, after.sgprs),
                _pair(before.lds_bytes if before else None, after.lds_bytes),
                _pair(before.scratch_bytes if before else None, after.scratch_bytes),
                _pair(before.spills if before else None, after.spills),
                _md(_what(check)),
            ]
        name = f"`{_md(check.name)}`"
        row_cells = [name, _md(check.source), str(len(row.tests)), verdict, *cells]
        lines.append("| " + " | ".join(row_cells) + " |")
    return lines


def _what(check: KernelCheck) -> str:
    parts = []
    if check.status == NEW:
        parts.append(check.no_base or "nothing to compare with")
    comparison = check.comparison
    if comparison is not None and check.status != UNCHANGED:
        parts.append(what_changed(comparison))
        if check.toolchain_changed:
            parts.append(f"toolchain {comparison.before.toolchain} → {comparison.after.toolchain}")
    if check.missing_isa:
        parts.append("missing ISA: " + ", ".join(f"`{m}`" for m in check.missing_isa))
    return "; ".join(parts)


def _resources_table(rows: Sequence[KernelRow]) -> list[str]:
    lines = [
        "| kernel | source | block | VGPRs | AGPRs | SGPRs | LDS (B) | scratch (B) | spills | "
        "occupancy | limiter | tests | static check |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|---|",
    ]
    for row in rows:
        cells = _cells(row)
        cells["kernel"] = f"`{_md(cells['kernel'])}`"
        lines.append(
            "| " + " | ".join(_md(cells[c]) if c != "kernel" else cells[c] for c in _COLUMNS) + " |"
        )
    return lines


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _pair(before: object, after: object, limiter: tuple[object, object] | None = None) -> str:
    text = str(after) if before is None or before == after else f"{before} → {after}"
    if limiter:
        text += f" ({limiter[0]} → {limiter[1]})"
    return text


def _md(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


__all__ = [
    "COMMENT_MARKER",
    "KernelRow",
    "count_line",
    "failure_message",
    "kernel_rows",
    "markdown_section",
    "outcome_text",
    "terminal_lines",
]


# -- JSON, JUnit and orphans --------------------------------------------------------------------


def junit_properties(result: StaticTestResult) -> list[tuple[str, str]]:
    """Name/value pairs for the JUnit XML: per kernel entry and arch, its status and the
    facts a reviewer reads first (registers, LDS, scratch, spills, occupancy)."""
    properties: list[tuple[str, str]] = []
    for check in result.checks:
        prefix = f"gpuperf.static.{check.arch}.{check.name}"
        properties += [
            (f"{prefix}.status", check.status),
            (f"{prefix}.fails", str(check.fails).lower()),
        ]
        facts = check.facts
        if facts is not None:
            properties += [
                (f"{prefix}.vgprs", str(facts.vgprs)),
                (f"{prefix}.sgprs", str(facts.sgprs)),
                (f"{prefix}.lds_bytes", str(facts.static_lds_bytes + facts.dynamic_lds_bytes)),
                (f"{prefix}.scratch_bytes", str(facts.scratch_bytes)),
                (f"{prefix}.spills", str(facts.vgpr_spills + facts.sgpr_spills)),
            ]
            if facts.occupancy is not None:
                properties.append((f"{prefix}.occupancy", f"{facts.occupancy:.4g}"))
        if check.missing_isa:
            properties.append((f"{prefix}.missing_isa", "; ".join(check.missing_isa)))
        if check.error:
            properties.append((f"{prefix}.error", check.error.splitlines()[0]))
    return properties


def static_json(
    results: Iterable[StaticTestResult],
    archs: Sequence[str],
    toolchains: Mapping[str, str],
    orphans: Sequence[Mapping[str, str]] = (),
) -> dict[str, Any]:
    """The static gate's part of the JSON report (docs/json-schema.md, schema version 3)."""
    from pytest_gpuperf.engine.plain import to_plain

    results = list(results)
    checks = [check for result in results for check in result.checks]
    statuses: dict[str, int] = {}
    for check in checks:
        statuses[check.status] = statuses.get(check.status, 0) + 1
    return {
        "archs": list(archs),
        "compilers": dict(toolchains),
        "summary": {
            "tests": len(results),
            "kernels": len(checks),
            "failed": sum(1 for check in checks if check.fails),
            "statuses": statuses,
        },
        "results": [to_plain(result) for result in results],
        "orphans": [dict(orphan) for orphan in orphans],
    }
