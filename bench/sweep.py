"""Bandwidth against size: a memcpy sweep, for copy and vector add, on one device.

The blog post "ScalarLM Benchmarking MI300X Memcpy" (code: github.com/tensorwavecloud/ScalarLM)
copies buffers of 4 KB .. 2.1 GB (powers of two) with PyTorch on an MI300X and plots GB/s
against the size, log-log, under the 5.3 TB/s roofline. This script does the same through the
plugin's measurement engine (`measure_kernel`) with the shipped kernels `copy`
(kernels/stream.hip) and `vector_add` (kernels/vector_add.hip), in the cache modes asked for, so
that the curve shows what the engine measures: launch-bound below a few MB, cache-resident in
between (hot mode can beat the HBM roofline there), HBM-bound beyond the caches.

GB/s here is the plugin's: declared bytes (each input read once + each output written once)
over the median kernel time. The blog's memcpy figure counts only the bytes copied
(size / time), half of what a copy reads and writes, so its "40-60% of peak" corresponds
to about twice that in this script's terms.

    python bench/sweep.py --backend cuda --out out/sweep.json --plot out/sweep.png
    python bench/sweep.py --backend sim --max-bytes 256M --plot out/sweep-sim.png \
        --markdown docs/sweep.md
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from lab.devices import BACKENDS, open_device
from lab.kernels import STREAM_OPS
from lab.runs import read_run, write_json
from lab.tables import human_bytes, markdown_table, parse_bytes, replace_section, text_table

BLOCK = 256
MIN_BYTES = 4 * 2**10  # the ScalarLM blog's smallest memcpy (2**12)
MAX_BYTES = 2 * 2**30  # the blog stops at the Llama 3 8B embedding table, 2.1 GB
CHECK_MAX_ELEMENTS = 2**26  # outputs are checked on the host up to 256 MiB per buffer
BUDGET_SPENT = "wall budget spent"
NAN_BYTE = 0xFF  # output buffers start as NaN, so an unwritten element fails the check


KERNELS = {name: STREAM_OPS[name] for name in ("copy", "vector_add")}


@dataclass(frozen=True)
class SweepRow:
    """One measurement: `size_bytes` per buffer (the blog's memcpy size), `bytes_moved` over
    all buffers (the working set, what efficiency is computed from)."""

    kernel: str
    cache: str
    size_bytes: int
    bytes_moved: int
    time_s: float
    time_ci_s: tuple[float, float]
    bandwidth_bps: float
    efficiency: float
    samples: int
    stopped_by: str
    wall_s: float
    output_checked: bool


@dataclass(frozen=True)
class SweepSkip:
    """A measurement the sweep did not take, and why (wall budget, memory, engine refusal)."""

    kernel: str
    cache: str
    size_bytes: int
    reason: str


@dataclass(frozen=True)
class SweepResult:
    device_key: str
    device_name: str
    backend: str
    simulated: bool
    peak_bps: float
    l2_bytes: int
    cache_bytes: int
    date: str  # ISO date (UTC) of the run
    rows: tuple[SweepRow, ...]
    skipped: tuple[SweepSkip, ...]  # what the budget, memory or engine left out, and why
    command: str = ""  # the command line that ran the sweep, for the record


def sizes_between(min_bytes: int, max_bytes: int) -> list[int]:
    """Powers of two from `min_bytes` to `max_bytes` inclusive (the blog's 2**12 .. 2**31)."""
    if min_bytes < 4 or max_bytes < min_bytes:
        raise ValueError(f"need 4 <= --min-bytes <= --max-bytes, got {min_bytes}, {max_bytes}")
    first = math.ceil(math.log2(min_bytes))
    return [2**p for p in range(first, 64) if 2**p <= max_bytes]


def run_sweep(
    backend: Any,
    device: Any,
    *,
    kernels: Sequence[str],
    caches: Sequence[str],
    sizes: Sequence[int],
    measure_budget_s: float,
    wall_budget_s: float,
    seed: int = 0,
    clock: Callable[[], float] = time.perf_counter,
    log: Callable[[str], None] = print,
) -> SweepResult:
    """Measure every (size, kernel, cache mode), smallest size first, until the wall budget
    is spent; what is left is listed in `skipped` rather than silently dropped."""
    from pytest_gpuperf.engine.measure import MeasureSettings, measure_kernel
    from pytest_gpuperf.errors import GpuPerfError
    from pytest_gpuperf.runtime.compile import KERNELS_DIR

    compiled = {
        name: backend.compile(KERNELS_DIR / KERNELS[name].file).kernel(KERNELS[name].symbol)
        for name in kernels
    }
    rng = np.random.default_rng(seed)
    began = clock()
    rows: list[SweepRow] = []
    skipped: list[SweepSkip] = []
    for size in sizes:
        n = size // 4
        for name in kernels:
            spec = KERNELS[name]
            work = [(name, cache) for cache in caches]
            if clock() - began >= wall_budget_s:
                skipped += [SweepSkip(k, c, size, BUDGET_SPENT) for k, c in work]
                continue
            # Inputs in [1, 2): never zeros, so a kernel that writes nothing cannot pass.
            inputs = [rng.random(n, dtype=np.float32) + 1 for _ in range(spec.inputs)]
            buffers = []
            try:
                buffers = [backend.to_device(a) for a in inputs]
                output = backend.alloc(size)
                buffers.append(output)
            except GpuPerfError as failure:
                skipped += [SweepSkip(k, c, size, str(failure)) for k, c in work]
                _free(buffers)
                continue
            args = (*buffers, n)
            try:
                for _, cache in work:
                    if clock() - began >= wall_budget_s:
                        skipped.append(SweepSkip(name, cache, size, BUDGET_SPENT))
                        continue
                    backend.fill(output, NAN_BYTE)
                    started = clock()
                    try:
                        measurement = measure_kernel(
                            backend, compiled[name], grid=(n + BLOCK - 1) // BLOCK, block=BLOCK,
                            args=args, bytes_moved=size * spec.buffers, device=device,
                            settings=MeasureSettings(cache=cache, budget_s=measure_budget_s),
                            name=f"{name} {cache}",
                        )  # fmt: skip
                    except GpuPerfError as failure:
                        skipped.append(SweepSkip(name, cache, size, str(failure)))
                        continue
                    checked = n <= CHECK_MAX_ELEMENTS
                    if checked:
                        got = output.download(np.float32)
                        if not np.array_equal(got, spec.expected(inputs)):
                            raise SystemExit(
                                f"sweep: {name} {cache} at {human_bytes(size)} wrote wrong "
                                "results; a bandwidth of a wrong kernel means nothing"
                            )
                    m = measurement
                    row = SweepRow(
                        name, cache, size, m.bytes_moved, m.time_s, m.time_ci_s, m.bandwidth_bps,
                        m.efficiency, len(m.samples_s), m.stopped_by, clock() - started, checked,
                    )  # fmt: skip
                    rows.append(row)
                    log(
                        f"{name:>10} {cache:>6} {human_bytes(size):>7}  "
                        f"{row.bandwidth_bps / 1e9:9.1f} GB/s  {row.efficiency:7.1%}  "
                        f"({row.samples} samples, {row.wall_s:.1f} s)"
                    )
            finally:
                _free(buffers)
    info = backend.info
    return SweepResult(
        device_key=device.key, device_name=device.name, backend=info.backend,
        simulated=bool(info.simulated), peak_bps=float(device.peak_bps),
        l2_bytes=int(device.l2_bytes), cache_bytes=int(device.cache_bytes),
        date=datetime.now(timezone.utc).date().isoformat(), rows=tuple(rows),
        skipped=tuple(skipped),
    )  # fmt: skip


def _free(buffers: Sequence[Any]) -> None:
    for buffer in buffers:
        if not buffer.freed:
            buffer.free()


# -- output ------------------------------------------------------------------------------

HEADERS = ["kernel", "cache", "size (B/buffer)", "bytes moved", "time (us)", "GB/s",
           "efficiency", "samples", "stopped by"]  # fmt: skip


def table_rows(result: SweepResult) -> list[list[Any]]:
    ordered = sorted(result.rows, key=lambda r: (r.kernel, r.cache, r.size_bytes))
    return [
        [r.kernel, r.cache, r.size_bytes, r.bytes_moved, f"{r.time_s * 1e6:.2f}",
         f"{r.bandwidth_bps / 1e9:.1f}", f"{r.efficiency:.1%}", r.samples, r.stopped_by]
        for r in ordered
    ]  # fmt: skip


def title(result: SweepResult) -> str:
    label = " SIMULATED" if result.simulated else ""
    return (
        f"Bandwidth sweep on{label} {result.device_name} [{result.device_key}] via "
        f"{result.backend}, {result.date}"
    )


def skipped_lines(result: SweepResult) -> list[str]:
    """One line per (kernel, cache mode, kind of reason): the sizes it covers, and the reason
    given at the largest of them (an engine refusal names the size that would work)."""
    groups: dict[tuple[str, str, bool], list[SweepSkip]] = {}
    for skip in result.skipped:
        key = (skip.kernel, skip.cache, skip.reason == BUDGET_SPENT)
        groups.setdefault(key, []).append(skip)
    lines = []
    for (kernel, cache, _), skips in groups.items():
        sizes = [s.size_bytes for s in skips]
        span = human_bytes(min(sizes))
        if len(sizes) > 1:
            span += f" .. {human_bytes(max(sizes))}"
        reason = max(skips, key=lambda s: s.size_bytes).reason
        prefix = f"{kernel} {cache}: "  # measure_kernel's messages start with the label
        lines.append(f"{kernel} {cache} at {span}: {reason.removeprefix(prefix)}")
    return lines


def render_text(result: SweepResult) -> str:
    lines = [
        title(result),
        f"peak {result.peak_bps / 1e9:.0f} GB/s (datasheet); GB/s = declared bytes / median time",
    ]
    if result.simulated:
        lines.append("*** SIMULATED: times come from the simulated device's model, not a GPU ***")
    lines.append(text_table(HEADERS, table_rows(result)))
    lines += [f"skipped: {line}" for line in skipped_lines(result)]
    return "\n".join(lines)


def render_markdown(result: SweepResult) -> str:
    head = f"### {title(result)}\n\n"
    if result.simulated:
        head += (
            "**SIMULATED** — these numbers come from the simulated device's model "
            "(docs/simulated-device.md), not from a GPU; they show the shape the model "
            "predicts, and test the script.\n\n"
        )
    if result.command:
        head += f"Command: `{result.command}`\n\n"
    body = markdown_table(HEADERS, table_rows(result))
    if result.skipped:
        body += "\n\nNot measured:\n\n" + "\n".join(f"- {line}" for line in skipped_lines(result))
    return head + body


def to_json(result: SweepResult) -> dict[str, Any]:
    data = asdict(result)
    data["title"] = title(result)
    data["rows"] = [{**asdict(r), "gbps": r.bandwidth_bps / 1e9} for r in result.rows]
    return data


LINE_STYLES = {"cold": "-", "hot": "--", "rotate": ":"}


def from_json(data: dict[str, Any]) -> SweepResult:
    """The result a previous `--out` file holds, so that the table and the plot can be made
    again (on another machine, say) without measuring again."""

    def known(kind: type, found: dict[str, Any]) -> dict[str, Any]:
        """The fields of `kind` that `found` holds (a file holds more: title, gbps)."""
        return {name: found[name] for name in kind.__dataclass_fields__ if name in found}

    rows = tuple(
        SweepRow(**{**known(SweepRow, row), "time_ci_s": tuple(row["time_ci_s"])})
        for row in data["rows"]
    )
    skipped = tuple(SweepSkip(**skip) for skip in data["skipped"])
    return SweepResult(**{**known(SweepResult, data), "rows": rows, "skipped": skipped})


def plot(result: SweepResult, path: Path) -> None:
    """GB/s against the working set in bytes, log-log, one line per (kernel, cache), with
    the datasheet peak as the roofline and the cache capacities marked."""
    try:
        import matplotlib
    except ImportError:
        raise SystemExit(
            "sweep: --plot needs matplotlib, which is not installed; "
            "pip install 'pytest-gpuperf[plot]' (or drop --plot: the table and JSON need nothing)"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    figure, axes = plt.subplots(figsize=(9, 5.5))
    series: dict[tuple[str, str], list[SweepRow]] = {}
    for row in result.rows:
        series.setdefault((row.kernel, row.cache), []).append(row)
    for (kernel, cache), rows in sorted(series.items()):
        rows.sort(key=lambda r: r.bytes_moved)
        axes.plot(
            [r.bytes_moved for r in rows], [r.bandwidth_bps / 1e9 for r in rows],
            marker="o" if kernel == "copy" else "s", linestyle=LINE_STYLES.get(cache, "-"),
            markersize=4, label=f"{kernel} ({cache})",
        )  # fmt: skip
    peak_gbps = result.peak_bps / 1e9
    axes.axhline(peak_gbps, color="black", linestyle=":", linewidth=1.2)
    axes.annotate(
        f"roofline: {peak_gbps:.0f} GB/s (datasheet peak)", xy=(0.01, peak_gbps),
        xycoords=("axes fraction", "data"), xytext=(0, 4), textcoords="offset points", fontsize=8,
    )  # fmt: skip
    marks = [(result.l2_bytes, "L2")]
    if result.cache_bytes > result.l2_bytes:
        marks.append((result.cache_bytes, "L2 + last-level cache"))
    for capacity, label in marks:
        if capacity:
            axes.axvline(capacity, color="grey", linestyle="-.", linewidth=0.8)
            axes.annotate(
                f"{label} ({human_bytes(capacity)})", xy=(capacity, 0.5), rotation=90,
                xycoords=("data", "axes fraction"), fontsize=7, color="grey", xytext=(3, 0),
                textcoords="offset points",
            )  # fmt: skip
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.xaxis.set_major_formatter(
        matplotlib.ticker.FuncFormatter(lambda value, _: human_bytes(value) if value >= 1 else "")
    )
    axes.set_xlabel("working set per launch, bytes (read + written)")
    axes.set_ylabel("bandwidth, GB/s (declared bytes / median time)")
    simulated = "SIMULATED " if result.simulated else ""
    axes.set_title(
        f"{simulated}{result.device_name} [{result.device_key}, {result.backend}] — "
        f"bandwidth sweep, {result.date}",
        fontsize=10,
    )
    axes.grid(True, which="both", alpha=0.25)
    axes.legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)


# -- the command line ------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    # fmt: off
    add("--backend", default="cuda", choices=BACKENDS)
    add("--device", help="device key (sim: the model, default mi300x; GPU: override the match)")
    add("--kernels", default="copy,vector_add", help="default: copy,vector_add")
    add("--cache", default="hot,cold", help="cache modes, comma-separated (default: hot,cold)")
    add("--min-bytes", default="4K", help="smallest buffer (default 4K)")
    add("--max-bytes", default="2G", help="largest buffer (default 2G)")
    add("--budget", type=float, default=300.0,
        help="wall seconds for the whole sweep; later sizes are skipped and listed (default 300)")
    add("--measure-budget", type=float, default=0.5,
        help="sampling budget per measurement in seconds, MeasureSettings.budget_s (default 0.5)")
    add("--seed", type=int, help="simulated device seed (default: random)")
    add("--out", help="write the rows as JSON to this path")
    add("--plot", help="write the plot to this .png or .svg path (matplotlib)")
    add("--markdown", help="write the table into this Markdown file's section")
    add("--from-json", metavar="PATH",
        help="do not measure: print, plot and write the result of an earlier --out file")
    # fmt: on
    options = parser.parse_args(argv)

    kernels = [k.strip() for k in options.kernels.split(",") if k.strip()]
    unknown = [k for k in kernels if k not in KERNELS]
    if unknown or not kernels:
        parser.error(f"--kernels: choose from {', '.join(KERNELS)}, got {options.kernels!r}")
    caches = [c.strip() for c in options.cache.split(",") if c.strip()]
    if not caches or any(c not in ("cold", "hot", "rotate") for c in caches):
        parser.error(f"--cache: choose from cold, hot, rotate, got {options.cache!r}")
    if options.plot and Path(options.plot).suffix.lower() not in (".png", ".svg"):
        parser.error(f"--plot must end in .png or .svg, got {options.plot!r}")
    try:
        sizes = sizes_between(parse_bytes(options.min_bytes), parse_bytes(options.max_bytes))
    except ValueError as problem:
        parser.error(str(problem))

    if options.from_json:
        result = from_json(read_run(options.from_json))
    else:
        seed = {} if options.seed is None else {"seed": options.seed}
        device = open_device(options.backend, options.device, **seed)
        try:
            result = run_sweep(
                device.backend, device.spec, kernels=kernels, caches=caches, sizes=sizes,
                measure_budget_s=options.measure_budget, wall_budget_s=options.budget,
            )  # fmt: skip
        finally:
            device.close()
        arguments = argv if argv is not None else sys.argv[1:]
        result = replace(result, command=" ".join(["python bench/sweep.py", *arguments]))
    print(render_text(result))
    if options.out:
        write_json(options.out, to_json(result))
    if options.plot:
        plot(result, Path(options.plot))
        print(f"plot: {options.plot}")
    if options.markdown:
        section = f"sweep-{result.backend}-{result.device_key}"
        replace_section(Path(options.markdown), section, render_markdown(result))
    return 0 if result.rows else 1


if __name__ == "__main__":
    sys.exit(main())
