"""What the Triton and CuPy facts (triton_facts.py, cupy_facts.py) share: reading another
library's objects without importing it, where any attribute may raise, and the one line per
kernel either side compiled, head against base."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

Facts = TypeVar("Facts")


def attribute(holder: Any, name: str) -> Any:
    """`holder.name`; None where it has none or reading it fails (a property of a Triton
    object, a CuPy property without a device, or a `__getattr__` of any object in a module's
    globals may raise)."""
    try:
        return getattr(holder, name, None)
    except Exception:  # a foreign object's attribute: unknown, never an error here
        return None


def shown(value: int | None) -> str:
    return "?" if value is None else str(value)


def moved(what: str, before: int | None, after: int | None, unit: str = "") -> str:
    """'registers 32 -> 40', 'shared memory 0 -> 4096 bytes': one fact, base's then head's."""
    return f"{what} {shown(before)} -> {shown(after)}" + (f" {unit}" if unit else "")


def kernel_lines(
    library: str,
    head: Mapping[str, Facts],
    base: Mapping[str, Facts],
    parts: Callable[[Facts, Facts], list[str]],
) -> list[str]:
    """'<library> <kernel>: ' and `parts(head, base)` joined, one line per kernel either side
    compiled, by name; a kernel one side alone compiled says which."""
    lines = []
    for name in sorted({*head, *base}):
        ours, theirs = head.get(name), base.get(name)
        if ours is None or theirs is None:
            side = "base" if ours is None else "head"
            lines.append(f"{library} {name}: compiled on the {side} side only")
            continue
        lines.append(f"{library} {name}: {', '.join(parts(ours, theirs))}")
    return lines


__all__ = ["attribute", "kernel_lines", "moved", "shown"]
