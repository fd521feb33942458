"""Timing batches of launches with event pairs, never on a starved queue.

The mechanism under the measurement engine (measure.py holds the policy: cache modes,
placements, warm-up, stopping). An event pair around a launch on an idle device times the
host's launch latency (5.8 us for an empty kernel on an H100, docs/measurement.md), so every
timed launch must be submitted while the device is still busy with earlier work:

- each batch starts with `gpuperf_spin`, long enough for the host to enqueue the batch;
- `QueueAccount` keeps a host-side lower bound of when the device runs dry, and a sample
  whose launch was submitted after that moment is dropped, never kept;
- `Pacing` sizes the next spin and batch from what the host and device showed;
- `run_batch` enqueues every sample of a batch and synchronises once, so the host never
  waits per sample.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_gpuperf.engine.policy import FLUSH_ELEMENT_BYTES
from pytest_gpuperf.runtime.base import Backend, DeviceBuffer, Kernel
from pytest_gpuperf.runtime.compile import KERNELS_DIR

INTERNAL_SOURCE = "gpuperf_internal.hip"
INTERNAL_BLOCK = 256
SPIN_MIN_S = 20e-6
SPIN_MAX_S = 20e-3
MAX_BATCH_DEVICE_S = 0.05  # so the budget and precision are checked often enough
# A timed kernel is assumed to take at least this fraction of the fastest time seen so far
# when the host works out whether the device could have run dry before a launch.
LOWER_BOUND_FRACTION = 0.8


# -- per-backend engine state ------------------------------------------------------------


@dataclass(eq=False)
class Engine:
    """What the engine keeps per backend: internal kernels, scratch buffer, event pool."""

    backend: Backend
    flush: Kernel
    spin: Kernel
    copy_ref: Kernel
    sink: DeviceBuffer
    scratch: DeviceBuffer | None = None
    flush_lower_bound_s: float = 0.0
    events: list = field(default_factory=list)

    def scratch_for(self, wanted: int) -> DeviceBuffer:
        """The cached eviction buffer, grown to `wanted` bytes (zeros: gpuperf_flush relies
        on them to never store)."""
        if self.scratch is None or self.scratch.nbytes < wanted:
            if self.scratch is not None:
                self.scratch.free()
            self.scratch = self.backend.alloc(wanted)
            self.backend.fill(self.scratch, 0)
            self.flush_lower_bound_s = 0.0
        return self.scratch

    def event_pairs(self, count: int) -> list:
        # The Backend interface has no destroy verb for events, so they are pooled and reused.
        while len(self.events) < 2 * count:
            self.events.append(self.backend.create_event())
        return self.events

    def launch_spin(self, spin_s: float) -> None:
        self.backend.launch(self.spin, 1, 1, (int(spin_s * 1e9),))

    def launch_flush(self, stream: Any = None) -> None:
        assert self.scratch is not None
        count = self.scratch.nbytes // FLUSH_ELEMENT_BYTES
        grid = blocks_for(count)
        args = (self.scratch, count, self.sink)
        self.backend.launch(self.flush, grid, INTERNAL_BLOCK, args, stream=stream)

    def release(self) -> None:
        for buffer in (self.scratch, self.sink):
            if buffer is not None and not buffer.freed:
                buffer.free()
        self.scratch = None


# Kept on the backend itself: the engine's kernels and buffers refer to the backend, so a
# weak-keyed table would keep every backend alive; this way both go together.
_ENGINE_ATTRIBUTE = "_gpuperf_timing_engine"


def engine_for(backend: Backend) -> Engine:
    """The backend's engine state, built (internal kernels compiled) on first use."""
    engine = getattr(backend, _ENGINE_ATTRIBUTE, None)
    if engine is None:
        module = backend.compile(KERNELS_DIR / INTERNAL_SOURCE)
        sink = backend.alloc(16)
        backend.fill(sink, 0)
        engine = Engine(
            backend,
            flush=module.kernel("gpuperf_flush"),
            spin=module.kernel("gpuperf_spin"),
            copy_ref=module.kernel("gpuperf_copy_ref"),
            sink=sink,
        )
        setattr(backend, _ENGINE_ATTRIBUTE, engine)
    return engine


