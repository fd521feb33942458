"""The options the scripts share, spelled once: the backend, where a raw run goes (--out),
a saved run printed again instead of measuring (--render), Markdown for the docs; and for a
script of bounded pytest processes, each one's bound and the whole run's deadline."""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
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


MIN_PROCESS_S = 20.0  # no bounded process starts with less of the --deadline left


def bounded_processes(made: argparse.ArgumentParser, budget: float) -> argparse.ArgumentParser:
    """The options of a script whose pytest processes each run under a hard bound: raw
    output (--out), the bound (--timeout), gpuperf_budget (--budget) and the whole run's
    --deadline (time_left reads them; the run starts as the parser is made)."""
    made.add_argument("--out", type=Path, default=None, help="raw output (default: temp)")
    made.add_argument("--timeout", type=float, default=180.0, help="bound of one process, s")
    made.add_argument("--budget", type=float, default=budget, help="gpuperf_budget, s")
    made.add_argument("--deadline", type=float, default=math.inf,
                      help="seconds the whole run may take: no process starts after it, none "
                      "runs past it")  # fmt: skip
    made.set_defaults(started=time.monotonic())
    return made


def time_left(options: argparse.Namespace) -> float | None:
    """The bound of the next process: --timeout, or what is left of --deadline; None when
    less than MIN_PROCESS_S is left (the process is not started)."""
    left_s = options.deadline - (time.monotonic() - options.started)
    return None if left_s < MIN_PROCESS_S else min(options.timeout, left_s)


def scratch_out(options: argparse.Namespace, prefix: str) -> Path:
    """A scratch folder for the run's repositories, kept (the raw output goes in it unless
    --out names another place: options.out resolved), both said on the first line."""
    work = Path(tempfile.mkdtemp(prefix=f"{prefix}-"))
    options.out = (options.out or work / "out").resolve()
    print(f"scratch repositories under {work}; raw output under {options.out}", flush=True)
    return work
