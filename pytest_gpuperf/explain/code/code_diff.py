"""Base against head, in a few short lines a kernel developer reads first:
`registers 24 -> 40, occupancy 100% -> 62% (registers)`,
`global loads 3 -> 4 (b32 3 -> 4)`, or that nothing in the code changed.
"""

from __future__ import annotations

from pytest_gpuperf.explain.code.code_facts import CodeFacts
from pytest_gpuperf.explain.code.memory_ops import Widths, total, widths_text
from pytest_gpuperf.runtime.info import occupancy_words

SAME_CODE = "no change in the code (byte-identical machine code)"
SAME_FACTS = (
    "no change in registers, occupancy or memory instructions (the machine code differs "
    "elsewhere: arithmetic, addressing or scheduling)"
)


def code_changes(base: CodeFacts, head: CodeFacts) -> list[str]:
    """What changed from `base` to `head`, one clause group a line; a line that says so when
    nothing did. A fact either side does not know is left out, never shown as a change."""
    if base.fingerprint and base.fingerprint == head.fingerprint:
        return [SAME_CODE]
    lines = []
    resources = [
        _change("registers", base.registers, head.registers),
        _occupancy(base, head),
        _change("local bytes", base.local_bytes, head.local_bytes),
        _change("spilled bytes", base.spill_bytes, head.spill_bytes),
        _change("static shared bytes", base.shared_bytes, head.shared_bytes),
        _change("max threads per block", base.max_threads_per_block, head.max_threads_per_block),
    ]
    said = ", ".join(part for part in resources if part)
    if said:
        lines.append(said)
    for what, old, new in (
        ("global loads", base.global_loads, head.global_loads),
        ("global stores", base.global_stores, head.global_stores),
    ):
        text = _widths_change(what, old, new)
        if text:
            lines.append(text)
    if base.toolchain != head.toolchain:
        lines.append(f"toolchain {base.toolchain} -> {head.toolchain}")
    return lines or [SAME_FACTS]


def _change(what: str, old: int | None, new: int | None) -> str:
    if old is None or new is None or old == new:
        return ""
    return f"{what} {old} -> {new}"


def _occupancy(base: CodeFacts, head: CodeFacts) -> str:
    old, new = base.occupancy, head.occupancy
    if old is None or new is None or round(old, 4) == round(new, 4):
        return ""
    limited = f" (limited by {head.occupancy_limiter})" if head.occupancy_limiter else ""
    block = f" at {head.block_threads} threads a block" if head.block_threads else ""
    return f"occupancy {old:.0%} -> {new:.0%}{block}{limited}"


def _widths_change(what: str, old: Widths | None, new: Widths | None) -> str:
    """'global loads 3 -> 4 (b32 3 -> 4)': the total, then each width that moved."""
    if old is None or new is None or dict(old) == dict(new):
        return ""
    before, after = dict(old), dict(new)
    moved = [
        f"{width} {before.get(width, 0)} -> {after.get(width, 0)}"
        for width in sorted({*before, *after}, key=lambda w: int(w[1:]))
        if before.get(width, 0) != after.get(width, 0)
    ]
    return f"{what} {total(old)} -> {total(new)} ({', '.join(moved)})"


def facts_line(facts: CodeFacts) -> str:
    """'40 registers, 0 local bytes, 0 shared bytes, occupancy 62% at 256 threads (registers);
    global loads b32 x3, stores b32 x1': one side's facts in one line."""
    parts = []
    if facts.registers is not None:
        parts.append(f"{facts.registers} registers")
    if facts.local_bytes:
        spilled = f" ({facts.spill_bytes} spilled)" if facts.spill_bytes else ""
        parts.append(f"{facts.local_bytes} local bytes{spilled}")
    if facts.shared_bytes:
        parts.append(f"{facts.shared_bytes} static shared bytes")
    if facts.occupancy is not None:
        parts.append(
            occupancy_words(
                facts.occupancy, facts.occupancy_limiter, block_threads=facts.block_threads
            )
        )
    text = ", ".join(parts) or "resources unknown"
    if facts.global_loads is not None and facts.global_stores is not None:
        text += f"; global loads {widths_text(facts.global_loads)}, stores " + widths_text(
            facts.global_stores
        )
    return text