def release(backend: Backend) -> None:
    """Free what the engine cached for `backend` (scratch buffer, sink); safe to call twice."""
    engine = vars(backend).pop(_ENGINE_ATTRIBUTE, None)
    if engine is not None:
        engine.release()


# -- what gets timed ---------------------------------------------------------------------


@dataclass(eq=False)
class Timed:
    """One workload being timed (the user's kernel or callable, or the reference copy).

    `placements[g][c]` are the launch arguments of copy c in placement g; sample s of a
    batch runs on placement s % len(placements), so every batch covers every placement
    equally, and each launch takes the next copy.
    """

    name: str
    launch: Callable[[tuple], None]
    placements: list[list[tuple]]
    bytes_moved: int
    launches: int = 1  # per event pair
    samples_s: list[float] = field(default_factory=list)
    lower_bound_s: float = 0.0
    # The next copy to launch on, in a list so that two workloads sharing buffers (head and
    # base of an A/B pair) can share it: successive launches of either take successive copies.
    cursor: list[int] = field(default_factory=lambda: [0])
    # `launch_on(args, stream)` launches on a given stream, which stream capture needs; None
    # for work the engine cannot capture (a callable launches where it likes).
    launch_on: Callable[[tuple, Any], None] | None = None
    graphs: list = field(default_factory=list)  # one per placement, when replaying graphs
    # Enqueues untimed device work before every timed launch (a reset of an accumulator).
    setup: Callable[[], None] | None = None
    # One setup per placement, where they differ (a callable pair's captures each reset
    # their own buffers); None: `setup` for every placement.
    setups: list[Callable[[], None]] | None = None
    # Timed as it runs (engine/host_waits.py): work that waits for the device itself cannot
    # be kept ahead of, so no spin goes in front of its batch and every sample is kept; its
    # event pair holds what a call costs a program, the host's waits included.
    as_it_runs: bool = False

    def setup_for(self, placement: int) -> Callable[[], None] | None:
        """The setup that runs before a timed launch on `placement`."""
        if self.setups:
            return self.setups[placement % len(self.setups)]
        return self.setup

    def launch_next(self, placement: int) -> None:
        self.launch(self.next_args(placement))

    def next_args(self, placement: int) -> tuple:
        """The arguments of the next launch on `placement` (its next copy)."""
        copies = self.placements[placement % len(self.placements)]
        args = copies[self.cursor[0] % len(copies)]
        self.cursor[0] += 1
        return args

    def capture_graphs(self, backend: Backend) -> None:
        """One graph per placement holding `launches` launches on its (single) copy, so an
        event pair times one replay: back-to-back launches without the gap that separate
        stream launches leave between kernels. Hot mode only: every launch of a replay
        uses the same buffers."""
        launch_on = self.launch_on
        assert launch_on is not None and all(len(c) == 1 for c in self.placements)

        def record(args: tuple, stream: Any) -> None:
            for _ in range(self.launches):
                launch_on(args, stream)

        for copies in self.placements:
            self.graphs.append(backend.capture_graph(functools.partial(record, copies[0])))

    def replay_next(self, backend: Backend, placement: int) -> None:
        backend.launch_graph(self.graphs[placement % len(self.graphs)])

    def free_graphs(self, backend: Backend) -> None:
        while self.graphs:
            backend.free_graph(self.graphs.pop())

    def learn(self, accepted_s: Sequence[float]) -> None:
        if accepted_s:
            fastest = min(accepted_s)
            lower = LOWER_BOUND_FRACTION * fastest
            self.lower_bound_s = lower if not self.lower_bound_s else min(self.lower_bound_s, lower)


