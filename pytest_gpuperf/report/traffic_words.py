"""An explain pass's counters in words: the lines a failure text, the Markdown summary and
the terminal add from a measurement's plain `explain` object (`traffic`, `bytes_check`,
`flops_check`, as explain/counters/measured.py builds it), so every renderer says the same
thing."""

from __future__ import annotations

from typing import Any


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
    for name in ("bytes_check", "flops_check"):  # the declarations, against the counters
        check = explain.get(name)
        if check:
            lines.append(check["line"])
    return lines


def explain_block(explain: dict[str, Any] | None) -> str:
    """What a failure text ends with: a newline and its lines ("" for none)."""
    return "".join(f"\n  explain: {line}" for line in explain_lines(explain))


__all__ = ["explain_block", "explain_lines"]
