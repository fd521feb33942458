"""The options the scripts share, spelled once: the backend, where a raw run goes (--out),
a saved run printed again instead of measuring (--render), Markdown for the docs."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from lab.devices import BACKENDS
from lab.runs import read_run, write_json


def parser(
    doc: str | None,
    *,
    backend: str | None = "cuda",
    backends: Sequence[str] = BACKENDS,
    out: str | None = "write the run as JSON to this file (raw runs stay out of the repository)",
    render: bool = True,
    markdown: bool = True,
) -> argparse.ArgumentParser:
    """A script's parser, described by its docstring's first paragraph, with the shared
    options it asks for (None or False leaves one out)."""
    made = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    if backend:
        made.add_argument("--backend", default=backend, choices=backends,
                          help=f"where to measure (default {backend}; sim: SIMULATED)")  # fmt: skip
    if out:
        made.add_argument("--out", help=out)
    if render:
        made.add_argument("--render", help="print a run written by --out instead of measuring")
    if markdown:
        made.add_argument("--markdown", action="store_true", help="the tables as Markdown")
    return made


def measured_or_rendered(
    options: argparse.Namespace, measure: Callable[[argparse.Namespace], dict[str, Any]]
) -> dict[str, Any]:
    """The run --render names, or a new one from `measure`, written to --out."""
    if options.render:
        return read_run(options.render)
    document = measure(options)
    write_json(options.out, document)
    return document
