"""Text for the static gate's results: a test's failure message and a Markdown summary.

Renderers only read `StaticComparison`s (gate/static/compare.py decides); nothing here decides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pytest_gpuperf.gate.static.compare import StaticChange, StaticComparison, StaticStatus

_RULE_WORDS = {
    "occupancy-drop": "occupancy dropped",
    "scratch-appeared": "new scratch",
    "vgpr-spill-appeared": "new VGPR spills",
    "sgpr-spill-appeared": "new SGPR spills",
    "vgpr-growth": "VGPR growth beyond the margin",
    "lds-growth": "LDS growth beyond the margin",
}
_LABELS = {
    "vgprs": "VGPRs",
    "arch_vgprs": "arch VGPRs",
    "agprs": "AGPRs",
    "sgprs": "SGPRs",
    "lds_bytes": "LDS (B per workgroup)",
    "scratch_bytes": "scratch (B per work-item)",
    "vgpr_spills": "VGPR spills",
    "sgpr_spills": "SGPR spills",
    "calls": "calls",
    "block_threads": "threads per block",
    "dynamic_lds_bytes": "dynamic LDS (B)",
}
# Shown through the occupancy line or the code line rather than on their own.
_FOLDED = {"occupancy", "waves_per_simd", "occupancy_limiter", "fingerprint"}


def render_failure(result: StaticComparison, update_hint: str = "") -> str:
    """The message of a failed (or changed) static check: what moved, before -> after,
    which rule it breaks and which occupancy limiter moved; `update_hint` says how to
    accept the change (the plugin's command)."""
    facts = result.after
    verdict = {
        StaticStatus.FAILED: "static check failed",
        StaticStatus.CHANGED: "code changed within the static rules",
        StaticStatus.UNCHANGED: "machine code unchanged",
    }[result.status]
    lines = [f"{result.kernel} ({result.arch}, {facts.block_threads} threads per block): {verdict}"]
    occupancy = _occupancy_line(result)
    if occupancy:
        lines.append(f"  {occupancy}")
    shown = _shown_changes(result)
    lines += [f"  {_change_line(change, result)}" for change in shown]
    if result.code_changed and not shown:
        lines.append("  machine code changed; resources and occupancy are the same")
    if result.toolchain_changed:
        lines.append(
            f"  note: the toolchain changed ({result.before.toolchain} -> "
            f"{result.after.toolchain}); the difference may come from the compiler"
        )
    if result.failed and update_hint:
        lines.append(f"  if this is intended: {update_hint}")
    return "\n".join(lines)


def _shown_changes(result: StaticComparison) -> list[StaticChange]:
    """The changes listed one per line: occupancy and code have their own line, and the
    arch-VGPR/AGPR split only matters for a kernel that uses AGPRs."""
    uses_agprs = result.before.agprs or result.after.agprs
    return [
        change
        for change in result.changes
        if change.quantity not in _FOLDED
        and (uses_agprs or change.quantity not in ("arch_vgprs", "agprs"))
    ]


def _occupancy_line(result: StaticComparison) -> str:
    before, after = result.before, result.after
    if after.occupancy is None or before.occupancy is None:
        return ""
    moved = result.change("occupancy") or result.change("waves_per_simd")
    limiter = result.limiter_moved
    if moved is None and limiter is None:
        return ""
    text = (
        f"occupancy {before.occupancy:.0%} -> {after.occupancy:.0%} "
        f"({before.waves_per_simd} -> {after.waves_per_simd} waves per SIMD)"
    )
    if limiter:
        text += f", limited by {limiter[1]} (was {limiter[0]})"
    else:
        text += f", limited by {after.occupancy_limiter}"
    if moved is not None and moved.fails:
        text += f": {_RULE_WORDS[moved.rule or '']}"
    return text


def _change_line(change: StaticChange, result: StaticComparison) -> str:
    label = _LABELS.get(change.quantity, change.quantity)
    text = f"{label} {_show(change.before)} -> {_show(change.after)}"
    if change.relative is not None:
        text += f" ({change.relative:+.0%})"
    if change.fails:
        text += f": {_RULE_WORDS.get(change.rule or '', change.rule)}"
        margin = _margin_text(change, result)
        if margin:
            text += f" ({margin})"
    return text


def _margin_text(change: StaticChange, result: StaticComparison) -> str:
    margins = result.margins
    if change.rule == "vgpr-growth":
        return f"margin +{margins.vgpr_growth:.0%} of allocated VGPRs"
    if change.rule == "lds-growth":
        return f"margin +{margins.lds_growth:.0%} and > {margins.lds_min_growth_bytes} B"
    return ""


def _show(value: object) -> str:
    if value is None:
        return "-"
    if value == "":
        return "none"
    return str(value)


def render_markdown(
    results: Sequence[StaticComparison] | Mapping[str, StaticComparison], arch: str = "gfx942"
) -> str:
    """A Markdown summary of many kernels: one row per kernel whose code changed (named by
    the mapping's keys, e.g. test ids, else by kernel name), failures first, then a count of
    the unchanged ones; one sentence when nothing changed."""
    named = (
        list(results.items()) if isinstance(results, Mapping) else [(r.kernel, r) for r in results]
    )
    changed = [(n, r) for n, r in named if r.status is not StaticStatus.UNCHANGED]
    unchanged = len(named) - len(changed)
    heading = f"### Static check ({arch})\n\n"
    if not changed:
        return (
            f"{heading}This pull request does not change the {arch} code of any kernel "
            f"({len(named)} checked).\n"
        )
    failed = sum(r.failed for _, r in changed)
    rows = [
        f"{heading}{failed} failed, {len(changed) - failed} changed within the rules, "
        f"{unchanged} unchanged.\n",
        "| kernel | verdict | occupancy | VGPRs | SGPRs | LDS (B) | scratch (B) | spills | "
        "what changed |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, result in sorted(changed, key=lambda item: (not item[1].failed, item[0])):
        before, after = result.before, result.after
        cells = [
            f"`{name}`",
            "**failed**" if result.failed else "changed",
            _pair(_percent(before.occupancy), _percent(after.occupancy), result.limiter_moved),
            _pair(before.vgprs, after.vgprs),
            _pair(before.sgprs, after.sgprs),
            _pair(before.lds_bytes, after.lds_bytes),
            _pair(before.scratch_bytes, after.scratch_bytes),
            _pair(before.spills, after.spills),
            what_changed(result),
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _pair(before: object, after: object, limiter: tuple | None = None) -> str:
    text = str(after) if before == after else f"{before} → {after}"
    if limiter:
        text += f" ({limiter[0]} → {limiter[1]})"
    return text


def what_changed(result: StaticComparison) -> str:
    """A table cell: the broken rules, else the quantities that moved, else "instructions
    only"."""
    if result.failures:
        return ", ".join(dict.fromkeys(_RULE_WORDS[c.rule or ""] for c in result.failures))
    shown = [
        _LABELS.get(c.quantity, c.quantity) for c in result.changes if c.quantity not in _FOLDED
    ]
    return ", ".join(shown) if shown else "instructions only"


def render_missing_isa(kernel: str, arch: str, missing: Sequence[str]) -> str:
    """The failure text for `check_isa`'s result: the expectations the kernel lacks."""
    listed = ", ".join(repr(m) for m in missing)
    return (
        f"{kernel} ({arch}): not in the kernel's own instructions: {listed}. Read its "
        "assembly (clang -S, or the static gate's build) to see what the compiler emitted."
    )
