"""How does a document read? Its title, notes, A/B and history tables, as text or
Markdown."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from lab.tables import markdown_table, num, pct, text_table

from .plan import plan_from_json, plan_line

AB_HEADERS = [
    "point", "trials", "regressed", "improved", "inconclusive", "pass", "median head/base",
    "median CI +-", "median drift +-", "median pairs", "median time", "target", "met",
]  # fmt: skip


def ab_table(rows: Sequence[Mapping[str, Any]], with_share: bool = False) -> tuple[list, list]:
    headers = (["code share"] if with_share else []) + AB_HEADERS
    table = []
    for r in rows:
        cells = [
            r["point"], f"{r['trials']}" + (f" (+{r['invalid']} invalid)" if r["invalid"] else ""),
            *(pct(r[state]) for state in ("regressed", "improved", "inconclusive", "pass")),
            num(r["median_ratio"], ".4f"), pct(r["median_ci_half"], 2),
            pct(r.get("median_drift"), 2), num(r["median_pairs"], ".0f"),
            f"{num(r['median_time_us'], '.1f')} us", r["target"] or "-", r["met"] or "-",
        ]  # fmt: skip
        if with_share:
            share = r.get("code_share")
            cells.insert(0, "model's" if share is None else f"{share:.2f}")
        table.append(cells)
    return headers, table


def history_table(rows: Sequence[Mapping[str, Any]]) -> tuple[list, list]:
    detect_keys = [k for k in (rows[0] if rows else {}) if k.startswith("detect_")]
    headers = [
        "baseline", "tolerance", "trials", "false alarms", "unchanged judged improved",
        *(f"detects {k[len('detect_'):]}" for k in detect_keys),
        "median allowance", "median spread (+-95%)",
    ]  # fmt: skip
    table = []
    for r in rows:
        what = "1 save (prior spread)" if r["saves"] == 1 else f"{r['saves']} saves ({r['basis']})"
        table.append([
            what, pct(r["tolerance"], 0), r["trials"], pct(r["false_alarm"]), pct(r["improved"]),
            *(pct(r[k]) for k in detect_keys), pct(r["median_allowance"], 2),
            pct(r["median_spread"], 2),
        ])  # fmt: skip
    return headers, table


def render(document: Mapping[str, Any], markdown: bool) -> str:
    table = markdown_table if markdown else text_table
    lines = [document["title"], ""]
    for note in document.get("notes", ()):
        lines.append(("- " if markdown else "  ") + note)
    if document.get("notes"):
        lines.append("")
    with_share = document["part"] == "library"
    lines += ["A/B in one run (--gpuperf-compare), state of each comparison:", ""]
    lines += [table(*ab_table(document.get("ab", ()), with_share)), ""]
    if document.get("history"):
        what = (
            "long kernel, histories from separate processes"
            if document["part"] == "processes"
            else "long kernel, each save a fresh simulated device"
        )
        lines += [f"Stored baseline ({what}), judged by check_baseline:", ""]
        lines += [table(*history_table(document["history"])), ""]
    elif document.get("history_skipped"):
        lines += [f"Stored baseline: not scored ({document['history_skipped']}).", ""]
    return "\n".join(lines)


def describe(document: dict[str, Any], options: argparse.Namespace) -> None:
    """The title and the notes that say what was run, on what, with which parameters."""
    date = document["started"][:10]
    if document["part"] == "processes":
        processes = len(document["processes"])
        simulated = " (SIMULATED)" if document.get("backend") == "sim" else ""
        document["title"] = (
            f"Gate quality through pytest on {document['device']}{simulated}, {date}: "
            f"{processes} separate processes, {document['wall_s']:.0f} s"
            + ("" if document["complete"] else f" (PARTIAL: {document.get('stopped', '')})")
        )
        plan = document.get("plan", {})
        walls = document.get("process_wall_s", {})
        document["notes"] = [
            f"command: `{document['command']}`",
            f"plan: {plan_line(plan_from_json(plan))}" if plan else "plan: none",
            f"per process: median {num(walls.get('median'), '.1f')} s, max "
            f"{num(walls.get('max'), '.1f')} s, "
            f"first (compiles) {num(walls.get('first'), '.1f')} s",
            "A/A' is a HEAD edit that changes the code object but not the work (GQ_SALT): what "
            "every real A/B comparison times, since identical code is never timed without "
            "--gpuperf-compare-force",
        ]
    else:
        settings = document["model"]["settings"]
        document["title"] = (
            f"Gate quality on the SIMULATED {document.get('device_key', 'mi300x').upper()} "
            f"(library), {date}: {options.trials} trials per "
            f"point, each a fresh simulated device, {document['wall_s']:.0f} s"
        )
        document["notes"] = [
            f"command: `{document['command']}`",
            "model: "
            + ", ".join(
                f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in settings.items()
            )
            + " (the history part's; the A/B grid varies the code share: placement = 1 - "
            "common - code)",
            "slower heads: their own code object, slowed by the simulator's kernel_slowdown "
            "keyed by that fingerprint; A/A' other code of equal speed",
        ]
        if document["model"]["note"]:
            document["notes"].append(document["model"]["note"])
