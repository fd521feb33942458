"""Where a process's own level comes from, at the lengths where it dominates (7.6 and 27 us).

bench/stored_noise.py found that a process keeps a level of its own (about 1.2% of a 7.5 us
cold kernel, 0.2-0.3% at 27-38 us: some 80-90 ns of absolute time) that neither module loads,
buffer sets nor a fresh flush buffer move, and that averaging within the process does not
remove. This script asks what that level belongs to. Each of `--processes` separate processes
opens the device and, for each length, times the same cold launch (read-flush, event, kernel,
event) in cells of `--samples` samples:

  streams   on the legacy default stream and on `--streams` created streams, `--rounds`
            rounds each: if each stream (a hardware channel) keeps a level of its own, a
            measurement spread over several streams averages it;
  in-kernel the kernel's own span, read from %globaltimer by its first and last block
            (atomicMin / atomicMax of the timer), beside the events' span of the same launch:
            what lies outside the kernel (the launch's front end) against what lies inside;
  engine    the engine's own measurement as a pytest run takes it (stops at +-0.5%), and with
            a minimum sampling time of `--min-sampling` s (no precision stop); `--sets K,..`
            also with the samples spread over K placements of the buffers each.
  reference `--reference`: one graph whose samples time the kernel beside an empty kernel of
            its shape and arguments, one of its grid without arguments and one of one block:
            whether a launch that does no work shares the level (it could be subtracted).
  placement `--placement K`: graph cells on K buffer sets (copies of the same data, all alive)
            times two module loads, interleaved: whether the level belongs to where the
            buffers or the code landed.

The parent splits the variance of log time between processes, between streams within a
process, and between rounds within a stream, and prints sigma between processes for each way
of measuring.

Usage (repository root; one GPU device call, CUDA only):
  PYTHONPATH=. python3 bench/process_level.py --processes 16 --out level.json
  PYTHONPATH=. python3 bench/process_level.py --processes 18 --sets 4,8 --samples 100 \
      --rounds 1 --streams 0 --out sets.json
  PYTHONPATH=. python3 bench/process_level.py --render level.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
from _common import emit, markdown_table, read_run, run_child, text_table, write_json

LENGTHS = {"7.6us": 1_320_000, "27us": 8_000_000}
SPIN_S = 30e-3  # keeps the queue ahead of the host for a cell's launches (4 each a sample)

KERNEL = """\
#include "gpuperf.h"

// y = a * x, as bench/stored_scenario.py's scale(); the _timed variant also records the
// kernel's own span: each block's start and end in %globaltimer ns (its own slots: no
// atomics), whose earliest start and latest end the host takes.
GPUPERF_KERNEL void scale(const float* x, float* y, const float* extra, float a, int n,
                          int n_extra) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}

// the same launch shape and arguments, no work: what the launch costs outside the blocks' work
GPUPERF_KERNEL void empty_like(const float* x, float* y, const float* extra, float a, int n,
                               int n_extra) {}

// no arguments at all: the launch's grid alone
GPUPERF_KERNEL void empty_bare() {}

