"""One measurement's `explain.traffic` and `explain.bytes_check`, as plain data and lines.

`traffic` holds the profiler, how it treated the caches, what the pass cost, head's and
base's counters and the lines that compare them (or `problem`, the one line that says why
there are none); `bytes_check` holds the check of the declared bytes (None when not asked
for, or nothing was counted). The failure text, the JSON report and the Markdown summary read
the same lines.
"""

from __future__ import annotations

from typing import Any

from pytest_gpuperf.explain.bytes_check import BytesCheck
from pytest_gpuperf.explain.profile import BASE, HEAD, Profiled
from pytest_gpuperf.explain.traffic import traffic_lines

_CACHE_WORDS = {
    "all": "caches flushed before each profiled launch (ncu --cache-control all)",
    "none": "caches warmed by one launch before the profiled one (ncu --cache-control none)",
}


def explanation(
    profiled: Profiled, position: int, *, check_bytes: bool, l2_bytes: int
) -> dict[str, Any]:
    """The `traffic` and `bytes_check` of measurement `position` of the test."""
    traffic: dict[str, Any] = {
        "profiler": profiled.tool,
        "cache_control": _CACHE_WORDS.get(profiled.cache_control, profiled.cache_control),
        "cost_s": round(profiled.cost_s, 2),
        "problem": profiled.problem,
        "head": None,
        "base": None,
        "lines": [profiled.problem] if profiled.problem else [],
    }
    head, base = profiled.of(position, HEAD), profiled.of(position, BASE)
    planned = profiled.planned(position)
    if head is None or planned is None:
        if not profiled.problem:
            traffic["problem"] = "not explained: this measurement launched nothing to profile"
            traffic["lines"] = [traffic["problem"]]
        return {"traffic": traffic, "bytes_check": None}
    traffic["head"], traffic["base"] = head.plain(), None if base is None else base.plain()
    traffic["lines"] = traffic_lines(head, base, l2_bytes=l2_bytes)
    check = None
    if check_bytes and head.dram_read_bytes is not None and head.dram_write_bytes is not None:
        check = BytesCheck(
            declared_bytes=planned.declared_bytes,
            read_bytes=head.dram_read_bytes,
            written_bytes=head.dram_write_bytes,
            l2_bytes=l2_bytes,
            cache=planned.cache,
            uniform_args=planned.uniform_args,
        ).plain()
    return {"traffic": traffic, "bytes_check": check}


def explain_lines(explain: dict[str, Any] | None) -> list[str]:
    """The lines a failure text adds: the traffic's, then the bytes check's (with the cost)."""
    if not explain:
        return []
    lines: list[str] = []
    traffic = explain.get("traffic") or {}
    if traffic.get("lines"):
        cost = traffic.get("cost_s")
        how = f"{traffic.get('profiler')}, one launch each, {cost:.1f} s" if cost else ""
        lines += [f"{line}" for line in traffic["lines"]]
        if how and not traffic.get("problem"):
            lines[-1] += f" [{how}]"
    check = explain.get("bytes_check")
    if check:
        lines.append(check["line"])
    return lines


def explain_block(explain: dict[str, Any] | None) -> str:
    """What a failure text ends with: a newline and its lines ("" for none)."""
    return "".join(f"\n  explain: {line}" for line in explain_lines(explain))


__all__ = ["explain_block", "explain_lines", "explanation"]
