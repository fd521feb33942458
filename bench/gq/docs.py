"""Where do a run's tables go? In docs/benchmarks.md: one subsection per part (GPU processes,
simulated library) inside the ab-gate-quality section."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lab.tables import replace_section

from .render import render

DOCS_MARKER = "ab-gate-quality"

DOCS_INTRO = """\
## Gate quality: A/B in one run and learned-history baselines

`bench/gate_quality.py` measures the false alarms and detections of the two gates that learn
their noise: the A/B comparison in one run (`--gpuperf-compare`) and stored baselines with a
history of saves (`--gpuperf-save`), each decision made by the gate's own functions. The
processes part runs separate `pytest` processes in a throwaway git project whose HEAD really
reads more bytes (`vector_add_more`, kernels/bench_variants.hip); the library part runs
thousands of fresh simulated MI300X devices. The script's docstring says what each point is.
"""


def update_docs(document: Mapping[str, Any], docs: Path) -> None:
    """Write the run's Markdown into `docs` (docs/benchmarks.md): one subsection per part (GPU
    processes, simulated library), inside the ab-gate-quality section."""
    if document["part"] == "processes" and document.get("backend") == "sim":
        raise SystemExit(
            "--update-docs: the processes part on the simulated device is a smoke test"
        )
    text = docs.read_text() if docs.exists() else ""
    inner = {"cuda": f"{DOCS_MARKER}-gpu", "sim": f"{DOCS_MARKER}-sim"}
    if f"<!-- {DOCS_MARKER}:begin -->" not in text:
        skeleton = DOCS_INTRO + "".join(
            f"\n<!-- {marker}:begin -->\n(not run yet)\n<!-- {marker}:end -->\n"
            for marker in inner.values()
        )
        replace_section(docs, DOCS_MARKER, skeleton)
    key = "sim" if document["part"] == "library" else "cuda"
    body = "### " + render(document, markdown=True)
    replace_section(docs, inner[key], body)