GPUPERF_KERNEL void scale_timed(const float* x, float* y, float a, int n,
                                unsigned long long* starts, unsigned long long* ends) {
    unsigned long long start = gp_wall_ns();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
    __syncthreads();
    if (threadIdx.x == 0) {
        starts[blockIdx.x] = start;
        ends[blockIdx.x] = gp_wall_ns();
    }
}
"""


def child(options: argparse.Namespace) -> None:
    """One process: one JSON line per cell."""
    import numpy as np

    from pytest_gpuperf import open_device
    from pytest_gpuperf.engine.measure import MeasureSettings
    from pytest_gpuperf.engine.policy import FLUSH_ELEMENT_BYTES, scratch_bytes_for
    from pytest_gpuperf.engine.stats import trimmed_mean
    from pytest_gpuperf.engine.timing import INTERNAL_BLOCK, blocks_for, engine_for

    folder = Path(tempfile.mkdtemp(prefix="process-level-"))
    (folder / "scale.hip").write_text(KERNEL)
    with open_device(options.backend) as device:
        backend = device.backend
        kernel = device.kernel(folder / "scale.hip", "scale")
        timed = device.kernel(folder / "scale.hip", "scale_timed")
        empty = device.kernel(folder / "scale.hip", "empty_like")
        bare = device.kernel(folder / "scale.hip", "empty_bare")
        streams = [None, *(backend.create_stream() for _ in range(options.streams))]
        k = options.samples
        board = device.info.uuid

        def cell(
            label: str,
            n: int,
            buffers: tuple,
            stream: Any,
            in_kernel: bool,
            warm: bool = False,
            launched: Any = None,
        ) -> dict:
            x, y, extra = buffers
            grid = (n + 255) // 256
            # the engine's state, fetched per cell: a measurement of the engine releases it
            engine = engine_for(backend)
            scratch = engine.scratch_for(scratch_bytes_for(backend.info.l2_bytes))
            flush_count = scratch.nbytes // FLUSH_ELEMENT_BYTES
            events = engine.event_pairs(k)
            if in_kernel:  # every sample's blocks write their own slots
                slots = [(backend.alloc(8 * grid), backend.alloc(8 * grid)) for _ in range(k)]
            backend.launch(engine.spin, 1, 1, (int(SPIN_S * 1e9),), stream=stream)
            for s in range(k):
                backend.launch(
                    engine.flush, blocks_for(flush_count), INTERNAL_BLOCK,
                    (scratch, flush_count, engine.sink), stream=stream,
                )  # fmt: skip
                if warm:  # a one-thread empty launch between the flush and the start event
                    backend.launch(engine.spin, 1, 1, (0,), stream=stream)
                backend.record_event(events[2 * s], stream)
                if in_kernel:
                    backend.launch(timed, grid, 256, (x, y, 2.0, n, *slots[s]), stream=stream)
                else:
                    backend.launch(
                        launched or kernel, grid, 256, (x, y, extra, 2.0, n, 0), stream=stream
                    )
                backend.record_event(events[2 * s + 1], stream)
            backend.synchronize(stream)
            times = np.array(
                [backend.elapsed_s(events[2 * s], events[2 * s + 1]) for s in range(k)]
            )
            row = {"length": label, "board": board, "median_s": float(np.median(times)),
                   "trimmed_s": trimmed_mean(times).mean, "n": int(times.size)}  # fmt: skip
            if in_kernel:
                inside = np.empty(k)
                starts, ends = np.empty(grid, np.uint64), np.empty(grid, np.uint64)
                for s, (start_buffer, end_buffer) in enumerate(slots):
                    backend.download(starts, start_buffer)
                    backend.download(ends, end_buffer)
                    inside[s] = float(ends.max() - starts.min()) * 1e-9
                    start_buffer.free()
                    end_buffer.free()
                row["inside_median_s"] = float(np.median(inside))
                row["inside_trimmed_s"] = trimmed_mean(inside).mean
            return row

        graph_stream = (
            backend.create_stream()
            if options.graph or options.reference or options.placement
            else None
        )

        def graph_times(launches: Sequence[tuple[Any, int, tuple]]) -> Any:
            """Cold samples captured into one CUDA graph and replayed once on a stream of its
            own: each sample, for each (kernel, blocks, args), the read-flush, an event, the
            launch and an event (events as graph nodes: Backend.record_event_in_graph).
            Times in seconds, one row a sample, one column a launch."""
            engine = engine_for(backend)
            scratch = engine.scratch_for(scratch_bytes_for(backend.info.l2_bytes))
            flush_count = scratch.nbytes // FLUSH_ELEMENT_BYTES
            events = engine.event_pairs(k * len(launches))

            def record(stream: Any) -> None:
                for e in range(0, 2 * k * len(launches), 2):
                    launched, blocks, args = launches[(e // 2) % len(launches)]
                    backend.launch(
                        engine.flush, blocks_for(flush_count), INTERNAL_BLOCK,
                        (scratch, flush_count, engine.sink), stream=stream,
                    )  # fmt: skip
                    backend.record_event_in_graph(events[e], stream)
                    backend.launch(launched, blocks, 256, args, stream=stream)
                    backend.record_event_in_graph(events[e + 1], stream)

            graph = backend.capture_graph(record, graph_stream)
            backend.launch_graph(graph, graph_stream)
            backend.synchronize(graph_stream)
            times = [
                backend.elapsed_s(events[e], events[e + 1])
                for e in range(0, 2 * k * len(launches), 2)
            ]
            backend.free_graph(graph)
            return np.array(times).reshape(k, len(launches))

        def graph_cell(label: str, n: int, buffers: tuple, launched: Any = None) -> dict:
            """The same cold samples as one CUDA graph (graph_times)."""
            x, y, extra = buffers
            grid = (n + 255) // 256
            times = graph_times([(launched or kernel, grid, (x, y, extra, 2.0, n, 0))])[:, 0]
            return {"length": label, "board": board, "median_s": float(np.median(times)),
                    "trimmed_s": trimmed_mean(times).mean, "n": int(times.size)}  # fmt: skip

        def reference_cell(label: str, n: int, buffers: tuple) -> list[dict]:
            """One graph, every sample four cold launches each between its own flush and
            events: the kernel, an empty kernel of its shape and arguments, an empty kernel
            of its grid without arguments, and that of one block: which of them shares the
            level a process keeps."""
            x, y, extra = buffers
            grid = (n + 255) // 256
            launches = {
                "kernel": (kernel, grid, (x, y, extra, 2.0, n, 0)),
                "empty-like": (empty, grid, (x, y, extra, 2.0, n, 0)),
                "empty-bare": (bare, grid, ()),
                "empty-one-block": (bare, 1, ()),
            }
            times = graph_times(list(launches.values()))
            return [
                {"length": label, "board": board, "launch": name,
                 "median_s": float(np.median(times[:, j])),
                 "trimmed_s": trimmed_mean(times[:, j]).mean, "n": int(k)}
                for j, name in enumerate(launches)
            ]  # fmt: skip

        def placement_cells(label: str, n: int, host: Any, buffers: tuple) -> None:
            """Graph cells of the kernel on `--placement` buffer sets (copies of the same
            data, all alive at once) times two module loads, interleaved over the rounds:
            whether the level a process keeps belongs to where its buffers or its code
            landed."""
            sets = [buffers] + [
                (device.to_device(host), device.empty(n),
                 device.to_device(np.zeros(1, np.float32)))
                for _ in range(options.placement - 1)
            ]  # fmt: skip
            module = next(iter(device._modules.values()))
            loads = [kernel, backend.load_again(module).kernel("scale")]
            for round_ in range(options.rounds):
                for load, launched in enumerate(loads):
                    for index, chosen in enumerate(sets):
                        row = graph_cell(label, n, chosen, launched)
                        emit({"way": "placement", "round": round_, "load": load,
                              "set": index, **row})  # fmt: skip

        for label, n in LENGTHS.items():
            host = np.random.default_rng(0).random(n, dtype=np.float32)
            buffers = (
                device.to_device(host),
                device.empty(n),
                device.to_device(np.zeros(1, np.float32)),
            )
            cell(label, n, buffers, None, in_kernel=False)  # unrecorded: the first cell starves
            for round_ in range(options.rounds):
                if options.graph:
                    row = graph_cell(label, n, buffers)
                    emit({"way": "graph", "round": round_, **row})
                if options.reference:
                    for row in reference_cell(label, n, buffers):
                        emit({"way": "graph-ref", "round": round_, **row})
                if options.empty:
                    row = cell(label, n, buffers, None, in_kernel=False)
                    emit({"way": "plain", "round": round_, **row})
                    row = cell(label, n, buffers, None, in_kernel=False, launched=empty)
                    emit({"way": "empty-same-grid", "round": round_, **row})
                for index, stream in enumerate(streams):
                    row = cell(label, n, buffers, stream, in_kernel=False)
                    emit({"way": "stream", "stream": index, "round": round_, **row})
                if options.warm:
                    row = cell(label, n, buffers, None, in_kernel=False, warm=True)
                    emit({"way": "warm-launch", "round": round_, **row})
            if options.placement:
                placement_cells(label, n, host, buffers)
            if options.in_kernel:
                row = cell(label, n, buffers, None, in_kernel=True)
                emit({"way": "in-kernel", **row})
                if options.warm:
                    row = cell(label, n, buffers, None, in_kernel=True, warm=True)
                    emit({"way": "in-kernel-warm", **row})
            x, y, extra = buffers
            for way, settings in (
                ("engine", MeasureSettings(cache="cold", budget_s=0.3)),
                ("engine-min", MeasureSettings(
                    cache="cold", budget_s=options.min_sampling, target_rel_ci=1e-6,
                    max_samples=1_000_000)),
                *((f"engine-sets{sets}", MeasureSettings(
                cache="cold", budget_s=options.min_sampling, target_rel_ci=1e-6,
                max_samples=1_000_000, reallocation_rounds=sets))
              for sets in options.sets),
            ("engine-stream", MeasureSettings(cache="cold", budget_s=0.3, graphs=False)),
                ("engine-stream-min", MeasureSettings(
                    cache="cold", budget_s=options.min_sampling, target_rel_ci=1e-6,
                    max_samples=1_000_000, graphs=False)),
            ):  # fmt: skip
                m = device.measure(
                    kernel, grid=(n + 255) // 256, block=256,
                    args=(x, y, extra, 2.0, n, 0), bytes=8 * n, settings=settings,
                )  # fmt: skip
                samples = np.asarray(m.samples_s)
                emit({
                    "way": way, "length": label, "board": board, "n": int(samples.size),
                    "median_s": float(np.median(samples)), "trimmed_s": trimmed_mean(samples).mean,
                    "sampled_s": float(samples.sum()),
                })  # fmt: skip


def collect(options: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    errors = []
    for index in range(options.processes):
        if time.monotonic() - started > options.deadline:
            break
        args = [
            str(Path(__file__).resolve()), "--child", f"--backend={options.backend}",
            f"--streams={options.streams}",
            f"--rounds={options.rounds}", f"--samples={options.samples}",
            f"--min-sampling={options.min_sampling}",
        ]  # fmt: skip
        if options.in_kernel:
            args.append("--in-kernel")
        if options.warm:
            args.append("--warm")
        if options.empty:
            args.append("--empty")
        if options.graph:
            args.append("--graph")
        if options.reference:
            args.append("--reference")
        if options.placement:
            args.append(f"--placement={options.placement}")
        if options.sets:
            args.append(f"--sets={','.join(map(str, options.sets))}")
        got = run_child(args, timeout_s=120)
        if not got:
            errors.append(f"process {index} printed nothing (its error is on stderr)")
        rows += [{"process": index, **row} for row in got]
    return {
        "title": "where a process's own level comes from (bench/process_level.py)",
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "options": {k: v for k, v in vars(options).items() if k not in ("out", "render")},
        "rows": rows,
        "errors": errors,
        "wall_s": time.monotonic() - started,
    }


def _sd_log(values: Sequence[float]) -> float:
    import math

    logs = [math.log(v) for v in values if v > 0]
    return statistics.stdev(logs) if len(logs) > 1 else 0.0


def analyse(document: Mapping[str, Any]) -> list[list[str]]:
    """Rows of (length, way of measuring, sigma between processes, detail)."""
    import math

    rows = document["rows"]
    table = []
    for length in LENGTHS:
        mine = [r for r in rows if r["length"] == length]
        processes = sorted({r["process"] for r in mine})
        streams = sorted({r["stream"] for r in mine if r["way"] == "stream"})

        def per_process(
            pick, way: str, stat: str = "trimmed_s", mine=mine, processes=processes
        ) -> list[float]:
            out = []
            for p in processes:
                cells = [r[stat] for r in mine if r["process"] == p and r["way"] == way and pick(r)]
                if cells:
                    out.append(math.exp(statistics.fmean(math.log(c) for c in cells)))
            return out

        for s in streams:
            level = per_process(lambda r, s=s: r["stream"] == s, "stream")
            table.append([length, f"stream {s} (all rounds)", f"{_sd_log(level):.2%}", ""])
        level = per_process(lambda r: True, "stream")
        table.append([length, f"mean over {len(streams)} streams", f"{_sd_log(level):.2%}", ""])
        # within a process: streams' levels about the process mean, rounds about a stream's
        between_streams, between_rounds = [], []
        for p in processes:
            cells = [r for r in mine if r["process"] == p and r["way"] == "stream"]
            by_stream = {}
            for r in cells:
                by_stream.setdefault(r["stream"], []).append(math.log(r["trimmed_s"]))
            means = [statistics.fmean(v) for v in by_stream.values()]
            if len(means) > 1:
                between_streams.append(statistics.variance(means))
            between_rounds += [statistics.variance(v) for v in by_stream.values() if len(v) > 1]
        detail = (
            f"within a process: streams {math.sqrt(statistics.fmean(between_streams)):.2%}, "
            f"rounds {math.sqrt(statistics.fmean(between_rounds)):.2%}"
            if between_streams and between_rounds
            else ""
        )
        table[-1][3] = detail
        plain = per_process(lambda r: True, "plain")
        empty = per_process(lambda r: True, "empty-same-grid")
        if len(plain) > 1 and len(plain) == len(empty):
            differences = [p - e for p, e in zip(plain, empty, strict=True)]
            scale = statistics.fmean(plain)
            table.append([length, "plain: events, trimmed", f"{_sd_log(plain):.2%}",
                          f"{scale * 1e6:.2f} us"])  # fmt: skip
            table.append([length, "empty launch of the same shape", f"{_sd_log(empty):.2%}",
                          f"{statistics.fmean(empty) * 1e6:.2f} us"])  # fmt: skip
            table.append([length, "plain - empty (of plain's time)",
                          f"{statistics.stdev(differences) / scale:.2%}",
                          f"correlation {statistics.correlation(plain, empty):+.2f}"])  # fmt: skip
        table += _reference_rows(length, mine, processes)
        table += _placement_rows(length, mine, processes)
        for way, stat in (("graph", "trimmed_s"), ("graph", "median_s"),
                          ("warm-launch", "trimmed_s"), ("warm-launch", "median_s"),
                          ("in-kernel", "trimmed_s"), ("in-kernel", "inside_trimmed_s"),
                          ("in-kernel-warm", "trimmed_s"), ("in-kernel-warm", "inside_trimmed_s"),
                          ("engine", "median_s"), ("engine", "trimmed_s"),
                          ("engine-min", "median_s"), ("engine-min", "trimmed_s"),
                          ("engine-graph", "median_s"), ("engine-graph-min", "median_s"),
                          ("engine-graph-min", "trimmed_s"),
                          *((f"engine-sets{k}", stat) for k in (2, 4, 8, 16)
                            for stat in ("median_s", "trimmed_s")),
                          ("engine-stream", "median_s"), ("engine-stream-min", "median_s"),
                          ("engine-stream-min", "trimmed_s")):  # fmt: skip
            level = per_process(lambda r: True, way, stat)
            if len(level) > 1:
                label = {"inside_trimmed_s": f"{way}: span (globaltimer), trimmed",
                         "trimmed_s": f"{way}: events, trimmed",
                         "median_s": f"{way}: events, median"}[stat]  # fmt: skip
                sampled = [r.get("sampled_s", 0) for r in mine if r["way"] == way]
                note = (
                    f"{statistics.median(sampled) * 1e3:.1f} ms of samples" if any(sampled) else ""
                )
                time_us = statistics.median(level) * 1e6
                table.append([length, label, f"{_sd_log(level):.2%}", f"{time_us:.2f} us; {note}"])
    return table


def _reference_rows(length: str, mine: list, processes: list) -> list[list[str]]:
    """For the graph-ref way: each empty launch's level beside the kernel's, and what the
    kernel's level scatters by once the empty launch's deviation from its mean over processes
    is taken off (absolute time: what a process keeps lies outside the blocks)."""
    import math

    levels: dict[str, list[float]] = {}
    for p in processes:
        cells = [r for r in mine if r["process"] == p and r["way"] == "graph-ref"]
        for name in dict.fromkeys(r["launch"] for r in cells):
            logs = [math.log(r["trimmed_s"]) for r in cells if r["launch"] == name]
            levels.setdefault(name, []).append(math.exp(statistics.fmean(logs)))
    kernel = levels.pop("kernel", [])
    if len(kernel) < 3:
        return []
    scale = statistics.fmean(kernel)
    rows = [[length, "graph-ref: kernel, trimmed", f"{_sd_log(kernel):.2%}",
             f"{scale * 1e6:.2f} us, {len(kernel)} processes"]]  # fmt: skip
    for name, ref in levels.items():
        if len(ref) != len(kernel):
            continue
        rho = statistics.correlation(kernel, ref)
        adjusted = [k - r for k, r in zip(kernel, ref, strict=True)]
        slope = statistics.linear_regression(ref, kernel).slope
        fitted = [k - slope * r for k, r in zip(kernel, ref, strict=True)]
        rows.append([length, f"graph-ref: kernel - ({name} - its mean)",
                     f"{statistics.stdev(adjusted) / scale:.2%}",
                     f"{name} {statistics.fmean(ref) * 1e6:.2f} us, sigma "
                     f"{_sd_log(ref):.2%}, correlation {rho:+.2f}, slope {slope:.2f} -> "
                     f"{statistics.stdev(fitted) / scale:.2%}"])  # fmt: skip
    return rows


def _placement_rows(length: str, mine: list, processes: list) -> list[list[str]]:
    """For the placement way: within a process, the scatter of a buffer set's (and a load's)
    mean log time beside what the cells' own scatter predicts for it, and the scatter of the
    processes' means over every set and load."""
    import math

    cells = [r for r in mine if r["way"] == "placement"]
    if not cells:
        return []
    sets, loads, residual, means = [], [], [], []
    for p in processes:
        own = [r for r in cells if r["process"] == p]
        if not own:
            continue
        means.append(statistics.fmean(math.log(r["trimmed_s"]) for r in own))
        for key, out in (("set", sets), ("load", loads)):
            groups: dict[int, list[float]] = {}
            for r in own:
                groups.setdefault(r[key], []).append(math.log(r["trimmed_s"]))
            if len(groups) > 1:
                out.append(statistics.variance([statistics.fmean(v) for v in groups.values()]))
        pairs: dict[tuple[int, int], list[float]] = {}
        for r in own:
            pairs.setdefault((r["set"], r["load"]), []).append(math.log(r["trimmed_s"]))
        residual += [statistics.variance(v) for v in pairs.values() if len(v) > 1]
    if len(means) < 3 or not (sets and loads and residual):
        return []
    cell = math.sqrt(statistics.fmean(residual))
    n_sets = len({r["set"] for r in cells})
    n_loads = len({r["load"] for r in cells})
    per_set = cell / math.sqrt(len(cells) / len(means) / n_sets)
    per_load = cell / math.sqrt(len(cells) / len(means) / n_loads)
    return [
        [length, "placement: cells of one set and load", f"{cell:.2%}", "within a process"],
        [
            length,
            f"placement: means of {n_sets} buffer sets",
            f"{math.sqrt(statistics.fmean(sets)):.2%}",
            f"within a process; the cells alone predict {per_set:.2%}",
        ],
        [
            length,
            f"placement: means of {n_loads} module loads",
            f"{math.sqrt(statistics.fmean(loads)):.2%}",
            f"within a process; the cells alone predict {per_load:.2%}",
        ],
        [
            length,
            "placement: process means (every set and load)",
            f"{statistics.stdev(means):.2%}",
            f"{len(means)} processes",
        ],
    ]


