"""How often the gate cries wolf, and how often it catches a real regression: the A/B
comparison in one run (--gpuperf-compare) and stored baselines that learn their spread from a
history of saves (--gpuperf-save). Every decision is the gate's own (pytest_gpuperf.gate).

Two parts:

processes (`--backend cuda` on the GPU; `--backend sim --quick`, the same path on the simulated
device, as its smoke test). A throwaway git project in a temporary directory: one kernel file
per point, all the same vector add at the BASE commit (`vector_add_more`,
kernels/bench_variants.hip), then uncommitted HEAD edits, at each of three sizes S (long, mid,
short):

  S_same               unchanged: the A/A control (timed through --gpuperf-compare-force; each
                       side loaded separately, 8 times)
  S_equiv              another code object doing the same work (GQ_SALT): A/A'
  S_slow1, S_slow2     HEAD reads more bytes (EXTRA_PERMILLE): +1% and +2% kernel time
  long_slow3           +3% at the long size (the stored-baseline history's detection point)

"long" is the reference 32M fp32 elements (~145 us cold on an H100), "mid" 6M (~30 us), "short" 1M
elements (12 MiB, ~8 us cold on an H100; docs/hip-on-cuda.md: cold and rotate agree there, so
cold mode is right). The extra bytes per point are calibrated first, in one process, by the
library's A/B pair (a time slowdown is what the gate judges, and reading x% more bytes costs a
scalar vector add less than x% of time: 10% more bytes cost 6.4% on the H100); the tables
report the head/base ratio each point really caused. A later part can reuse a first part's
plan (--plan-from), and --merge joins the parts' files into one document. Then N separate
`python -m pytest` processes run in the project, each `--gpuperf --gpuperf-compare=HEAD
--gpuperf-compare-force --gpuperf-json=...`, tests in a random order per process; every
kernel's output is checked against NumPy (a wrong result leaves the measurement unjudged and
uncounted). Scored:

- A/B: per point, the share of comparisons whose state is regressed (a false alarm for
  A/A and A/A', a detection for the slower heads), improved, inconclusive and pass, with the
  median head/base ratio and the median half-width of its interval;
- stored baseline: histories of K saves (K = 1, 3, 5) of long_same's head measurements from
  other processes than the one judged, built by the gate's own saving code (plan_save ->
  entry_from_history, as --gpuperf-save builds them), judged by check_baseline at the default
  tolerance and at 0: long_same judged regressed is a false alarm, long_slow3 judged regressed
  a detection. K = 1 is the single save with the prior spread (the old way).

library (`--backend sim`): the simulated MI300X (run_spread=0.07) through the library, each
trial a fresh simulated device with a fresh seed, >= 500 trials per point, in a process pool:
A/B (Device.compare with the gate's stopping rule, judged by gate.ab.check_comparison) of
identical code (A/A), of other code doing the same work (A/A') and of a head 3% or 5% slower
(its own code object, slowed through the simulator's fingerprint-keyed kernel_slowdown), over
a grid of the run-to-run variance's share that is particular to a code object (the model's
placement and common shares are passed through when the simulator accepts them); and the
history path (K saves from K fresh devices, a further device judged unchanged and 3, 5, 10,
20% slower). Numbers from this part are the model's, not a device's.

Usage (from the repository root; nothing needs installing):
  PYTHONPATH=. python3 bench/gate_quality.py --backend cuda --processes 16 --deadline 530 \
      --seed 1 --out gq1.json                                    # one part, < 9.5 minutes
  PYTHONPATH=. python3 bench/gate_quality.py --backend cuda --processes 16 --deadline 530 \
      --seed 2 --plan-from gq1.json --out gq2.json               # another, the same plan
  PYTHONPATH=. python3 bench/gate_quality.py --merge gq1.json gq2.json gq3.json --out gq.json
  PYTHONPATH=. python3 bench/gate_quality.py --backend sim --quick          # smoke test, here
  PYTHONPATH=. python3 bench/gate_quality.py --backend sim --update-docs    # the library part
  PYTHONPATH=. python3 bench/gate_quality.py --render gq.json --update-docs  # a GPU run's file
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # lab and gq, run from anywhere

from gq import docs
from gq.calibrate import calibrate_child
from gq.library import CODE_SHARES, library_part, sim_device_key
from gq.merge import merge
from gq.points import LONG_ELEMENTS, MID_ELEMENTS, SHORT_ELEMENTS
from gq.processes import Stopped, processes_part
from gq.render import describe, render
from lab import REPO_ROOT
from lab.runs import read_run, write_json

DOCS = REPO_ROOT / "docs" / "benchmarks.md"


def update_docs(document: Mapping[str, Any]) -> None:
    """Write the run's Markdown into DOCS (docs/benchmarks.md)."""
    docs.update_docs(document, DOCS)


