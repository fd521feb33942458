"""Helpers shared by the benchmark scripts (not part of the plugin; not a test).

The scripts measure the plugin itself: `fidelity.py` (how close each timing method gets to
the truth, and how repeatable it is), `sweep.py` (bandwidth against size) and `gate_quality.py`
(false alarms and missed regressions of the gate, through pytest itself; its parts in gq/),
`ab_rounds.py` (how often an A/B round's interval predicts its confirming round),
`vs_pytest_benchmark.py` (one kernel timed by pytest-benchmark and by gpu_bench).
They run children as separate processes, because run-to-run noise only shows up between
processes, and print plain-text and Markdown tables. Nothing here decides anything the gate
decides: scripts call the gate's own functions (pytest_gpuperf.gate).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
KERNELS_DIR = REPO_ROOT / "kernels"


def run_child(
    args: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None
) -> list[dict]:
    """Run this interpreter on `args` (with `env` added to the environment); the child
    prints one JSON object per line.

    A child that fails or runs out of time contributes what it printed so far, and its
    error is reported rather than ending the benchmark.
    """
    env = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
    try:
        done = subprocess.run(
            [sys.executable, *args],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
            cwd=REPO_ROOT,
        )
        stdout, problem = done.stdout, done.stderr if done.returncode else ""
    except subprocess.TimeoutExpired as expired:
        out = expired.stdout or b""
        stdout = out.decode() if isinstance(out, bytes) else out
        problem = f"timed out after {timeout_s:.0f} s"
    if problem:
        print(f"child {' '.join(args[:3])}...: {problem.strip()[-2000:]}", file=sys.stderr)
    rows = []
    for line in stdout.splitlines():
        if line.startswith("{"):
            rows.append(json.loads(line))
    return rows


def emit(row: dict) -> None:
    """A child's result line (the parent reads lines that start with "{")."""
    print(json.dumps(row), flush=True)


def text_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def replace_section(path: Path, marker: str, body: str) -> None:
    """Write `body` between `<!-- marker:begin -->` and `<!-- marker:end -->` in `path`,
    appending the section when the markers are absent."""
    begin, end = f"<!-- {marker}:begin -->", f"<!-- {marker}:end -->"
    block = f"{begin}\n{body.rstrip()}\n{end}\n"
    text = path.read_text() if path.exists() else ""
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1].lstrip("\n")
    else:
        text = text + ("\n" if text and not text.endswith("\n") else "") + block
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def read_run(path: str | Path) -> dict[str, Any]:
    """A run a bench script wrote with --out, read back for --render, --replay, --from-json,
    --compare, --merge or --plan-from. A file that is missing or is not a run ends the script
    with one line naming it, never a traceback. Raw runs are kept out of the repository
    (docs/benchmarks.md, "Raw runs"), so a path copied from the docs may well be missing."""
    target = Path(path)
    try:
        text = target.read_text()
    except OSError as error:
        raise SystemExit(
            f"{target}: cannot read the run ({error.strerror or error}); raw runs are release "
            "assets and CI artifacts (docs/benchmarks.md, 'Raw runs')"
        ) from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise SystemExit(f"{target}: not a run's JSON (line {error.lineno}: {error.msg})") from None
    if not isinstance(document, dict):
        raise SystemExit(f"{target}: not a run's JSON (a {type(document).__name__}, not an object)")
    return document


def write_json(path: str | None, data: Any) -> None:
    """Write `data` as JSON, atomically (a reader, or a run cut off by a timeout, never sees
    half a file)."""
    if path:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.partial")
        partial.write_text(json.dumps(data, indent=2) + "\n")
        os.replace(partial, target)


def human_bytes(nbytes: float) -> str:
    for unit, scale in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if nbytes >= scale:
            value = nbytes / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{nbytes:.0f} B"


def parse_bytes(text: str) -> int:
    """ "4K", "16M", "2G" or a plain number of bytes."""
    text = text.strip().upper().rstrip("B")
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        return f"{value:.4g}"
    return str(value)


def finite_median(values: Iterable[float | None]) -> float:
    """The median of the finite values (NaN when there are none)."""
    kept = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.median(kept) if kept else math.nan
