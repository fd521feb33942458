"""One measurement run on the device: probe, warm-up, adaptive sampling.

`Sampler` owns what a measurement allocates (buffer copies, graphs) and frees it whatever
happens; `run` measures its workloads interleaved, batch by batch, until the median's interval
is tight enough (and, for an A/B pair, `Pairing` (pairing.py) says the comparison is decided;
with `settings.stop`, the sequential rule of sequential.py) or the budget is spent, then hands
the samples to recording.py for the Measurement. The public entry points in measure.py build
the workloads and call it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from pytest_gpuperf.engine import clocks as clock_readings
from pytest_gpuperf.engine import sequential, stats
from pytest_gpuperf.engine.deadline import what_it_saw
from pytest_gpuperf.engine.hard_limit import HardLimit
from pytest_gpuperf.engine.pairing import Pairing
from pytest_gpuperf.engine.policy import (
    FLUSH_ELEMENT_BYTES,
    MIN_SAMPLING_BELOW_S,
    MIN_SAMPLING_MAX_SAMPLES,
    MIN_WARMUP_S,
    PROGRESS_EVERY_S,
    STORED_MIN_SAMPLES,
    WARMUP_BATCH_SAMPLES,
    WARMUP_TOLERANCE,
    MeasureSettings,
    launches_per_pair,
    real_limit_s,
    rotation_copies_for,
    round_up,
    scratch_bytes_for,
)
from pytest_gpuperf.engine.recording import measurement_of
from pytest_gpuperf.engine.results import Measurement
from pytest_gpuperf.engine.timing import (
    INTERNAL_BLOCK,
    LOWER_BOUND_FRACTION,
    SPIN_MAX_S,
    Batch,
    Pacing,
    Timed,
    blocks_for,
    engine_for,
    run_batch,
    run_graph_batch,
)
from pytest_gpuperf.errors import ConfigError, GpuPerfError, LaunchError, OutOfDeviceMemory
from pytest_gpuperf.runtime.base import Backend, DeviceBuffer

# -- the sampler ------------------------------------------------------------------------


class Sampler:
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
        self.pairing: Pairing | None = None
        # cold samples of a kernel captured and replayed as one graph a batch (CUDA)
        self.graph_batches = False
        self.graph_refused = ""
        # what the limit's words report: where the measurement is, and what it dropped
        self.phase = "its first calls"
        self.dropped = 0
        self.as_it_runs_why = ""
        # the hard limit (engine/hard_limit.py): an A/B round's, or this measurement's own
        self.limit = HardLimit(settings, backend, label, self._timeout_words, lambda: self.phase)
        self.first_calls_done = self.limit.first_calls_done
        self.bounded = self.limit.bounded
        self.check_deadline = self.limit.check

    def close(self) -> None:
        """Free the copies and graphs; a device that already failed must not hide the error
        that is propagating behind a cleanup error (the success path synchronised already)."""
        self.limit.close()
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
        self,
        args: tuple,
        buffers: list[DeviceBuffer],
        copies: int,
        rounds: int | None = None,
        *,
        fit: bool = False,
    ) -> list[list[tuple]]:
        """Argument tuples per placement and copy; the caller's own buffers are copy 0 of
        placement 0, every other copy is a fresh allocation initialised from them.
        `rounds` placements (None: the settings' reallocation_rounds). `fit`: a placement
        the device memory cannot hold is left out (its copies freed) instead of failing."""
        result: list[list[tuple]] = []
        count = self.settings.reallocation_rounds if rounds is None else rounds
        for round_index in range(count):
            sets = []
            made = len(self.owned)
            try:
                for copy_index in range(copies):
                    if round_index == 0 and copy_index == 0:
                        sets.append(args)
                        continue
                    clones = {id(b): self._copy_of(b) for b in buffers}
                    sets.append(tuple(clones.get(id(a), a) if is_buffer(a) else a for a in args))
            except OutOfDeviceMemory:
                if not (fit and result):
                    raise
                for clone in self.owned[made:]:
                    clone.free()
                del self.owned[made:]
                break
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

    def run(
        self,
        timed: list[Timed],
        *,
        kernel_name: str,
        extra_fields: dict,
        pair: Pairing | None = None,
        per_item_fields: list[dict] | None = None,
    ) -> list[Measurement]:
        """Measure the workloads in `timed` interleaved: one Measurement each, for the user's
        workloads (the calibration reference is folded into the first one's fields)."""
        settings, backend, engine = self.settings, self.backend, self.engine
        began = self.clock()
        started_s = time.time()
        work = timed[0]
        check_bytes(work.bytes_moved, self.label)
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
        self.first_calls_done()
        self.phase = "the probe"
        self._probe(timed)
        if pair is not None:  # both sides get the same launches per event pair
            launches = max(item.launches for item in timed)
            for item in timed:
                item.launches = launches
        graphs = self._replays_graphs(timed)
        if graphs:
            self._capture_graphs(timed)
        self.graph_batches = self._batches_as_graphs(timed)
        pacing = Pacing(
            # A first guess of the host's cost per launch; measured from the first batch on.
            host_per_sample_s=sum(item.launches for item in timed) * 30e-6,
            device_per_sample_s=self._device_per_sample_s(timed),
        )
        self.phase = "warm-up"
        warmup_launches = self._warm_up(timed, pacing)
        self.phase = "sampling"

        clocks_before: list = []
        sampling_began = self.clock()
        real_began = said_at = time.perf_counter()
        stopped_by, batches, starved = "", 0, 0
        wanted = settings.min_samples
        while not stopped_by:
            limit = settings.max_samples
            if self._minimum_applies():
                limit = max(limit, MIN_SAMPLING_MAX_SAMPLES)
            if settings.stop is not None:  # sequential rule: its own cap (engine/sequential.py)
                limit = max(limit, settings.stop.max_samples)
            samples, spin_s = pacing.plan(max(1, min(wanted, limit - len(work.samples_s))))
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
            self.dropped += batch.starved
            if pair is not None:
                pair.take(batch)
            else:
                for item, accepted in zip(timed, batch.samples_s, strict=True):
                    item.samples_s.extend(accepted)
            pacing.observe(batch, samples, spin_s)
            pacing.device_per_sample_s = self._device_per_sample_s(timed)
            now, real_now = self.clock(), time.perf_counter()
            # The budget bounds both clocks: the backend's (virtual on the simulated device)
            # and, at real_limit_s, the host's real one.
            real_spent = (
                (real_now - real_began) * settings.budget_s / real_limit_s(settings.budget_s)
            )
            spent_s = max(now - sampling_began, real_spent)
            stopped_by = self._stop_reason(timed, spent_s)
            if not stopped_by:
                self.check_deadline()
            # Double the batch, but not past what the remaining budget can pay for, on the
            # backend's clock only: a seeded simulated run batches alike on any machine (the
            # real clock may end it one batch, at most as long as all before it, late).
            per_sample_s = (now - batch_began) / samples
            affordable = (settings.budget_s - (now - sampling_began)) / max(per_sample_s, 1e-12)
            wanted = max(1, min(2 * samples, int(affordable) + 1))
            if pair is not None and not pair.decidable(settings.min_samples):
                wanted = 2 * samples  # every load needs its pairs (a batch starts at load 0)
            if settings.progress is not None and real_now - said_at >= PROGRESS_EVERY_S:
                said_at = real_now
                count = len(pair.ratios) if pair is not None else len(work.samples_s)
                settings.progress(
                    f"{self.label}: sampling for {real_now - real_began:.0f} s, {count} "
                    f"{'pairs' if pair is not None else 'samples'} so far (budget "
                    f"{settings.budget_s:g} s)"
                )
        self.limit.sampled()
        clocks = clock_readings.merge(
            clocks_before[0] if clocks_before else None, clock_readings.read_clocks(backend)
        )
        extra: dict[str, Any] = {
            "starved_samples_dropped": starved,
            "batches": batches,
            "launches_per_sample": work.launches,
            "graph_replay": graphs,
            "graph_batches": self.graph_batches,
            "scratch_bytes": engine.scratch.nbytes if self.cold and engine.scratch else 0,
            "reallocation_rounds": settings.reallocation_rounds,
            "sampling_s": round(spent_s, 6),
        }
        if self._sampling_short(work, 0.0):
            extra["min_sampling_s"] = settings.min_sampling_s
        if settings.stop is not None:  # sequential rule: what the stop served
            extra["stop_target"] = settings.stop.describe()
        if self.as_it_runs_why:
            extra["as_it_runs"] = self.as_it_runs_why
        if self.graph_refused:
            extra["graph_batches_refused"] = self.graph_refused
        if pair is not None:
            extra["paired_with"] = "base" if user_count == 2 else ""
        wall_s = self.clock() - began
        extra_fields = {**extra_fields, "started_s": started_s, "ended_s": time.time()}
        results = []
        for position in range(user_count):
            fields = {**extra_fields, **(per_item_fields[position] if per_item_fields else {})}
            results.append(
                measurement_of(
                    timed,
                    position,
                    label=self.label,
                    settings=settings,
                    device=self.device,
                    info=backend.info,
                    pair=pair,
                    graph_batches=self.graph_batches,
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
        batch = None
        if self.graph_batches:
            try:
                batch = run_graph_batch(
                    self.engine, timed, samples, clock=self.clock, while_in_flight=while_in_flight
                )
            except LaunchError as error:  # the driver refused the capture: launch as before
                self.graph_batches, self.graph_refused = False, str(error)
        if batch is None:
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
        if self.phase != "sampling":
            self.dropped += batch.starved
        return batch

    def _timeout_words(self, spent_s: float) -> str:
        pair = self.pairing
        kept = len(pair.ratios) if pair else len(self.timed[0].samples_s) if self.timed else 0
        return what_it_saw(
            kept, self.dropped, paired=pair is not None, phase=self.phase, spent_s=spent_s,
            limit_s=self.limit.deadline.limit_s,
        )  # fmt: skip

    def _device_per_sample_s(self, timed: list[Timed]) -> float:
        """A lower bound of the device time one sample of every workload takes."""
        device_s = sum(item.launches * item.lower_bound_s for item in timed)
        if self.cold:
            device_s += len(timed) * self.engine.flush_lower_bound_s
        return device_s

    def _probe(self, timed: list[Timed]) -> None:
        """First estimate of each workload's time: a few launches, each with its own event
        pair, behind a spin long enough for the host to enqueue them all (the spin doubles
        until it is; for kernels, up to sampling's longest, beyond which they are refused)."""
        spin_s, kernels = 1e-3, not any(item.launch_on is None for item in timed)
        for _ in range(8):
            batch = run_batch(
                self.engine, timed, 3, cold=self.cold, spin_s=spin_s, clock=self.clock
            )
            if not batch.starved:
                break
            self.dropped += batch.starved
            self.check_deadline()
            if kernels and spin_s >= SPIN_MAX_S:  # a kernel's launch: sampling's longest
                break  # spin could not cover three of them
            spin_s = 2 * max(spin_s, batch.host_s)
            if kernels:
                spin_s = min(spin_s, SPIN_MAX_S)
        if batch.starved:
            if kernels:
                raise ConfigError(
                    f"{self.label}: only 0 usable samples in the probe; {self.dropped} were "
                    "dropped because the host could not keep the device queue ahead of so "
                    f"short a kernel (not even behind a {SPIN_MAX_S * 1e3:g} ms spin): use "
                    "cache='cold' (a flush runs before each launch) or a larger problem"
                )
            self.as_it_runs_why = (  # callables the host cannot keep ahead of: as they run
                "the host could not keep the device queue ahead of it (spins up to "
                f"{spin_s * 1e3:.0f} ms did not cover three calls)"
            )
            for item in timed:
                item.as_it_runs = True
            batch = run_batch(self.engine, timed, 3, cold=self.cold, spin_s=0.0, clock=self.clock)
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

    def _batches_as_graphs(self, timed: list[Timed]) -> bool:
        """Cold samples of kernels (not callables, not per-launch setups, not an A/B pair,
        whose sides were validated launched from the host) are taken as one graph a batch
        where the backend records events inside a graph (timing.run_graph_batch)."""
        backend = self.backend
        return (
            self.settings.graphs
            and self.cold
            and self.pairing is None
            and backend.supports_graphs
            and backend.supports_graph_events
            and all(
                item.launch_on is not None and item.setup is None and item.launches == 1
                for item in timed
            )
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
        began, real_began = self.clock(), time.perf_counter()
        previous: float | None = None
        launches, batches = 0, 0
        while True:
            samples, spin_s = pacing.plan(WARMUP_BATCH_SAMPLES)
            batch = self._batch(timed, samples, spin_s)
            batches += 1
            launches += samples * timed[0].launches
            self.check_deadline()
            pacing.observe(batch, samples, spin_s)
            pacing.device_per_sample_s = self._device_per_sample_s(timed)
            warmup_s = self.settings.warmup_s
            real_s = (time.perf_counter() - real_began) * warmup_s / real_limit_s(warmup_s)
            elapsed_s = max(self.clock() - began, real_s)
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
        elif settings.stop is not None:  # sequential rule (engine/sequential.py) decides
            precise = all(
                stats.precision_reached(
                    item.samples_s,
                    settings.target_rel_ci,
                    settings.min_samples,
                    settings.confidence,
                )
                for item in timed
            )
            if reason := sequential.stop_reason(
                settings.stop,
                timed[0].samples_s,
                precise=precise,
                sampling_s=sampling_s,
                max_samples=settings.max_samples,
            ):
                return reason
        elif self._sampling_short(timed[0], sampling_s):
            if len(timed[0].samples_s) >= MIN_SAMPLING_MAX_SAMPLES:
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
        # A pair stops at the budget once every load has its few pairs (a load without two
        # has no interval; the real clock can reach the budget that early on the simulator).
        if sampling_s >= settings.budget_s and (
            pair is None or pair.decidable(settings.min_samples)
        ):
            return "budget"
        return ""

    def _sampling_short(self, work: Timed, sampling_s: float) -> bool:
        """Whether a short cold or rotate kernel is still within its minimum sampling time
        (MeasureSettings.min_sampling_s) or below policy.STORED_MIN_SAMPLES samples: neither
        precision nor max_samples stop it yet (the budget does)."""
        if not (self._minimum_applies() and work.samples_s):
            return False
        per_launch_s = float(np.median(work.samples_s)) / max(work.launches, 1)
        short = sampling_s < self.settings.min_sampling_s
        few = len(work.samples_s) < STORED_MIN_SAMPLES
        return per_launch_s < MIN_SAMPLING_BELOW_S and (short or few)

    def _minimum_applies(self) -> bool:
        """A minimum sampling time is set and this measurement may keep it: cold or rotate,
        not an A/B pair."""
        settings = self.settings
        return settings.min_sampling_s > 0 and settings.cache != "hot" and self.pairing is None


def is_buffer(value: Any) -> bool:
    return isinstance(value, DeviceBuffer)


def check_bytes(bytes_moved: int, label: str) -> None:
    if not isinstance(bytes_moved, (int, np.integer)) or bytes_moved <= 0:
        raise ConfigError(
            f"{label}: bytes_moved must be a positive number of bytes (each input read once "
            f"+ each output written once), got {bytes_moved!r}"
        )
