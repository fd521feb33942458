"""The measurement engine: cache modes, a queue kept ahead of the host, adaptive sampling.

A plain library function in the spirit of `triton.testing.do_bench`: give it a backend, a
kernel with its launch configuration and arguments, the bytes it must move and the device
spec; it returns a `Measurement` (median kernel time, its confidence interval, how sampling
stopped, clocks, and optionally an in-run calibration against a reference copy kernel).
`measure_pair` times two builds of one kernel (head and base) interleaved on the same buffers
for an A/B comparison. docs/measurement.md explains every choice.

Three rules shape the code:
- cold caches are made by READING a scratch buffer >= 2x all caches before every timed
  launch (a write/memset flush leaves dirty lines the kernel then pays to write back: -3% at
  400 MB on an H100);
- an event pair around a launch on an idle device times the host's launch latency (5.8 us
  for an empty kernel on an H100), so no timed launch may find the device idle: timing.py
  keeps the queue ahead (a spin kernel per batch, a host-side account of the device's busy
  time that drops any sample whose launch may have found the queue empty);
- samples are enqueued a batch at a time and read after one synchronisation, so the host
  never waits per sample.

`release(backend)` frees what the engine caches per backend (scratch buffer, sink).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from pytest_gpuperf import clocks as clock_readings
from pytest_gpuperf import stats
from pytest_gpuperf.errors import ConfigError, GpuPerfError
from pytest_gpuperf.gate.policy import DEFAULT_COMPARE_LOADS
from pytest_gpuperf.results import CACHE_MODES, GpuIdentity, Measurement, PairedComparison
from pytest_gpuperf.runtime.base import Backend, DeviceBuffer, Kernel, Module, as_dim3
from pytest_gpuperf.timing import (
    FLUSH_ELEMENT_BYTES,
    INTERNAL_BLOCK,
    LOWER_BOUND_FRACTION,
    Batch,
    Pacing,
    Timed,
    blocks_for,
    engine_for,
    release,
    round_up,
    run_batch,
)

# hot/rotate: launches per event pair so that one pair lasts at least this long; the event
# resolution (~0.5 us) and the gap between back-to-back launches then stay below 1%.
PAIR_TARGET_S = 100e-6
MAX_LAUNCHES_PER_PAIR = 256
WARMUP_BATCH_SAMPLES = 5
WARMUP_TOLERANCE = 0.02  # warm-up ends when two batch medians agree within 2%
MIN_WARMUP_S = 0.01  # and at least this long (clock ramp, first-touch page faults)
MAX_ROTATION_MEMORY_FRACTION = 0.5
# Each rotation copy is its own allocation (the Backend interface has no sub-buffer views),
# so a working set far below the caches would need thousands of allocations: refused.
MAX_ROTATION_COPIES = 1024
# An A/B pair loads each side this many times by default (gate.policy.DEFAULT_COMPARE_LOADS).
DEFAULT_PAIR_LOADS = DEFAULT_COMPARE_LOADS
# A decision needs at least this many pairs on every load.
MIN_PAIRS_PER_LOAD = 3
# A callable whose event pairs take no longer than a pair around nothing plus this queued no
# GPU work (on the H100 an empty pair reads ~0.002 us, the smallest kernel ~1 us).
NO_WORK_MARGIN_S = 0.3e-6


@dataclass(frozen=True)
class MeasureSettings:
    """How to measure; the defaults are the documented ones (docs/measurement.md).

    cache: "cold" (clean read-eviction before every timed launch), "hot" (same buffers back
      to back after warm-up) or "rotate" (N copies of every buffer, each launch on the next).
    target_rel_ci: stop once the confidence interval's half-width of the median is within
      this fraction of it (0.005 = +-0.5%).
    budget_s: wall-clock budget of the sampling phase; warm-up has its own bound, warmup_s.
    reallocation_rounds: independent placements of the buffers (the caller's + fresh copies)
      that successive samples alternate between, so no one physical placement decides.
    calibrate: also time the reference copy kernel at the same working set and cache mode,
      interleaved with the kernel, and report efficiency relative to it (cancels drift that
      is common to the whole device; docs/measurement.md shows when that helps).
    graphs: in hot mode, on a backend with graphs (CUDA), time a graph replay of the launches
      of each event pair instead of separate stream launches, which leave a ~1 us gap
      between kernels on an H100 (docs/benchmarks.md); kernels only, never callables.
    """

    cache: str = "cold"
    target_rel_ci: float = 0.005
    confidence: float = 0.95
    min_samples: int = 10
    max_samples: int = 2000
    budget_s: float = 1.0
    warmup_s: float = 0.2
    reallocation_rounds: int = 1
    calibrate: bool = False
    graphs: bool = True

    def __post_init__(self) -> None:
        if self.cache not in CACHE_MODES:
            raise ConfigError(
                f"cache={self.cache!r} is not a cache mode; choose one of {', '.join(CACHE_MODES)}"
            )
        checks = [
            (0 < self.target_rel_ci < 1, "target_rel_ci must be in (0, 1), e.g. 0.005"),
            (0 < self.confidence < 1, "confidence must be in (0, 1), e.g. 0.95"),
            (self.min_samples >= 3, "min_samples must be at least 3"),
            (self.max_samples >= self.min_samples, "max_samples must be >= min_samples"),
            (self.budget_s > 0, "budget_s must be positive"),
            (self.warmup_s >= 0, "warmup_s must be >= 0"),
            (self.reallocation_rounds >= 1, "reallocation_rounds must be >= 1"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(f"MeasureSettings: {message} (got {self})")


def scratch_bytes_for(cache_bytes: int) -> int:
    """Size of the cold-mode eviction buffer: twice all caches, in whole 16-byte elements."""
    return round_up(max(2 * cache_bytes, FLUSH_ELEMENT_BYTES), FLUSH_ELEMENT_BYTES)


def rotation_copies_for(working_set_bytes: int, cache_bytes: int) -> int:
    """N such that N copies of the working set cover at least twice all caches."""
    return max(1, math.ceil(2 * cache_bytes / max(working_set_bytes, 1)))


def launches_per_pair(kernel_time_s: float, cache: str, setup: bool = False) -> int:
    """Launches between one event pair: 1 in cold mode (a flush precedes every launch) and
    with a per-launch setup (it runs between launches, outside the pair), else enough for the
    pair to last PAIR_TARGET_S."""
    if cache == "cold" or setup or kernel_time_s <= 0:
        return 1
    return int(min(MAX_LAUNCHES_PER_PAIR, max(1, math.ceil(PAIR_TARGET_S / kernel_time_s))))


def queue_method_for(cache: str, launches: int, graph: bool = False, setup: bool = False) -> str:
    """The words Measurement.queue_method uses for how the queue was kept ahead."""
    reset = " + setup before every timed launch" if setup else ""
    if cache == "cold":
        return "flush-ahead: spin per batch + read-flush before every timed launch" + reset
    per_pair = "1 launch" if launches == 1 else f"{launches} launches"
    if setup:
        return f"spin-ahead: spin per batch + {per_pair} per event pair{reset}"
    if graph:
        return f"graph-replay: spin per batch + a graph of {per_pair} per event pair"
    return f"spin-ahead: spin per batch + {per_pair} per event pair"


__all__ = [
    "DEFAULT_PAIR_LOADS",
    "MeasureSettings",
    "launches_per_pair",
    "measure_callable",
    "measure_kernel",
    "measure_pair",
    "queue_method_for",
    "release",
    "rotation_copies_for",
    "scratch_bytes_for",
]


# -- the public functions ----------------------------------------------------------------


def measure_kernel(
    backend: Backend,
    kernel: Kernel,
    *,
    grid: int | Sequence[int],
    block: int | Sequence[int],
    args: Sequence[Any],
    bytes_moved: int,
    device: Any,
    settings: MeasureSettings = MeasureSettings(),
    name: str | None = None,
    shared_bytes: int = 0,
    setup: Callable[[], None] | None = None,
) -> Measurement:
    """Time `kernel` in the settings' cache mode; the caller's buffers end with its output.

    `device` is the devices.DeviceSpec (peak bandwidth, cache sizes). `args` holds
    DeviceBuffer objects and numbers, in signature order. `setup()`, when given, runs before
    every launch, outside the timed interval: it must only enqueue device work (a fill, a
    copy, a reset kernel) on the default stream, e.g. to zero an accumulator; each event pair
    then holds one launch and hot mode replays no graph.
    """
    launch, args, buffers, label = _kernel_launch(backend, kernel, grid, block, args, shared_bytes)
    label = name or label
    _check_rotate(settings, buffers, label)
    session = _Session(backend, device, settings, label)
    try:
        copies = _copies_needed(settings, buffers, bytes_moved, session, label)
        placements = session.placements(args, buffers, copies)
        work = Timed(label, launch, placements, bytes_moved, launch_on=launch, setup=setup)
        measurement = session.run(
            [work],
            kernel_name=kernel.name,
            extra_fields=_kernel_fields(
                backend, kernel, grid, block, shared_bytes, copies, settings
            ),
        )[0]
        if settings.cache == "rotate" or settings.reallocation_rounds > 1:
            if setup is not None:
                setup()
            launch(args)  # untimed: the real output lands in the caller's own buffers
        backend.synchronize()
        # The backend works out the occupancy of a launch shape at its first launch, which
        # came after extra_fields was built: read the resources again.
        return replace(measurement, resources=kernel.resources)
    finally:
        session.close()


def measure_pair(
    backend: Backend,
    head: Kernel,
    base: Kernel,
    *,
    grid: int | Sequence[int],
    block: int | Sequence[int],
    args: Sequence[Any],
    bytes_moved: int,
    device: Any,
    settings: MeasureSettings = MeasureSettings(),
    name: str | None = None,
    shared_bytes: int = 0,
    setup: Callable[[], None] | None = None,
    stop_when: Callable[[tuple[float, float], float], bool] | None = None,
    seed: int = 0,
    loads: int = DEFAULT_PAIR_LOADS,
) -> PairedComparison:
    """Time two builds of one kernel (head and base) interleaved, for an A/B comparison.

    Same buffers, launch configuration, cache mode and flush for both; every sample slot runs
    one head and one base sample back to back, in an order drawn at random per slot (seeded
    by `seed`), so slow drift of the device, and the placement of the buffers, are shared by
    the two sides of every pair. Each side is loaded `loads` times (Backend.load_again: the
    same code object, separate modules) and successive slots take successive loads, so the
    comparison's interval carries the drift between loads as measured in this run
    (stats.nested_trimmed_mean). The statistic is the trimmed mean of the pairs' log time
    ratios, which resolves below the event timer's step (docs/measurement.md). Sampling stops
    once the head's median is within the target interval and `stop_when(ratio_ci,
    base_time_s)` says the comparison is decided (the gate's rule, at `settings.confidence`),
    or at the budget, which covers both kernels. The caller's buffers end with head's output.
    """
    if not isinstance(loads, int) or loads < 1:
        raise ConfigError(f"loads must be a whole number of module loads >= 1, got {loads!r}")
    _, args, buffers, label = _kernel_launch(backend, head, grid, block, args, shared_bytes)
    label = name or label
    _check_rotate(settings, buffers, label)
    session = _Session(backend, device, settings, label)
    extra_loads: list[Module] = []
    try:
        sides = []
        for kernel in (head, base):
            again = [backend.load_again(kernel.module) for _ in range(loads - 1)]
            extra_loads += again
            sides.append([kernel, *(module.kernel(kernel.name) for module in again)])
        launch_head, launch_base = (
            _loaded_launch(backend, kernels, grid, block, shared_bytes) for kernels in sides
        )
        for load in range(loads):  # first launches (lazy function loading) stay untimed
            for launch in (launch_head, launch_base):
                if setup is not None:
                    setup()
                launch((load, *args))
        backend.synchronize()
        copies = _copies_needed(settings, buffers, bytes_moved, session, label)
        # Placement p runs load p % loads: slot s of a batch takes placement s, so the slots
        # go round the loads, both sides of a slot on the same load number.
        placements = [
            [(load, *copy) for copy in copies_of_round]
            for copies_of_round in session.placements(args, buffers, copies)
            for load in range(loads)
        ]
        cursor = [0]  # shared: successive launches of either side take successive copies
        works = [
            Timed(
                label, launch, placements, bytes_moved, launch_on=launch, setup=setup, cursor=cursor
            )
            for launch in (launch_head, launch_base)
        ]
        fields = _kernel_fields(backend, head, grid, block, shared_bytes, copies, settings)
        base_fields = {**fields, "fingerprint": backend.kernel_fingerprint(base)}
        head_m, base_m = session.run(
            works,
            kernel_name=head.name,
            extra_fields=fields,
            pair=_Pairing(np.random.default_rng(seed), stop_when, loads, len(placements)),
            per_item_fields=[{}, base_fields],
        )
        # Untimed: head's output lands in the caller's own buffers (the last timed launch may
        # have been base's).
        if setup is not None:
            setup()
        launch_head((0, *args))
        backend.synchronize()
        pairing = session.pairing
        assert pairing is not None
        found = pairing.estimate()
        return PairedComparison(
            head=replace(head_m, resources=head.resources),
            base=replace(base_m, resources=base.resources),
            ratio=found.ratio,
            ratio_ci=found.ratio_interval(settings.confidence),
            pairs=found.pairs,
            confidence=settings.confidence,
            stopped_by=head_m.stopped_by,
            loads=loads,
            pair_loads=tuple(pairing.loads_of_pairs),
            log_ratio=found.estimate,
            log_ratio_se=found.se,
            df=found.df,
            within_se=found.within_se,
            drift=stats.per_side_drift(found.between_sd),
            drift_basis=found.basis,
            median_ratio=float(np.median(pairing.ratios)),
        )
    finally:
        session.close()
        for module in extra_loads:
            with contextlib.suppress(GpuPerfError):
                backend.unload(module)


def _kernel_launch(
    backend: Backend,
    kernel: Kernel,
    grid: int | Sequence[int],
    block: int | Sequence[int],
    args: Sequence[Any],
    shared_bytes: int,
) -> tuple[Callable[..., None], tuple, list[DeviceBuffer], str]:
    grid3, block3 = as_dim3(grid, "grid"), as_dim3(block, "block")

    def launch(call_args: tuple, stream: Any = None) -> None:
        backend.launch(kernel, grid3, block3, call_args, shared_bytes=shared_bytes, stream=stream)

    call_args = tuple(args)
    return launch, call_args, _distinct_buffers(call_args), kernel.name


def _loaded_launch(
    backend: Backend,
    kernels: Sequence[Kernel],
    grid: int | Sequence[int],
    block: int | Sequence[int],
    shared_bytes: int,
) -> Callable[..., None]:
    """A launch of one side of an A/B pair whose arguments start with the load to use."""
    grid3, block3 = as_dim3(grid, "grid"), as_dim3(block, "block")

    def launch(call_args: tuple, stream: Any = None) -> None:
        load, *rest = call_args
        backend.launch(
            kernels[load], grid3, block3, tuple(rest), shared_bytes=shared_bytes, stream=stream
        )

    return launch


def _kernel_fields(
    backend: Backend,
    kernel: Kernel,
    grid: int | Sequence[int],
    block: int | Sequence[int],
    shared_bytes: int,
    copies: int,
    settings: MeasureSettings,
) -> dict[str, Any]:
    return {
        "resources": kernel.resources,
        "grid": as_dim3(grid, "grid"),
        "block": as_dim3(block, "block"),
        "shared_bytes": shared_bytes,
        "rotation_copies": copies if settings.cache == "rotate" else 0,
        "fingerprint": backend.kernel_fingerprint(kernel),
    }


def _check_rotate(settings: MeasureSettings, buffers: list[DeviceBuffer], label: str) -> None:
    if settings.cache == "rotate" and not buffers:
        raise ConfigError(
            f"{label}: cache='rotate' rotates copies of the kernel's buffer arguments, and "
            "this launch has none; use cache='cold'"
        )


def measure_callable(
    backend: Backend,
    fn: Callable[[], Any],
    *,
    bytes_moved: int,
    device: Any,
    settings: MeasureSettings = MeasureSettings(),
    name: str | None = None,
    setup: Callable[[], None] | None = None,
) -> Measurement:
    """Time work that `fn()` launches on the default stream (PyTorch, Triton, CuPy, ...).

    The engine cannot copy buffers it does not see, so cache="rotate" is refused and
    reallocation_rounds has no effect; cold and hot work as for kernels. `setup()` runs
    before every timed call, untimed (see measure_kernel).
    """
    label = name or str(getattr(fn, "__name__", "callable"))
    if settings.cache == "rotate":
        raise ConfigError(
            f"{label}: cache='rotate' needs the buffers to copy, which a callable hides; "
            "use cache='cold', or measure_kernel with the kernel and its arguments"
        )
    session = _Session(backend, device, settings, label)
    try:
        work = Timed(label, lambda _args: fn(), [[()]], bytes_moved, setup=setup)
        session.check_queues_work(work)
        return session.run([work], kernel_name=label, extra_fields={})[0]
    finally:
        session.close()


@dataclass
class _Pairing:
    """The state of an A/B measurement: slot order, the ratios so far and the load each
    pair ran on, the stopping rule."""

    rng: np.random.Generator
    stop_when: Callable[[tuple[float, float], float], bool] | None
    loads: int = 1
    placements: int = 1
    ratios: list[float] = field(default_factory=list)
    head_s: list[float] = field(default_factory=list)
    base_s: list[float] = field(default_factory=list)
    loads_of_pairs: list[int] = field(default_factory=list)
    orders: list[tuple[int, int]] = field(default_factory=list)

    def estimate(self) -> stats.NestedEstimate:
        """The trimmed mean of the log ratios, nested over the loads."""
        return stats.nested_trimmed_mean(np.log(self.ratios), self.loads_of_pairs)

    def decidable(self, min_samples: int) -> bool:
        """Enough pairs to decide on: `min_samples`, and MIN_PAIRS_PER_LOAD on every load."""
        if len(self.ratios) < max(min_samples, 2):
            return False
        counts = np.bincount(self.loads_of_pairs, minlength=self.loads)
        return bool(counts.min() >= MIN_PAIRS_PER_LOAD)

    def plan(self, samples: int) -> None:
        self.orders = [(0, 1) if self.rng.random() < 0.5 else (1, 0) for _ in range(samples)]

    def order(self, slot: int) -> tuple[int, int]:
        return self.orders[slot]

    def take(self, batch: Batch) -> None:
        for slot, (head_s, base_s) in enumerate(batch.slots):
            if head_s is not None and base_s is not None:
                self.head_s.append(head_s)
                self.base_s.append(base_s)
                self.ratios.append(head_s / base_s)
                self.loads_of_pairs.append((slot % self.placements) % self.loads)


# -- the measurement session -------------------------------------------------------------


class _Session:
    """One measurement: owns the copies it allocates and frees them, whatever happens."""

    def __init__(self, backend: Backend, device: Any, settings: MeasureSettings, label: str):
        self.backend = backend
        self.device = device
        self.settings = settings
        self.label = label
        self.owned: list[DeviceBuffer] = []
        self.engine = engine_for(backend)
        self.cache_bytes = max(int(device.cache_bytes), int(backend.info.l2_bytes))
        self.cold = settings.cache == "cold"
        self.clock: Callable[[], float] = backend.host_clock
        self.timed: list[Timed] = []
        self.pairing: _Pairing | None = None

    def close(self) -> None:
        """Free the copies and graphs; a device that already failed must not hide the error
        that is propagating behind a cleanup error (the success path synchronised already)."""
        with contextlib.suppress(GpuPerfError):
            self.backend.synchronize()
        for item in self.timed:
            with contextlib.suppress(GpuPerfError):
                item.free_graphs(self.backend)
        for buffer in self.owned:
            if not buffer.freed:
                with contextlib.suppress(GpuPerfError):
                    buffer.free()
        self.owned.clear()

    def _copy_of(self, buffer: DeviceBuffer) -> DeviceBuffer:
        clone = self.backend.alloc(buffer.nbytes)
        self.owned.append(clone)
        self.backend.copy(clone, buffer)
        return clone

    def placements(
        self, args: tuple, buffers: list[DeviceBuffer], copies: int
    ) -> list[list[tuple]]:
        """Argument tuples per placement and copy; the caller's own buffers are copy 0 of
        placement 0, every other copy is a fresh allocation initialised from them."""
        result = []
        for round_index in range(self.settings.reallocation_rounds):
            sets = []
            for copy_index in range(copies):
                if round_index == 0 and copy_index == 0:
                    sets.append(args)
                    continue
                clones = {id(b): self._copy_of(b) for b in buffers}
                sets.append(tuple(clones.get(id(a), a) if _is_buffer(a) else a for a in args))
            result.append(sets)
        return result

    def check_queues_work(self, work: Timed) -> None:
        """Refuse a callable that queues no GPU work where it is timed: its event pairs would
        time nothing, and its 'efficiency' would be thousands of percent. Compared with an
        event pair around nothing, a real launch takes at least NO_WORK_MARGIN_S more."""
        nothing = Timed("nothing", lambda _args: None, [[()]], 1)
        work.launch_next(0)  # first call: lazy compiles and module loads stay out of it
        self.backend.synchronize()
        batch = run_batch(
            self.engine, [work, nothing], 5, cold=False, spin_s=2e-3, clock=self.clock
        )
        timed, empty = batch.samples_s
        if not timed or not empty:
            return  # the queue starved: no verdict from this probe
        if min(timed) <= float(np.median(empty)) + NO_WORK_MARGIN_S:
            raise ConfigError(
                f"{self.label}: the callable queued no GPU work on the stream being timed "
                f"(its event pairs took {min(timed) * 1e6:.3f} us, as long as a pair around "
                "nothing): gpu_bench.run(fn) times what fn launches on the default stream. "
                "Launch the work there (PyTorch: the current stream; CuPy: the null stream), "
                "or measure the kernel with gpu_bench(kernel, ...)"
            )

    def reference(self, bytes_moved: int) -> Timed:
        """The calibration workload: gpuperf_copy_ref moving the same bytes in the same
        cache mode (half read, half written), with its own rotation when rotating."""
        half_bytes = round_up(max(bytes_moved // 2, FLUSH_ELEMENT_BYTES), FLUSH_ELEMENT_BYTES)
        count = half_bytes // FLUSH_ELEMENT_BYTES
        source = self.backend.alloc(half_bytes)
        target = self.backend.alloc(half_bytes)
        self.owned += [source, target]
        self.backend.fill(source, 1)
        args = (source, target, count)
        copies = 1
        if self.settings.cache == "rotate":
            copies = rotation_copies_for(2 * half_bytes, self.cache_bytes)
        placements = self.placements(args, [source, target], copies)
        engine, grid = self.engine, blocks_for(count)

        def launch(call_args: tuple, stream: Any = None) -> None:
            self.backend.launch(engine.copy_ref, grid, INTERNAL_BLOCK, call_args, stream=stream)

        return Timed("gpuperf_copy_ref", launch, placements, 2 * half_bytes, launch_on=launch)

    def run(
        self,
        timed: list[Timed],
        *,
        kernel_name: str,
        extra_fields: dict,
        pair: _Pairing | None = None,
        per_item_fields: list[dict] | None = None,
    ) -> list[Measurement]:
        """Measure the workloads in `timed` interleaved: one Measurement each, for the user's
        workloads (the calibration reference is folded into the first one's fields)."""
        settings, backend, engine = self.settings, self.backend, self.engine
        began = self.clock()
        started_s = time.time()
        work = timed[0]
        _check_bytes(work.bytes_moved, self.label)
        if self.cold:
            engine.scratch_for(scratch_bytes_for(self.cache_bytes))
        user_count = len(timed)
        timed = self.timed = list(timed)
        self.pairing = pair
        if settings.calibrate and pair is None:
            timed.append(self.reference(work.bytes_moved))
        # First launches load modules and compile lazily (Triton); keep them out of timing.
        for item in timed:
            if item.setup is not None:
                item.setup()
            item.launch_next(0)
        backend.synchronize()
        self._probe(timed)
        if pair is not None:  # both sides get the same launches per event pair
            launches = max(item.launches for item in timed)
            for item in timed:
                item.launches = launches
        graphs = self._replays_graphs(timed)
        if graphs:
            self._capture_graphs(timed)
        pacing = Pacing(
            # A first guess of the host's cost per launch; measured from the first batch on.
            host_per_sample_s=sum(item.launches for item in timed) * 30e-6,
            device_per_sample_s=self._device_per_sample_s(timed),
        )
        warmup_launches = self._warm_up(timed, pacing)

        clocks_before: list = []
        sampling_began = self.clock()
        stopped_by, batches, starved = "", 0, 0
        wanted = settings.min_samples
        while not stopped_by:
            samples, spin_s = pacing.plan(min(wanted, settings.max_samples - len(work.samples_s)))
            batch_began = self.clock()
            batch = self._batch(
                timed,
                samples,
                spin_s,
                while_in_flight=(
                    (lambda: clocks_before.append(clock_readings.read_clocks(backend)))
                    if batches == 0
                    else None
                ),
            )
            batches += 1
            starved += batch.starved
            if pair is not None:
                pair.take(batch)
            else:
                for item, accepted in zip(timed, batch.samples_s, strict=True):
                    item.samples_s.extend(accepted)
            pacing.observe(batch, samples, spin_s)
            pacing.device_per_sample_s = self._device_per_sample_s(timed)
            now = self.clock()
            stopped_by = self._stop_reason(timed, now - sampling_began)
            # Double the batch, but not past what the remaining budget can pay for.
            per_sample_wall_s = (now - batch_began) / samples
            affordable = (settings.budget_s - (now - sampling_began)) / per_sample_wall_s
            wanted = max(1, min(2 * samples, int(affordable) + 1))
        clocks = clock_readings.merge(
            clocks_before[0] if clocks_before else None, clock_readings.read_clocks(backend)
        )
        extra: dict[str, Any] = {
            "starved_samples_dropped": starved,
            "batches": batches,
            "launches_per_sample": work.launches,
            "graph_replay": graphs,
            "scratch_bytes": engine.scratch.nbytes if self.cold and engine.scratch else 0,
            "reallocation_rounds": settings.reallocation_rounds,
        }
        if pair is not None:
            extra["paired_with"] = "base" if user_count == 2 else ""
        wall_s = self.clock() - began
        extra_fields = {**extra_fields, "started_s": started_s, "ended_s": time.time()}
        results = []
        for position in range(user_count):
            fields = {**extra_fields, **(per_item_fields[position] if per_item_fields else {})}
            results.append(
                self._measurement(
                    timed,
                    position,
                    kernel_name=kernel_name,
                    stopped_by=stopped_by,
                    warmup_launches=warmup_launches,
                    wall_s=wall_s,
                    clocks=clocks,
                    extra=dict(extra),
                    extra_fields=fields,
                    calibrated=settings.calibrate and pair is None and position == 0,
                )
            )
        return results

    def _batch(
        self,
        timed: list[Timed],
        samples: int,
        spin_s: float,
        *,
        while_in_flight: Callable[[], None] | None = None,
    ) -> Batch:
        """One batch; what it accepted is added to each workload's samples."""
        order = None
        if self.pairing is not None:
            self.pairing.plan(samples)
            order = self.pairing.order
        batch = run_batch(
            self.engine,
            timed,
            samples,
            cold=self.cold,
            spin_s=spin_s,
            clock=self.clock,
            while_in_flight=while_in_flight,
            order=order,
        )
        for item, accepted in zip(timed, batch.samples_s, strict=True):
            item.learn(accepted)
        return batch

    def _device_per_sample_s(self, timed: list[Timed]) -> float:
        """A lower bound of the device time one sample of every workload takes."""
        device_s = sum(item.launches * item.lower_bound_s for item in timed)
        if self.cold:
            device_s += len(timed) * self.engine.flush_lower_bound_s
        return device_s

    def _probe(self, timed: list[Timed]) -> None:
        """First estimate of each workload's time: a few launches, each with its own event
        pair, behind a spin long enough for the host to enqueue them all (the spin doubles
        until it is)."""
        spin_s = 1e-3
        for _ in range(8):
            batch = run_batch(
                self.engine,
                timed,
                3,
                cold=self.cold,
                spin_s=spin_s,
                clock=self.clock,
            )
            if not batch.starved:
                break
            spin_s = 2 * max(spin_s, batch.host_s)
        if self.cold and not self.engine.flush_lower_bound_s:
            self.engine.flush_lower_bound_s = LOWER_BOUND_FRACTION * self._flush_time_s()
        for item, accepted in zip(timed, batch.samples_s, strict=True):
            if accepted:
                item.launches = launches_per_pair(
                    min(accepted), self.settings.cache, item.setup is not None
                )
                item.lower_bound_s = LOWER_BOUND_FRACTION * min(accepted)

    def _replays_graphs(self, timed: list[Timed]) -> bool:
        return (
            self.settings.graphs
            and self.settings.cache == "hot"
            and self.backend.supports_graphs
            and all(item.launch_on is not None and item.setup is None for item in timed)
        )

    def _capture_graphs(self, timed: list[Timed]) -> None:
        """Capture each workload's event-pair launches as a graph, then probe the replays.
        The stream-launch time the probe saw includes the gap a replay removes, so the queue
        account's lower bounds are taken again from replays, and where a replay is faster
        the graph is captured again with more launches, so that a pair still lasts
        PAIR_TARGET_S and one replay's own overhead stays small against it."""
        for item in timed:
            item.capture_graphs(self.backend)
        batch = run_batch(self.engine, timed, 3, cold=False, spin_s=1e-3, clock=self.clock)
        wanted = []
        for item, accepted in zip(timed, batch.samples_s, strict=True):
            item.lower_bound_s = LOWER_BOUND_FRACTION * min(accepted) if accepted else 0.0
            launches = launches_per_pair(min(accepted), "hot") if accepted else item.launches
            wanted.append(max(launches, item.launches))
        if self.pairing is not None:  # both sides of a pair keep the same launches per pair
            wanted = [max(wanted)] * len(wanted)
        for item, launches in zip(timed, wanted, strict=True):
            if launches > item.launches:
                item.free_graphs(self.backend)
                item.launches = launches
                item.capture_graphs(self.backend)

    def _flush_time_s(self) -> float:
        """The flush kernel's own time, so the queue account can count on it."""
        engine, backend = self.engine, self.backend
        start, end = engine.event_pairs(1)[:2]
        engine.launch_spin(1e-3)
        backend.record_event(start)
        for _ in range(3):
            engine.launch_flush()
        backend.record_event(end)
        backend.synchronize()
        return backend.elapsed_s(start, end) / 3

    def _warm_up(self, timed: list[Timed], pacing: Pacing) -> int:
        """Run the real procedure until two batch medians agree (module load, clock ramp,
        first-touch page faults), bounded by settings.warmup_s; returns the launches spent."""
        began = self.clock()
        previous: float | None = None
        launches, batches = 0, 0
        while True:
            samples, spin_s = pacing.plan(WARMUP_BATCH_SAMPLES)
            batch = self._batch(timed, samples, spin_s)
            batches += 1
            launches += samples * timed[0].launches
            pacing.observe(batch, samples, spin_s)
            pacing.device_per_sample_s = self._device_per_sample_s(timed)
            elapsed_s = self.clock() - began
            if elapsed_s >= self.settings.warmup_s:
                return launches
            if not batch.samples_s[0]:
                continue
            median_s = float(np.median(batch.samples_s[0]))
            stable = (
                previous is not None and abs(median_s - previous) <= WARMUP_TOLERANCE * median_s
            )
            if stable and batches >= 2 and elapsed_s >= MIN_WARMUP_S:
                return launches
            previous = median_s

    def _stop_reason(self, timed: list[Timed], sampling_s: float) -> str:
        settings, pair = self.settings, self.pairing
        if pair is not None:
            precise = stats.precision_reached(
                pair.head_s, settings.target_rel_ci, settings.min_samples, settings.confidence
            )
            if pair.decidable(settings.min_samples) and precise:
                ratio_ci = pair.estimate().ratio_interval(settings.confidence)
                base_time_s = float(np.median(pair.base_s))
                if pair.stop_when is None or pair.stop_when(ratio_ci, base_time_s):
                    return "precision"
            if len(pair.ratios) >= settings.max_samples:
                return "max_samples"
        elif all(
            stats.precision_reached(
                item.samples_s, settings.target_rel_ci, settings.min_samples, settings.confidence
            )
            for item in timed
        ):
            return "precision"
        elif len(timed[0].samples_s) >= settings.max_samples:
            return "max_samples"
        if sampling_s >= settings.budget_s:
            return "budget"
        return ""

    def _measurement(
        self,
        timed: list[Timed],
        position: int,
        *,
        kernel_name: str,
        stopped_by: str,
        warmup_launches: int,
        wall_s: float,
        clocks: Any,
        extra: dict,
        extra_fields: dict,
        calibrated: bool = False,
    ) -> Measurement:
        work = timed[position]
        pair = self.pairing
        samples_s = (pair.head_s if position == 0 else pair.base_s) if pair else work.samples_s
        checked = [len(pair.ratios)] if pair else [len(item.samples_s) for item in timed]
        if min(checked) < 3:
            starved = extra["starved_samples_dropped"]
            way_out = (
                f"{starved} were dropped because the host could not keep the device queue "
                "ahead of so short a kernel: use cache='cold' (a flush runs before each "
                "launch) or a larger problem, or raise budget_s"
                if starved
                else "raise budget_s"
            )
            raise ConfigError(
                f"{self.label}: only {min(checked)} usable samples in "
                f"budget_s={self.settings.budget_s}; {way_out}"
            )
        if min(samples_s) <= 0.0:
            raise ConfigError(
                f"{self.label}: the timed work took no time on the device (events recorded "
                "back to back): the callable queued no GPU work on the stream being timed. "
                "gpu_bench.run(fn) times what fn launches on the default stream; launch the "
                "work there (or synchronously), or measure the kernel with gpu_bench(kernel, ...)"
            )
        summary = stats.summarize(samples_s, self.settings.confidence)
        peak_bps = float(self.device.peak_bps)
        efficiency = work.bytes_moved / summary.median / peak_bps
        reference_efficiency = calibrated_efficiency = None
        if calibrated and len(timed) > 1:
            reference = timed[-1]
            reference_time_s = float(np.median(reference.samples_s))
            reference_efficiency = reference.bytes_moved / reference_time_s / peak_bps
            calibrated_efficiency = efficiency / reference_efficiency
            extra["reference_samples_s"] = tuple(reference.samples_s)
            extra["reference_bytes_moved"] = reference.bytes_moved
        info = self.backend.info
        fields = {
            "gpu": GpuIdentity(info.index, info.pci_bus_id, info.uuid),
            "name": self.label,
            "kernel": kernel_name,
            "cache": self.settings.cache,
            "bytes_moved": work.bytes_moved,
            "time_s": summary.median,
            "time_ci_s": (summary.ci_low, summary.ci_high),
            "samples_s": tuple(samples_s),
            "peak_bps": peak_bps,
            "device_key": self.device.key,
            "device_name": self.device.name,
            "backend": info.backend,
            "simulated": info.simulated,
            "queue_method": queue_method_for(
                self.settings.cache, work.launches, bool(work.graphs), setup=work.setup is not None
            ),
            "warmup_count": warmup_launches,
            "stopped_by": stopped_by,
            "wall_s": wall_s,
            "calibrated_efficiency": calibrated_efficiency,
            "reference_efficiency": reference_efficiency,
            "clocks": clocks,
            "outliers": summary.outliers,
            "extra": extra,
        }
        fields.update(extra_fields)
        return Measurement(**fields)


# -- helpers -------------------------------------------------------------------------------


def _is_buffer(value: Any) -> bool:
    return isinstance(value, DeviceBuffer)


def _distinct_buffers(args: Sequence[Any]) -> list[DeviceBuffer]:
    """The buffer arguments, each once (a buffer passed twice is copied once)."""
    seen: dict[int, DeviceBuffer] = {}
    for value in args:
        if _is_buffer(value):
            seen.setdefault(id(value), value)
    return list(seen.values())


def _copies_needed(
    settings: MeasureSettings,
    buffers: list[DeviceBuffer],
    bytes_moved: int,
    session: _Session,
    label: str,
) -> int:
    """Rotation copies for this launch (1 outside rotate mode).

    The working set is the smaller of the buffers' total size and the declared bytes: a
    kernel that touches only part of a large buffer needs more copies, never fewer.
    """
    if settings.cache != "rotate":
        return 1
    _check_bytes(bytes_moved, label)
    buffer_bytes = sum(b.nbytes for b in buffers)
    working_set_bytes = min(buffer_bytes, bytes_moved)
    copies = rotation_copies_for(working_set_bytes, session.cache_bytes)
    if copies > MAX_ROTATION_COPIES:
        smallest = math.ceil(2 * session.cache_bytes / MAX_ROTATION_COPIES)
        raise ConfigError(
            f"{label}: cache='rotate' would need {copies} copies of its {working_set_bytes}-byte "
            f"working set to cover twice the {session.cache_bytes}-byte caches (at most "
            f"{MAX_ROTATION_COPIES}: rotate needs a working set of at least {smallest} bytes "
            "here); use cache='cold', which evicts with one scratch buffer instead"
        )
    extra_bytes = (copies * settings.reallocation_rounds - 1) * buffer_bytes
    if extra_bytes > MAX_ROTATION_MEMORY_FRACTION * session.backend.info.memory_bytes:
        raise ConfigError(
            f"{label}: cache='rotate' needs {copies} copies of {buffer_bytes} bytes of "
            f"buffers ({extra_bytes / 2**30:.1f} GiB), more than half the device memory; "
            "use cache='cold', which evicts with one scratch buffer instead"
        )
    return copies


def _check_bytes(bytes_moved: int, label: str) -> None:
    if not isinstance(bytes_moved, (int, np.integer)) or bytes_moved <= 0:
        raise ConfigError(
            f"{label}: bytes_moved must be a positive number of bytes (each input read once "
            f"+ each output written once), got {bytes_moved!r}"
        )