@dataclass
class Batch:
    """What one batch produced: accepted samples per workload and what the host saw."""

    samples_s: list[list[float]]
    starved: int
    host_s: float  # wall time the host spent enqueueing (spin excluded)
    deficit_s: float  # summed lateness of timed launches that came after the device ran dry
    # Per sample slot, each workload's time (None where it was dropped as starved): the
    # workloads of one slot ran back to back, which paired comparisons rely on.
    slots: list[list[float | None]] = field(default_factory=list)


class QueueAccount:
    """A host-side lower bound of when the device finishes what was enqueued so far.

    A launch submitted before that time found the queue busy; one submitted after it may
    have found the device idle, and its event pair would time the host's launch latency.
    `deficit_s` sums how late the late launches were: a spin that much longer covers them.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.busy_until = 0.0
        self.deficit_s = 0.0

    def enqueue(
        self, submit: Callable[[], None], device_lower_bound_s: float, *, timed: bool = True
    ) -> bool:
        """Submit one operation; True when it certainly reached a busy device.

        Untimed operations (spin, flush) may find the device idle: that is their job.
        """
        before = self.clock()
        busy = self.busy_until
        submit()
        late_s = self.clock() - busy
        self.busy_until = max(busy, before) + device_lower_bound_s
        if late_s > 0 and timed:
            self.deficit_s += late_s
        return late_s <= 0


def run_batch(
    engine: Engine,
    timed: Sequence[Timed],
    samples: int,
    *,
    cold: bool,
    spin_s: float,
    clock: Callable[[], float],
    while_in_flight: Callable[[], None] | None = None,
    order: Callable[[int], Sequence[int]] | None = None,
) -> Batch:
    """Enqueue `samples` samples of every workload, interleaved, then synchronise once.

    `order(slot)` gives the order in which the workloads run in one sample slot (default:
    as listed); an A/B pair randomises it so neither side always runs first. Work timed as
    it runs (every workload's `as_it_runs`) gets no spin and keeps every sample.
    """
    backend = engine.backend
    events = engine.event_pairs(samples * len(timed))
    account = QueueAccount(clock)
    as_it_runs = all(work.as_it_runs for work in timed)
    if not as_it_runs:  # work that waits on the host would only wait for the spin
        account.enqueue(lambda: engine.launch_spin(spin_s), spin_s, timed=False)
    started = clock()
    pending: list[tuple[int, int, Any, Any, bool]] = []
    for placement in range(samples):
        for which in order(placement) if order else range(len(timed)):
            work = timed[which]
            # The setup before the flush: what it writes (an input copied back, a zeroed
            # output) is evicted with the rest, and the timed launch finds it in memory.
            before = work.setup_for(placement)
            if before is not None:
                account.enqueue(before, 0.0, timed=False)
            if cold:
                account.enqueue(engine.launch_flush, engine.flush_lower_bound_s, timed=False)
            start, end = events[2 * len(pending)], events[2 * len(pending) + 1]
            backend.record_event(start)
            if work.graphs:
                fed = account.enqueue(
                    functools.partial(work.replay_next, backend, placement),
                    work.launches * work.lower_bound_s,
                )
            else:
                fed = True
                for _ in range(work.launches):
                    fed &= account.enqueue(
                        functools.partial(work.launch_next, placement), work.lower_bound_s
                    )
            backend.record_event(end)
            pending.append((placement, which, start, end, fed or as_it_runs))
    host_s = clock() - started
    if while_in_flight is not None:
        while_in_flight()
    backend.synchronize()
    return _collect(backend, timed, samples, pending, host_s, account.deficit_s)


def _collect(
    backend: Backend,
    timed: Sequence[Timed],
    samples: int,
    pending: Sequence[tuple[int, int, Any, Any, bool]],
    host_s: float,
    deficit_s: float,
) -> Batch:
    """The batch's samples from its event pairs, (placement, workload, start, end, fed) each:
    per launch, and only where the launch found the queue busy (fed)."""
    accepted: list[list[float]] = [[] for _ in timed]
    slots: list[list[float | None]] = [[None] * len(timed) for _ in range(samples)]
    starved = 0
    for placement, which, start, end, fed in pending:
        if fed:
            sample_s = backend.elapsed_s(start, end) / timed[which].launches
            accepted[which].append(sample_s)
            slots[placement][which] = sample_s
        else:
            starved += 1
    return Batch(accepted, starved, host_s, deficit_s, slots)


def run_graph_batch(
    engine: Engine,
    timed: Sequence[Timed],
    samples: int,
    *,
    clock: Callable[[], float],
    while_in_flight: Callable[[], None] | None = None,
) -> Batch:
    """A cold batch captured as one graph and replayed once: for every sample of every
    workload the read-flush, an event, the launch and an event, all nodes of the graph.

    Cold samples launched one by one from the host scatter between processes by a level
    each process keeps (about 90 ns on an H100, outside the kernel's blocks); the same
    samples replayed as one graph scatter 2-3x less at 27 us (docs/measurement.md). The
    device runs the nodes back to back, so no sample can find the queue starved."""
    backend = engine.backend
    events = engine.event_pairs(samples * len(timed))
    pending: list[tuple[int, int, Any, Any, bool]] = []

    def record(stream: Any) -> None:
        for placement in range(samples):
            for which, work in enumerate(timed):
                assert work.launch_on is not None and work.launches == 1
                engine.launch_flush(stream)
                start, end = events[2 * len(pending)], events[2 * len(pending) + 1]
                backend.record_event_in_graph(start, stream)
                work.launch_on(work.next_args(placement), stream)
                backend.record_event_in_graph(end, stream)
                pending.append((placement, which, start, end, True))  # nodes are never starved

    started = clock()
    graph = backend.capture_graph(record)
    try:
        backend.launch_graph(graph)
        host_s = clock() - started
        if while_in_flight is not None:
            while_in_flight()
        backend.synchronize()
    finally:
        backend.free_graph(graph)
    return _collect(backend, timed, samples, pending, host_s, 0.0)


@dataclass
class Pacing:
    """Batch size and spin length, adapted from what the previous batches showed.

    The spin in front of a batch must last as long as the host needs to enqueue the batch,
    less the device time of what it has enqueued by then: 1.25 x (host - device time per
    sample) x samples. After a starved batch the spin grows by the measured deficit; when
    even the longest spin is not enough, batches get smaller.
    """

    host_per_sample_s: float
    device_per_sample_s: float
    boost_s: float = 0.0
    samples_cap: int = 1 << 30

    def plan(self, wanted_samples: int) -> tuple[int, float]:
        """(samples, spin_s) for the next batch."""
        per_sample_s = max(self.device_per_sample_s, 1e-9)
        samples = min(max(1, wanted_samples), self.samples_cap)
        samples = min(samples, max(1, int(MAX_BATCH_DEVICE_S / per_sample_s)))
        deficit_s = max(0.0, self.host_per_sample_s - self.device_per_sample_s)
        if deficit_s:
            samples = min(samples, max(1, int((SPIN_MAX_S - SPIN_MIN_S) / (1.25 * deficit_s))))
        spin_s = max(1.25 * deficit_s * samples + SPIN_MIN_S, self.boost_s)
        return samples, min(SPIN_MAX_S, spin_s)

    def observe(self, batch: Batch, samples: int, spin_s: float) -> None:
        self.host_per_sample_s = batch.host_s / max(samples, 1)
        if batch.starved:
            if spin_s >= SPIN_MAX_S:
                self.samples_cap = max(1, samples // 2)
            self.boost_s = min(SPIN_MAX_S, spin_s + 1.25 * batch.deficit_s)


def blocks_for(count: int) -> int:
    return max(1, math.ceil(count / INTERNAL_BLOCK))
