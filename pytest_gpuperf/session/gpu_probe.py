"""The degraded-GPU probe: before pytest-xdist workers measure on several GPUs of one model,
time one streaming kernel on each and name a GPU that is clearly slower than its peers.

On an 8-GPU CI node, a GPU with a failing fan, a power cap or a degraded HBM stack makes every
test that lands on it look regressed. The probe runs once per run, in the pytest-xdist
controller, before any worker starts: each GPU in turn, under its GPU lock, runs the engine's
reference copy kernel (`gpuperf_copy_ref`, 16-byte loads and stores) over PROBE_PLACEMENTS
buffer pairs of half the caches each, each launch on the next pair so that none finds its data
in a cache, PROBE_LAUNCHES launches (pairs) per event pair, PROBE_REPEATS rounds. A GPU's
bandwidth is the geometric mean over the groups of pairs of each group's median time: where
one buffer landed in memory then decides little. A GPU more than `margin` below the median
of the others is degraded only when the interval says so: its ratio's 95% interval (its own
spread and its peers') lies wholly below 1 - margin. A GPU whose interval is wider than the
margin is probed again after a warm-up probe, and only the new probe counts (on a fresh
2xH200 host the first probe read 1959 and 1900 GB/s at +-37.7% and +-39.4%, every later one
3413-3456 GB/s at +-0.5-1.0%); when a ratio's interval straddles the line, every GPU is
probed once more and each one's two probes are pooled (tighter intervals). An interval that
still straddles the line is `undecided`, neither degraded nor healthy.

Nothing here imports pytest; plugin/collect.py decides when to probe and what to do with the result.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pytest_gpuperf.runtime.info import ClockReport

PROBE_PLACEMENTS = 32
PROBE_REPEATS = 5
PROBE_LAUNCHES = 8  # per event pair: the pair lasts many launches, its ends' cost vanishes
MIN_PROBE_BYTES = 4 * 2**20  # per buffer, for devices with small caches
SPIN_AHEAD_S = 2e-3  # the device starts busy, so the first pair does not time the host


@dataclass(frozen=True)
class GpuProbe:
    """One GPU's probe: its streaming bandwidth and, once compared, its ratio to its peers.

    `spread` is the 95% half-width of the bandwidth, relative, from the spread of the buffer
    pairs (the probe's own noise); `ratio` is bandwidth / median of the other GPUs'.
    """

    index: int
    name: str
    pci_bus_id: str | None
    uuid: str | None
    bandwidth_bps: float
    spread: float
    probe_s: float
    clocks: ClockReport | None = None
    ratio: float | None = None
    degraded: bool = False
    undecided: bool = False  # the ratio's interval straddles 1 - margin
    probes: int = 1  # how many probes it took (2: its first interval was wider than the margin)


@dataclass(frozen=True)
class ProbeReport:
    """What the probe found on the GPUs of one run; `skipped` says why nothing was compared."""

    backend: str = ""
    margin: float = 0.0
    gpus: tuple[GpuProbe, ...] = ()
    skipped: str = ""
    refused: tuple[int, ...] = ()  # GPU indices no worker measures on (--gpuperf-refuse-degraded)

    @property
    def degraded(self) -> tuple[GpuProbe, ...]:
        return tuple(gpu for gpu in self.gpus if gpu.degraded)

    @property
    def undecided(self) -> tuple[GpuProbe, ...]:
        return tuple(gpu for gpu in self.gpus if gpu.undecided)

    def for_index(self, index: int) -> GpuProbe | None:
        return next((gpu for gpu in self.gpus if gpu.index == index), None)

    def usable(self, count: int) -> tuple[int, ...]:
        """The GPU indices workers may measure on."""
        return tuple(i for i in range(count) if i not in self.refused)


def probe_bandwidth(backend: Any, cache_bytes: int) -> tuple[float, float]:
    """(bandwidth in bytes/s, its relative 95% half-width) of the reference copy on `backend`.

    The buffers are left as allocated (their contents do not change a copy's speed) and
    freed before returning, whatever happens."""
    from pytest_gpuperf.engine.policy import FLUSH_ELEMENT_BYTES, round_up
    from pytest_gpuperf.engine.timing import (
        INTERNAL_BLOCK,
        blocks_for,
        engine_for,
    )

    engine = engine_for(backend)
    half_bytes = round_up(max(cache_bytes // 2, MIN_PROBE_BYTES), FLUSH_ELEMENT_BYTES)
    count = half_bytes // FLUSH_ELEMENT_BYTES
    grid = blocks_for(count)
    owned = []
    try:
        pairs = []
        for _ in range(PROBE_PLACEMENTS):
            source, target = backend.alloc(half_bytes), backend.alloc(half_bytes)
            owned += [source, target]
            pairs.append((source, target, count))

        def copy(args: tuple) -> None:
            backend.launch(engine.copy_ref, grid, INTERNAL_BLOCK, args)

        for args in pairs:  # first touch and module load, untimed
            copy(args)
        backend.synchronize()
        engine.launch_spin(SPIN_AHEAD_S)
        # Each launch takes the next pair, so none finds its data in a cache; an event pair
        # spans PROBE_LAUNCHES pairs, always the same ones per group.
        groups = len(pairs) // PROBE_LAUNCHES
        recorded: list[tuple[int, Any, Any]] = []
        for _ in range(PROBE_REPEATS):
            for group in range(groups):
                start, end = backend.create_event(), backend.create_event()
                backend.record_event(start)
                for args in pairs[group * PROBE_LAUNCHES : (group + 1) * PROBE_LAUNCHES]:
                    copy(args)
                backend.record_event(end)
                recorded.append((group, start, end))
        backend.synchronize()
        times: list[list[float]] = [[] for _ in range(groups)]
        for group, start, end in recorded:
            times[group].append(backend.elapsed_s(start, end) / PROBE_LAUNCHES)
    finally:
        for buffer in owned:
            if not buffer.freed:
                buffer.free()
    logs = [math.log(2 * half_bytes / statistics.median(t)) for t in times]
    spread = 1.96 * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(statistics.fmean(logs)), spread


def compare(gpus: Sequence[GpuProbe], margin: float) -> tuple[GpuProbe, ...]:
    """Each GPU's ratio to the median of the others' bandwidth; degraded when the ratio's
    95% interval lies wholly below 1 - margin, undecided when it straddles that line. The
    interval combines the GPU's spread with the widest of its peers' (the median of the
    others is no better known than its noisiest member). With two GPUs only the slower one
    can be degraded."""
    result = []
    for gpu in gpus:
        others = [g for g in gpus if g is not gpu]
        if not others:
            result.append(gpu)
            continue
        ratio = gpu.bandwidth_bps / statistics.median(g.bandwidth_bps for g in others)
        half = math.hypot(gpu.spread, max(g.spread for g in others))
        line = 1 - margin
        degraded = margin > 0 and ratio * math.exp(half) < line
        undecided = margin > 0 and not degraded and ratio * math.exp(-half) < line
        result.append(replace(gpu, ratio=ratio, degraded=degraded, undecided=undecided))
    return tuple(result)


def pooled(first: GpuProbe, again: GpuProbe) -> GpuProbe:
    """Two probes of one GPU as one: the inverse-variance mean of their log bandwidths, with
    the interval that mean has (narrower than either)."""
    weights = [1 / max(g.spread, 1e-9) ** 2 for g in (first, again)]
    logs = [math.log(g.bandwidth_bps) for g in (first, again)]
    mean = sum(w * x for w, x in zip(weights, logs, strict=True)) / sum(weights)
    return replace(
        again,
        bandwidth_bps=math.exp(mean),
        spread=1 / math.sqrt(sum(weights)),
        probe_s=first.probe_s + again.probe_s,
        probes=first.probes + again.probes,
    )


def probe_gpus(
    backend_name: str,
    indices: Sequence[int],
    margin: float,
    *,
    open_gpu: Callable[[int], Any],
    cache_bytes_of: Callable[[Any], int],
    hold: Callable[[Any], Any],
    refuse: bool = False,
) -> ProbeReport:
    """Probe the GPUs `indices` of one backend in turn and compare them.

    `open_gpu(index)` opens a backend, `cache_bytes_of(backend)` the caches to rotate past,
    `hold(backend)` a context manager holding that GPU's lock. GPUs of different models are
    not compared (a mixed node has no peers to compare with). Under `refuse`, degraded GPUs
    are refused; the fastest GPU never is (it is at least as fast as the median of the others),
    so a healthy one is always left."""
    from pytest_gpuperf.engine import clocks as clock_readings

    def probe_one(index: int, *, warm_up: bool) -> GpuProbe:
        backend = open_gpu(index)
        try:
            began = time.perf_counter()
            with hold(backend):
                if warm_up:  # clocks, memory and the module settle; this probe is discarded
                    probe_bandwidth(backend, cache_bytes_of(backend))
                bandwidth_bps, spread = probe_bandwidth(backend, cache_bytes_of(backend))
                clocks = clock_readings.read_clocks(backend)
            info = backend.info
            return GpuProbe(
                index=index,
                name=info.name,
                pci_bus_id=info.pci_bus_id,
                uuid=info.uuid,
                bandwidth_bps=bandwidth_bps,
                spread=spread,
                probe_s=time.perf_counter() - began,
                clocks=clocks,
                probes=2 if warm_up else 1,
            )
        finally:
            from pytest_gpuperf.engine import measure

            measure.release(backend)
            backend.close()

    found = [probe_one(index, warm_up=False) for index in indices]
    if len(found) > 1 and margin > 0:
        found = [
            probe_one(gpu.index, warm_up=True) if gpu.spread > margin else gpu for gpu in found
        ]
        if any(gpu.undecided for gpu in compare(found, margin)):  # its peers' spread counts
            found = [pooled(gpu, probe_one(gpu.index, warm_up=False)) for gpu in found]
    names = {gpu.name for gpu in found}
    if len(names) > 1:
        return ProbeReport(
            backend_name,
            margin,
            tuple(found),
            skipped=f"GPUs of different models ({', '.join(sorted(names))}) are not compared",
        )
    compared = compare(found, margin)
    refused = tuple(gpu.index for gpu in compared if gpu.degraded) if refuse else ()
    return ProbeReport(backend_name, margin, compared, refused=refused)
