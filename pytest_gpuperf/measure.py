"""The measurement engine: cache modes, a queue kept ahead of the host, adaptive sampling.

A plain library function in the spirit of `triton.testing.do_bench`: give it a backend, a
kernel with its launch configuration and arguments, the bytes it must move and the device
spec; it returns a `Measurement` (median kernel time, its confidence interval, how sampling
stopped, clocks, and optionally an in-run calibration against a reference copy kernel).
docs/measurement.md explains every choice; DESIGN.md "Measurement" is the definition.

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
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from pytest_gpuperf import clocks as clock_readings
from pytest_gpuperf import stats
from pytest_gpuperf.errors import ConfigError, GpuPerfError
from pytest_gpuperf.results import CACHE_MODES, Measurement
from pytest_gpuperf.runtime.base import Backend, DeviceBuffer, Kernel, as_dim3
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


def launches_per_pair(kernel_time_s: float, cache: str) -> int:
    """Launches between one event pair: 1 in cold mode (a flush precedes every launch),
    else enough for the pair to last PAIR_TARGET_S."""
    if cache == "cold" or kernel_time_s <= 0:
        return 1
    return int(min(MAX_LAUNCHES_PER_PAIR, max(1, math.ceil(PAIR_TARGET_S / kernel_time_s))))


def queue_method_for(cache: str, launches: int, graph: bool = False) -> str:
    """The words Measurement.queue_method uses for how the queue was kept ahead."""
    if cache == "cold":
        return "flush-ahead: spin per batch + read-flush before every timed launch"
    per_pair = "1 launch" if launches == 1 else f"{launches} launches"
    if graph:
        return f"graph-replay: spin per batch + a graph of {per_pair} per event pair"
    return f"spin-ahead: spin per batch + {per_pair} per event pair"


__all__ = [
    "MeasureSettings",
    "launches_per_pair",
    "measure_callable",
    "measure_kernel",
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
) -> Measurement:
    """Time `kernel` in the settings' cache mode; the caller's buffers end with its output.

    `device` is the devices.DeviceSpec (peak bandwidth, cache sizes). `args` holds
    DeviceBuffer objects and numbers, in signature order.
    """
    grid3, block3 = as_dim3(grid, "grid"), as_dim3(block, "block")
    args = tuple(args)
    label = name or kernel.name

    def launch(call_args: tuple, stream: Any = None) -> None:
        backend.launch(kernel, grid3, block3, call_args, shared_bytes=shared_bytes, stream=stream)

    buffers = _distinct_buffers(args)
    if settings.cache == "rotate" and not buffers:
        raise ConfigError(
            f"{label}: cache='rotate' rotates copies of the kernel's buffer arguments, and "
            "this launch has none; use cache='cold'"
        )
    session = _Session(backend, device, settings, label)
    try:
        copies = _copies_needed(settings, buffers, bytes_moved, session, label)
        placements = session.placements(args, buffers, copies)
        work = Timed(label, launch, placements, bytes_moved, launch_on=launch)
        measurement = session.run(
            work,
            kernel_name=kernel.name,
            extra_fields={
                "resources": kernel.resources,
                "grid": grid3,
                "block": block3,
                "shared_bytes": shared_bytes,
                "rotation_copies": copies if settings.cache == "rotate" else 0,
            },
        )
        if settings.cache == "rotate" or settings.reallocation_rounds > 1:
            launch(args)  # untimed: the real output lands in the caller's own buffers
        backend.synchronize()
        # The backend works out the occupancy of a launch shape at its first launch, which
        # came after extra_fields was built: read the resources again.
        return replace(measurement, resources=kernel.resources)
    finally:
        session.close()


def measure_callable(
    backend: Backend,
    fn: Callable[[], Any],
    *,
    bytes_moved: int,
    device: Any,
    settings: MeasureSettings = MeasureSettings(),
    name: str | None = None,
) -> Measurement:
    """Time work that `fn()` launches on the default stream (PyTorch, Triton, CuPy, ...).

    The engine cannot copy buffers it does not see, so cache="rotate" is refused and
    reallocation_rounds has no effect; cold and hot work as for kernels.
    """
    label = name or str(getattr(fn, "__name__", "callable"))
    if settings.cache == "rotate":
        raise ConfigError(
            f"{label}: cache='rotate' needs the buffers to copy, which a callable hides; "
            "use cache='cold', or measure_kernel with the kernel and its arguments"
        )
    session = _Session(backend, device, settings, label)
    try:
        work = Timed(label, lambda _args: fn(), [[()]], bytes_moved)
        return session.run(work, kernel_name=label, extra_fields={})
    finally:
        session.close()


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
        self.clock: Callable[[], float] = getattr(backend, "host_clock", time.perf_counter)
        self.timed: list[Timed] = []

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

    def run(self, work: Timed, *, kernel_name: str, extra_fields: dict) -> Measurement:
        settings, backend, engine = self.settings, self.backend, self.engine
        began = self.clock()
        _check_bytes(work.bytes_moved, self.label)
        if self.cold:
            engine.scratch_for(scratch_bytes_for(self.cache_bytes))
        timed = self.timed = [work]
        if settings.calibrate:
            timed.append(self.reference(work.bytes_moved))
        # First launches load modules and compile lazily (Triton); keep them out of timing.
        for item in timed:
            item.launch_next(0)
        backend.synchronize()
        self._probe(timed)
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
        return self._measurement(
            timed,
            kernel_name=kernel_name,
            stopped_by=stopped_by,
            warmup_launches=warmup_launches,
            wall_s=self.clock() - began,
            clocks=clocks,
            extra={
                "starved_samples_dropped": starved,
                "batches": batches,
                "launches_per_sample": work.launches,
                "graph_replay": graphs,
                "scratch_bytes": engine.scratch.nbytes if self.cold and engine.scratch else 0,
                "reallocation_rounds": settings.reallocation_rounds,
            },
            extra_fields=extra_fields,
        )

    def _batch(
        self,
        timed: list[Timed],
        samples: int,
        spin_s: float,
        *,
        while_in_flight: Callable[[], None] | None = None,
    ) -> Batch:
        """One batch; what it accepted is added to each workload's samples."""
        batch = run_batch(
            self.engine,
            timed,
            samples,
            cold=self.cold,
            spin_s=spin_s,
            clock=self.clock,
            while_in_flight=while_in_flight,
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
                item.launches = launches_per_pair(min(accepted), self.settings.cache)
                item.lower_bound_s = LOWER_BOUND_FRACTION * min(accepted)

    def _replays_graphs(self, timed: list[Timed]) -> bool:
        return (
            self.settings.graphs
            and self.settings.cache == "hot"
            and self.backend.supports_graphs
            and all(item.launch_on is not None for item in timed)
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
        for item, accepted in zip(timed, batch.samples_s, strict=True):
            item.lower_bound_s = LOWER_BOUND_FRACTION * min(accepted) if accepted else 0.0
            launches = launches_per_pair(min(accepted), "hot") if accepted else item.launches
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
        settings = self.settings
        if all(
            stats.precision_reached(
                item.samples_s, settings.target_rel_ci, settings.min_samples, settings.confidence
            )
            for item in timed
        ):
            return "precision"
        if len(timed[0].samples_s) >= settings.max_samples:
            return "max_samples"
        if sampling_s >= settings.budget_s:
            return "budget"
        return ""

    def _measurement(
        self,
        timed: list[Timed],
        *,
        kernel_name: str,
        stopped_by: str,
        warmup_launches: int,
        wall_s: float,
        clocks: Any,
        extra: dict,
        extra_fields: dict,
    ) -> Measurement:
        work = timed[0]
        for item in timed:
            if len(item.samples_s) < 3:
                starved = extra["starved_samples_dropped"]
                way_out = (
                    f"{starved} were dropped because the host could not keep the device queue "
                    "ahead of so short a kernel: use cache='cold' (a flush runs before each "
                    "launch) or a larger problem, or raise budget_s"
                    if starved
                    else "raise budget_s"
                )
                raise ConfigError(
                    f"{self.label}: only {len(item.samples_s)} usable samples of {item.name} "
                    f"in budget_s={self.settings.budget_s}; {way_out}"
                )
        summary = stats.summarize(work.samples_s, self.settings.confidence)
        peak_bps = float(self.device.peak_bps)
        efficiency = work.bytes_moved / summary.median / peak_bps
        reference_efficiency = calibrated = None
        if len(timed) > 1:
            reference = timed[1]
            reference_time_s = float(np.median(reference.samples_s))
            reference_efficiency = reference.bytes_moved / reference_time_s / peak_bps
            calibrated = efficiency / reference_efficiency
            extra["reference_samples_s"] = tuple(reference.samples_s)
            extra["reference_bytes_moved"] = reference.bytes_moved
        info = self.backend.info
        return Measurement(
            name=self.label,
            kernel=kernel_name,
            cache=self.settings.cache,
            bytes_moved=work.bytes_moved,
            time_s=summary.median,
            time_ci_s=(summary.ci_low, summary.ci_high),
            samples_s=tuple(work.samples_s),
            peak_bps=peak_bps,
            device_key=self.device.key,
            device_name=self.device.name,
            backend=info.backend,
            simulated=info.simulated,
            queue_method=queue_method_for(self.settings.cache, work.launches, bool(work.graphs)),
            warmup_count=warmup_launches,
            stopped_by=stopped_by,
            wall_s=wall_s,
            calibrated_efficiency=calibrated,
            reference_efficiency=reference_efficiency,
            clocks=clocks,
            outliers=summary.outliers,
            extra=extra,
            **extra_fields,
        )


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
