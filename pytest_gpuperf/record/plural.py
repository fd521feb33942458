"""Counted nouns: "1 test", "2 tests", "1 entry", "3 entries". One function, so that no line
of the plugin or its commands says "1 tests" or "1 saves". Here, below the gate, so that the
static gate's report (gate/static/) and every renderer above it count alike."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """'1 test', '2 tests'; `plural` for a noun that does not take an s ('entries')."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


__all__ = ["counted"]
