"""The rows a failure's message gets from its explanation's `code` part (explain/code/failure.py
makes it; this only reads the plain data, so reports read back from JSON render the same).

    code:      registers 24 -> 40, occupancy 100% -> 62% at 256 threads a block (limited
               by registers); global loads 3 -> 4 (b32 3 -> 4)
    code from: head against the A/B base main (1a2b3c4d5e6f); resources from ..., memory
               instructions from SASS (nvdisasm 13.5)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_gpuperf.record.verdict import Verdict


def code_rows(verdict: Verdict) -> list[tuple[str, str]]:
    """('code', what changed) and ('code from', against what and where the facts came
    from); no rows for a verdict that was not explained."""
    code = (verdict.explain or {}).get("code")
    if not isinstance(code, Mapping):
        return []
    changes = [str(line) for line in code.get("changes") or ()]
    unavailable = str(code.get("unavailable") or "")
    said = "; ".join(changes)
    if unavailable:
        said = f"{said}; {unavailable}" if said else unavailable
    rows = [("code", said or "no code facts")]
    origin = _origin(code)
    if origin:
        rows.append(("code from", origin))
    return rows


def _origin(code: Mapping[str, Any]) -> str:
    against = str(code.get("against") or "")
    head = code.get("head")
    parts = [f"head against {against}"] if against else []
    if isinstance(head, Mapping):
        sources = head.get("sources") or {}
        if isinstance(sources, Mapping):
            parts += [f"{what} from {where}" for what, where in sources.items()]
        parts += [str(note) for note in head.get("notes") or ()]
    return "; ".join(parts)