def render(document: Mapping[str, Any], markdown: bool) -> str:
    table = markdown_table if markdown else text_table
    boards = sorted({r["board"][:12] for r in document["rows"]})
    processes = len({r["process"] for r in document["rows"]})
    head = (
        f"{document['title']}, {document['started']}, board {', '.join(boards)}: "
        f"{processes} processes, {document['wall_s']:.0f} s"
    )
    body = table(
        ["length", "way of measuring", "sigma between processes", "detail"], analyse(document)
    )
    errors = [f"a child failed: {e[-600:]}" for e in document.get("errors", ())[:2]]
    note = [f"note: {document['note']}"] if document.get("note") else []
    return "\n".join([head, *note, "", body, *errors])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--backend", default="cuda", choices=("cuda", "sim"))
    parser.add_argument("--processes", type=int, default=16)
    parser.add_argument(
        "--streams", type=int, default=3, help="created streams besides the default"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=100, help="samples per cell")
    parser.add_argument("--min-sampling", type=float, default=0.3, help="seconds")
    parser.add_argument("--in-kernel", action="store_true")
    parser.add_argument(
        "--warm", action="store_true", help="also cells with an empty launch after the flush"
    )
    parser.add_argument(
        "--graph", action="store_true", help="also the cold samples as one CUDA graph (CUDA)"
    )
    parser.add_argument(
        "--empty",
        action="store_true",
        help="also cells of an empty kernel of the same launch shape, beside plain ones",
    )
    parser.add_argument(
        "--reference",
        action="store_true",
        help="also graphs of the kernel beside empty launches in the same process (CUDA)",
    )
    parser.add_argument(
        "--placement", type=int, default=0,
        help="also graph cells on this many buffer sets times two module loads (CUDA)",
    )  # fmt: skip
    parser.add_argument(
        "--sets", type=lambda text: [int(v) for v in text.split(",") if v], default=[],
        help="also the engine at the minimum sampling time over these many buffer sets "
        "(reallocation_rounds), e.g. 4,8",
    )  # fmt: skip
    parser.add_argument("--deadline", type=float, default=240.0, help="seconds")
    parser.add_argument("--out")
    parser.add_argument("--render")
    parser.add_argument("--markdown", action="store_true")
    options = parser.parse_args(argv)
    if options.child:
        child(options)
        return 0
    if options.render:
        document = read_run(options.render)
    else:
        document = collect(options)
        write_json(options.out, document)
    print(render(document, options.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
