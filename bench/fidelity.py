"""Fidelity of the measurement engine against the usual ways of timing a GPU kernel.

For vector add, copy and triad at working sets from 4 KB to 2 GB, every method measures the
same operation once per process, in >= 8 separate processes (run-to-run noise only shows up
between processes):

- engine cold / hot / rotate: pytest_gpuperf.engine.measure.measure_kernel on the .hip kernels
  (hot replays graphs on backends that have them; "engine hot (stream launches)" is the same
  without, and "graph replay (same kernel)" is do_bench_cudagraph's method on the .hip kernel);
- events (single launch): an event pair around one launch on an idle queue, synchronising
  after each (the starved-queue pitfall: it times the host's launch latency for small sizes);
- triton do_bench (median): triton.testing.do_bench on Triton kernels of the same ops (it
  clears the L2 by *writing* a 256 MB buffer before each launch);
- triton cudagraph (median): triton.testing.do_bench_cudagraph (graph replay);
- engine callable cold / hot: measure_callable around the same Triton launch, so the engine
  and do_bench are compared on one kernel.

Reported per (op, size, method): efficiency (median over processes), run-to-run CV across
processes, and the wall time one measurement took.

    python bench/fidelity.py --backend cuda --out out/fidelity.json --markdown docs/benchmarks.md
    python bench/fidelity.py --backend sim --quick        # smoke test without a GPU
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from lab import KERNELS_DIR
from lab.children import emit, run_child
from lab.devices import BACKENDS, open_device
from lab.kernels import STREAM_OPS, StreamOp
from lab.runs import write_json
from lab.tables import human_bytes, markdown_table, parse_bytes, replace_section, text_table

OPS = STREAM_OPS
SIZES = {
    # Powers of 16 plus the big end, so >= 8 processes fit in ~6 minutes on an H100;
    # --sizes 4K,16K,64K,256K,1M,4M,16M,64M,256M,1G,2G gives every power of 4.
    "cuda": "4K,64K,1M,16M,64M,256M,1G,2G",
    "sim": "4K,64K,1M,4M",
}
QUICK_SIZES = {"cuda": "64K,16M,1G", "sim": "4K,1M"}
BLOCK = 256
EVENT_REPEATS = 50
GRAPH_REPLAYS = 20


# -- the engine child: our kernels through the plugin's backend ---------------------------


def engine_child(backend_name: str, ops: list[str], sizes: list[int]) -> None:
    from pytest_gpuperf.engine.measure import MeasureSettings, measure_kernel
    from pytest_gpuperf.errors import ConfigError

    opened = open_device(backend_name)
    backend, device = opened.backend, opened.spec
    rng = np.random.default_rng(0)
    for op_name in ops:
        op = OPS[op_name]
        kernel = backend.compile(KERNELS_DIR / op.file).kernel(op.symbol)
        for size in sizes:
            n = max(1, size // op.bytes_per_element)
            inputs = [rng.random(n, dtype=np.float32) + 1 for _ in range(op.inputs)]
            buffers = [backend.to_device(a) for a in inputs]
            output = backend.alloc(4 * n)
            args = (*buffers, output, *(() if op.scalar is None else (op.scalar,)), n)
            grid = (n + BLOCK - 1) // BLOCK
            row = {"op": op_name, "size": size, "bytes_moved": n * op.bytes_per_element}
            modes = [("cold", True), ("hot", True), ("rotate", True)]
            if backend.supports_graphs:  # hot mode replays graphs there: show it without too
                modes.append(("hot", False))
            for cache, graphs in modes:
                method = f"engine {cache}" + ("" if graphs else " (stream launches)")
                began = time.perf_counter()
                try:
                    m = measure_kernel(
                        backend, kernel, grid=grid, block=BLOCK, args=args, device=device,
                        bytes_moved=row["bytes_moved"],
                        settings=MeasureSettings(cache=cache, graphs=graphs),
                    )  # fmt: skip
                except ConfigError as refused:  # rotate of a tiny working set
                    emit({**row, "method": method, "skipped": str(refused)})
                    continue
                timed(row, method, began, m.time_s, device.peak_bps, efficiency=m.efficiency,
                      stopped_by=m.stopped_by, samples=len(m.samples_s),
                      queue_method=m.queue_method)  # fmt: skip
            if n <= 1 << 24:  # the real output must be in the caller's buffer after rotate
                got = output.download(np.float32)
                ok = np.allclose(got, op.expected(inputs), rtol=1e-6)
                emit({**row, "method": "output check", "ok": bool(ok)})
            began = time.perf_counter()
            time_s = _events_around_single_launches(backend, kernel, grid, args)
            timed(row, "events (single launch)", began, time_s, device.peak_bps)
            if backend.supports_graphs:
                began = time.perf_counter()
                launches = 100 if row["bytes_moved"] <= 1 << 26 else 10
                time_s = _graph_replay(backend, kernel, grid, args, launches)
                timed(row, "graph replay (same kernel)", began, time_s, device.peak_bps)
            for buffer in (*buffers, output):
                buffer.free()


def timed(row: dict, method: str, began: float, time_s: float, peak_bps: float, **more) -> None:
    """Emit one method's row of (op, size): its time, the wall since `began`, its efficiency
    (the declared bytes over `time_s` against `peak_bps`), and `more` (the engine's own)."""
    efficiency = row["bytes_moved"] / time_s / peak_bps
    emit({**row, "method": method, "efficiency": efficiency, "time_s": time_s,
          "wall_s": time.perf_counter() - began, **more})  # fmt: skip


def _graph_replay(backend, kernel, grid, args, launches: int) -> float:
    """do_bench_cudagraph's method on this repo's kernel: a graph of `launches` back-to-back
    launches, replayed between events; median per launch over the replays."""

    def record(stream) -> None:
        for _ in range(launches):
            backend.launch(kernel, grid, BLOCK, args, stream=stream)

    graph = backend.capture_graph(record)
    start, end = backend.create_event(), backend.create_event()
    backend.launch_graph(graph)  # warm-up
    times_s = []
    for _ in range(GRAPH_REPLAYS):
        backend.record_event(start)
        backend.launch_graph(graph)
        backend.record_event(end)
        backend.synchronize()
        times_s.append(backend.elapsed_s(start, end) / launches)
    backend.free_graph(graph)
    return statistics.median(times_s)


def _events_around_single_launches(backend, kernel, grid, args) -> float:
    """The naive method: record, launch, record, synchronise; median of the repeats."""
    start, end = backend.create_event(), backend.create_event()
    times_s = []
    for _ in range(EVENT_REPEATS):
        backend.record_event(start)
        backend.launch(kernel, grid, BLOCK, args)
        backend.record_event(end)
        backend.synchronize()
        times_s.append(backend.elapsed_s(start, end))
    return statistics.median(times_s)


# -- the Triton child: the same ops as Triton kernels, timed by Triton and by the engine ---


def triton_child(ops: list[str], sizes: list[int], with_engine: bool) -> None:
    import torch
    import triton
    import triton.language as tl
    import triton.testing

    @triton.jit
    def add_kernel(a, b, c, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(
            c + offsets,
            tl.load(a + offsets, mask=mask) + tl.load(b + offsets, mask=mask),
            mask=mask,
        )

    @triton.jit
    def copy_kernel(a, b, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(b + offsets, tl.load(a + offsets, mask=mask), mask=mask)

    @triton.jit
    def triad_kernel(a, b, c, s, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        value = tl.load(a + offsets, mask=mask) + s * tl.load(b + offsets, mask=mask)
        tl.store(c + offsets, value, mask=mask)

    engine = None
    if with_engine:
        try:
            from pytest_gpuperf import open_device
            from pytest_gpuperf.engine.measure import MeasureSettings, measure_callable

            opened = open_device("cuda")
            engine = (opened.backend, opened.spec, MeasureSettings, measure_callable)
        except Exception as error:  # the engine rows are then missing, the rest still runs
            print(f"engine on Triton kernels unavailable: {error}", file=sys.stderr)
    from pytest_gpuperf.runtime.devices import get_device

    peak_bps = engine[1].peak_bps if engine else get_device("h100-sxm").peak_bps
    kernels = {"vector_add": add_kernel, "copy": copy_kernel, "triad": triad_kernel}
    for op_name in ops:
        for size in sizes:
            _triton_case(torch, triton, kernels[op_name], op_name, size, peak_bps, engine)


def _triton_case(torch, triton, kernel, op_name: str, size: int, peak_bps: float, engine) -> None:
    """Every Triton-side method on one (op, size)."""
    op = OPS[op_name]
    n = max(1, size // op.bytes_per_element)
    launch = _triton_launch(torch, triton, kernel, op, n)
    launch()
    torch.cuda.synchronize()
    row = {"op": op_name, "size": size, "bytes_moved": n * op.bytes_per_element}
    timings = [
        ("triton do_bench (median)", lambda: _do_bench(triton.testing.do_bench, launch)),
        ("triton cudagraph (median)", lambda: _do_bench(triton.testing.do_bench_cudagraph, launch)),
        ("torch events (single launch)", lambda: _torch_events(torch, launch)),
    ]
    if engine is not None:
        backend, device, settings_type, measure_callable = engine

        def engine_s(cache: str) -> float:
            return measure_callable(backend, launch, bytes_moved=row["bytes_moved"], device=device,
                                    settings=settings_type(cache=cache),
                                    name=f"triton {op_name}").time_s  # fmt: skip

        timings += [(f"engine callable {c}", lambda c=c: engine_s(c)) for c in ("cold", "hot")]
    for method, timing in timings:
        began = time.perf_counter()
        timed(row, method, began, timing(), peak_bps)


def _triton_launch(torch, triton, kernel, op: StreamOp, n: int):
    """A no-argument launch of the Triton kernel for `op` on fresh tensors of n floats."""
    block = 1024
    tensors = [torch.rand(n, device="cuda") + 1 for _ in range(op.inputs + op.outputs)]
    scalars = () if op.scalar is None else (op.scalar,)
    grid = (triton.cdiv(n, block),)

    def launch() -> None:
        kernel[grid](*tensors, *scalars, n, BLOCK=block)

    return launch


def _do_bench(bench, fn) -> float:
    """Seconds from a Triton benchmark in median mode (older Tritons lack return_mode)."""
    try:
        return bench(fn, return_mode="median") / 1e3
    except TypeError:
        return bench(fn, quantiles=[0.5]) / 1e3


def _torch_events(torch, fn) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times_s = []
    for _ in range(EVENT_REPEATS):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times_s.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times_s)


# -- the parent: processes, aggregation, tables --------------------------------------------


def aggregate(rows: list[dict]) -> list[dict]:
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        if "efficiency" in row:
            groups.setdefault((row["op"], row["size"], row["method"]), []).append(row)
    summary = []
    for (op_name, size, method), items in sorted(groups.items()):
        efficiencies = [r["efficiency"] for r in items]
        mean = statistics.fmean(efficiencies)
        summary.append({
            "op": op_name, "size": size, "method": method,
            "efficiency": statistics.median(efficiencies),
            "cv": statistics.stdev(efficiencies) / mean if len(items) > 1 else None,
            "wall_s": statistics.median(r["wall_s"] for r in items), "processes": len(items),
        })  # fmt: skip
    return summary


def _table_rows(summary: list[dict]) -> list[list]:
    return [
        [s["op"], human_bytes(s["size"]), s["method"], f"{100 * s['efficiency']:.3g}%",
         "-" if s["cv"] is None else f"{s['cv']:.2%}", f"{s['wall_s']:.3f}", s["processes"]]
        for s in summary
    ]  # fmt: skip


HEADERS = ["op", "working set", "method", "efficiency", "run-to-run CV", "wall s", "procs"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="cuda", choices=BACKENDS)
    parser.add_argument("--sizes", help="comma-separated working sets, e.g. 4K,1M,2G")
    parser.add_argument("--ops", default=",".join(OPS), help="default: all")
    parser.add_argument("--processes", type=int, help="separate processes (default 8; 2 quick)")
    parser.add_argument("--quick", action="store_true", help="fewer sizes and processes")
    parser.add_argument("--no-triton", action="store_true", help="skip the Triton/torch child")
    parser.add_argument("--time-budget-s", type=float, default=480.0,
                        help="stop starting processes after this long (default 480)")  # fmt: skip
    parser.add_argument("--out", help="write all rows and the summary as JSON")
    parser.add_argument("--markdown", help="write the table into this Markdown file's section")
    parser.add_argument("--child", choices=["engine", "triton"], help=argparse.SUPPRESS)
    options = parser.parse_args(argv)

    sizes_text = (
        options.sizes
        or (QUICK_SIZES if options.quick else SIZES)["sim" if options.backend == "sim" else "cuda"]
    )
    sizes = [parse_bytes(s) for s in sizes_text.split(",")]
    ops = options.ops.split(",")
    if options.child == "engine":
        engine_child(options.backend, ops, sizes)
        return 0
    if options.child == "triton":
        triton_child(ops, sizes, with_engine=True)
        return 0

    processes = options.processes or (2 if options.quick else 8)
    kinds = ["engine"]
    if options.backend == "cuda" and not options.no_triton:
        kinds.append("triton")
    began = time.perf_counter()
    rows: list[dict] = []
    completed = 0
    for process in range(processes):
        for kind in kinds:  # interleaved, so slow drift of the machine hits every method
            left_s = options.time_budget_s - (time.perf_counter() - began)
            if left_s <= 0:
                break
            child_args = [__file__, "--child", kind, "--backend", options.backend,
                          "--sizes", ",".join(map(str, sizes)), "--ops", ",".join(ops)]  # fmt: skip
            for row in run_child(child_args, timeout_s=max(left_s, 30.0)):
                rows.append({**row, "process": process})
        else:
            completed += 1
            continue
        break
    summary = aggregate(rows)
    checks = [r for r in rows if r.get("method") == "output check"]
    failed_checks = [r for r in checks if not r["ok"]]
    simulated = (
        " (SIMULATED device: tests the engine, not a GPU)" if options.backend == "sim" else ""
    )
    title = (
        f"fidelity on {options.backend}{simulated}: {completed} complete processes, "
        f"{time.perf_counter() - began:.0f} s"
    )
    print(title)
    print(text_table(HEADERS, _table_rows(summary)))
    print(f"output checks after rotate: {len(checks) - len(failed_checks)}/{len(checks)} ok")
    skipped = sorted({(r["op"], r["size"], r["method"]) for r in rows if "skipped" in r})
    if skipped:
        cases = ", ".join(f"{op} {human_bytes(size)} {method}" for op, size, method in skipped)
        print(f"not applicable (rotate needs a working set >= 2 x caches / 1024): {cases}")
    write_json(options.out, {"title": title, "rows": rows, "summary": summary})
    if options.markdown:
        body = f"### {title}\n\n" + markdown_table(HEADERS, _table_rows(summary))
        replace_section(Path(options.markdown), f"fidelity-{options.backend}", body)
    return 1 if failed_checks or not summary else 0


if __name__ == "__main__":
    sys.exit(main())