def _on_signal(signum: int, _frame: Any) -> None:
    raise Stopped(signal.Signals(signum).name)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The options, grouped in --help by the part they steer."""
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    processes = parser.add_argument_group("the processes part").add_argument
    library = parser.add_argument_group("the library part").add_argument
    # fmt: off
    add("--backend", default="sim", choices=["sim", "cuda", "hip"],
        help="cuda/hip: the processes part on that GPU; sim: the library part (sim)")
    add("--quick", action="store_true", help="the processes part, small (with --backend sim: "
        "the smoke test of the GPU run: 8 processes, 4M and 256K elements)")
    add("--budget", type=float, default=1.0, help="--gpuperf-budget per measurement, s (1.0)")
    add("--long-elements", type=int, help=f"the long kernel's fp32 elements ({LONG_ELEMENTS})")
    add("--short-elements", type=int, help=f"the short kernel's fp32 elements ({SHORT_ELEMENTS})")
    add("--seed", type=int, default=20260101, help="seeds every draw of the script (20260101)")
    add("--keep", action="store_true", help="keep the temporary project")
    add("--out", help="write every trial and the scores as JSON (after every process)")
    add("--markdown", action="store_true", help="print the Markdown tables too")
    add("--update-docs", action="store_true", help="write the tables into docs/benchmarks.md")
    add("--render", metavar="JSON", help="print (and with --update-docs, write) the tables of a "
        "saved --out file instead of running, e.g. one the GPU machine wrote")
    add("--child", choices=["calibrate"], help=argparse.SUPPRESS)
    add("child_args", nargs="?", help=argparse.SUPPRESS)
    processes("--processes", type=int, help="pytest processes (cuda: 50)")
    processes("--deadline", type=float, help="start no process that would end past this many "
              "seconds from the start (cuda: 520, to fit `timeout 560`; 0: none)")
    processes("--process-timeout", type=float, default=150.0, help="per pytest process, s (150)")
    processes("--mid-elements", type=int,
              help=f"the mid kernel's fp32 elements ({MID_ELEMENTS}; 0: no mid size)")
    processes("--plan-from", metavar="JSON", help="take the plan (sizes, extra bytes per point) "
              "of an earlier part's --out file instead of calibrating, so the parts can be merged")
    processes("--merge", nargs="+", metavar="JSON", help="join the processes of several --out "
              "files of the same plan into one document (written to --out, printed, and with "
              "--update-docs written into the docs)")
    processes("--no-calibrate", dest="calibrate", action="store_false",
              help="x%% more bytes for an x%% slowdown instead of the measured time slope")
    processes("--history-trials", type=int, default=200, help="history trials (200)")
    library("--trials", type=int, help="trials per point (500)")
    library("--workers", type=int, default=os.cpu_count() or 1,
            help="processes in the pool (the CPU count; 1: no pool)")
    library("--run-spread", type=float, default=0.07,
            help="open_sim's run_spread, +-95%% (0.07, the seed's MI300X figure)")
    library("--common-fraction", type=float, help="open_sim's (default: its own)")
    library("--code-shares", type=lambda text: [float(v) for v in text.split(",")],
            default=list(CODE_SHARES), help="the run-to-run variance's share per code object, "
            f"a grid (default {','.join(map(str, CODE_SHARES))})")
    library("--history-share", type=float, default=0.05,
            help="the code share of the history path's model (0.05)")
    library("--sim-device", type=sim_device_key, default="mi300x", help="the simulated device, "
            "a key of the device table (mi300x; a device with smaller caches, e.g. mi250x, has "
            "a smaller cold-mode flush buffer)")
    library("--sim-option", action="append", default=[],
            help="another open_sim option, KEY=VALUE (repeatable)")
    # fmt: on
    options = parser.parse_args(argv)
    options.part = "processes" if options.backend != "sim" or options.quick else "library"
    quick = options.quick
    defaults = {
        "processes": 8 if quick else 50,
        "long_elements": (4 << 20) if quick and options.backend == "sim" else LONG_ELEMENTS,
        "mid_elements": (1 << 20) if quick and options.backend == "sim" else MID_ELEMENTS,
        "short_elements": (256 << 10) if quick and options.backend == "sim" else SHORT_ELEMENTS,
        "trials": 500,
        "deadline": 520.0 if options.backend != "sim" else 0.0,
    }
    for name, value in defaults.items():
        if getattr(options, name) is None:
            setattr(options, name, value)
    if options.update_docs and options.quick:
        parser.error("--update-docs: a --quick run is a smoke test, its numbers stay out of docs")
    options.command = "PYTHONPATH=. python3 bench/gate_quality.py " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])
    )
    return options


def render_saved(path: Path, options: argparse.Namespace) -> int:
    """The tables of a document written by --out (a run cut off before its end has no title
    and no history scores: what it has is shown)."""
    document = read_run(path)
    if not document.get("title"):
        count = len(document.get("processes", ()))
        document["title"] = (
            f"Gate quality ({document.get('part')}, {document.get('backend')}), "
            f"{document.get('started', '')[:10]}: PARTIAL, {count} processes, no history scores"
        )
    return publish(document, options)


def merge_saved(paths: Sequence[Path], options: argparse.Namespace) -> int:
    documents = [read_run(path) for path in paths]
    try:
        merged = merge(documents)
    except ValueError as error:
        raise SystemExit(f"--merge: {error}") from None
    merged["started"] = min(d.get("started", "") for d in documents)
    describe(merged, options)
    merged["notes"].insert(1, f"merged from {len(paths)} parts: {', '.join(map(str, paths))}")
    return publish(merged, options)


def publish(document: dict[str, Any], options: argparse.Namespace) -> int:
    """Write --out, print the tables, and with --update-docs write them into the docs."""
    write_json(options.out, document)
    print(render(document, markdown=False))
    if options.markdown:
        print()
        print(render(document, markdown=True))
    if options.update_docs:
        update_docs(document)
        print(f"wrote {DOCS.relative_to(REPO_ROOT)}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(argv)
    if options.child == "calibrate":
        calibrate_child(json.loads(options.child_args))
        return 0
    if options.render:
        return render_saved(Path(options.render), options)
    if options.merge:
        return merge_saved([Path(p) for p in options.merge], options)
    began = time.perf_counter()
    previous = {s: signal.signal(s, _on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        if options.part == "processes":
            document = processes_part(options, began)
        else:
            try:
                document = library_part(options, began)
            except Stopped as signal_name:
                print(f"stopped by {signal_name}: the library part keeps nothing", file=sys.stderr)
                return 130
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    describe(document, options)
    return publish(document, options)


if __name__ == "__main__":
    sys.exit(main())
