"""What do several processes parts of one plan (run in separate device calls) say together?
One document, scored again as one run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .ab import score_ab
from .history import score_history
from .records import record_from_json, wall_summary


def merge(documents: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One document from the processes parts of one plan (run in separate device calls):
    their processes re-numbered in order, scored again as one run. Parts of different plans
    are refused: their slower heads read different extra bytes."""
    if not documents:
        raise ValueError("nothing to merge")
    if any(d.get("part") != "processes" for d in documents):
        raise ValueError("--merge joins processes parts (GPU runs), not the library part")
    plans = [d.get("plan", {}) for d in documents]
    if any(p.get("permille") != plans[0].get("permille") for p in plans):
        raise ValueError(
            "the parts have different plans (extra bytes per point): run the later parts with "
            "--plan-from the first part's file"
        )
    first = documents[0]
    records = []
    for document in documents:
        for process in document.get("processes", ()):
            records.append(record_from_json(len(records), process))
    spread = 0.07 if first.get("backend") == "sim" else None
    rows, _, skipped = score_history(records, 200, 0, spread)
    complete = all(d.get("complete") for d in documents)
    merged = {
        **{k: v for k, v in first.items() if k not in ("processes", "title", "notes")},
        "title": "",
        "complete": complete,
        "stopped": "; ".join(d.get("stopped", "") for d in documents if d.get("stopped")),
        "parts": [
            {"command": d.get("command"), "started": d.get("started"), "wall_s": d.get("wall_s")}
            for d in documents
        ],
        "processes": [r.to_json() for r in records],
        "ab": score_ab(records),
        "history": rows,
        "history_skipped": skipped,
        "wall_s": sum(d.get("wall_s") or 0.0 for d in documents),
        "process_wall_s": wall_summary(records),
    }
    merged["command"] = " ; ".join(str(d.get("command", "")) for d in documents)
    return merged
