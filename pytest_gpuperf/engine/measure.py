"""The measurement engine: cache modes, a queue kept ahead of the host, adaptive sampling.

A plain library function in the spirit of `triton.testing.do_bench`: give it a backend, a
kernel with its launch configuration and arguments, the bytes it must move and the device
spec; it returns a `Measurement` (median kernel time, its confidence interval, how sampling
stopped, clocks, and optionally an in-run calibration against a reference copy kernel).
`measure_pair` times two builds of one kernel (head and base) interleaved on the same buffers
for an A/B comparison, `measure_callable_pair` two versions of a callable.
docs/measurement.md explains every choice.

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

The engine's parts: engine/policy.py (`MeasureSettings` and the rules derived from it),
sampling.py (one measurement run: probe, warm-up, adaptive sampling), pairing.py (an A/B
pair's state while it samples), recording.py (a run's samples to its Measurement), timing.py
(the queue and the event pairs); this module holds the public entry points.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from pytest_gpuperf.engine import stats
from pytest_gpuperf.engine.callable_loads import called, per_load, setup_of, setups_of
from pytest_gpuperf.engine.launch import Launch
from pytest_gpuperf.engine.overdue import Overdue
from pytest_gpuperf.engine.pairing import Pairing
from pytest_gpuperf.engine.policy import (
    DEFAULT_PAIR_LOADS,
    MAX_LAUNCHES_PER_PAIR,
    MAX_ROTATION_COPIES,
    MAX_ROTATION_MEMORY_FRACTION,
    PAIR_TARGET_S,
    WARMUP_BATCH_SAMPLES,
    MeasureSettings,
    launches_per_pair,
    pair_buffer_sets,
    placement_sets_for,
    queue_method_for,
    rotation_copies_for,
    scratch_bytes_for,
)
from pytest_gpuperf.engine.results import Measurement, PairedComparison
from pytest_gpuperf.engine.sampling import Sampler, check_bytes
from pytest_gpuperf.engine.timing import Timed, release
from pytest_gpuperf.engine.work_checks import (
    after,
    check_host_waits,
    check_queues_work,
    first_calls,
)
from pytest_gpuperf.errors import ConfigError, GpuPerfError
from pytest_gpuperf.runtime.base import Backend, DeviceBuffer, Kernel, Module

__all__ = [
    "DEFAULT_PAIR_LOADS",
    "MAX_LAUNCHES_PER_PAIR",
    "PAIR_TARGET_S",
    "WARMUP_BATCH_SAMPLES",
    "Launch",
    "MeasureSettings",
    "launches_per_pair",
    "measure_callable",
    "measure_callable_pair",
    "measure_kernel",
    "measure_launch",
    "measure_launch_pair",
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
    then holds one launch and hot mode replays no graph. The keywords make one `Launch`
    (engine/launch.py): `measure_launch` takes it as it is.
    """
    launch = Launch.of(grid, block, args, shared_bytes=shared_bytes, setup=setup)
    return measure_launch(
        backend,
        kernel,
        launch,
        bytes_moved=bytes_moved,
        device=device,
        settings=settings,
        name=name,
    )


def measure_launch(
    backend: Backend,
    kernel: Kernel,
    launch: Launch,
    *,
    bytes_moved: int,
    device: Any,
    settings: MeasureSettings = MeasureSettings(),
    name: str | None = None,
) -> Measurement:
    """`measure_kernel` of one `Launch`."""
    buffers, setup, label = launch.buffers, launch.setup, name or kernel.name
    _check_rotate(settings, buffers, label)
    settings = _spread(settings, backend, buffers, setup)
    sampler = Sampler(backend, device, settings, label)

    def enqueue(call_args: tuple, stream: Any = None) -> None:
        launch.enqueue(backend, kernel, call_args, stream)

    try:
        if setup is not None:  # a setup that waits for the device is refused, in one line
            setup()
            enqueue(launch.args)
            check_host_waits(sampler, [], [(lambda: enqueue(launch.args), setup)])
        copies = _copies_needed(settings, buffers, bytes_moved, sampler, label)
        placements = sampler.placements(
            launch.args, buffers, copies, fit=settings.spread_placements
        )
        if len(placements) < settings.reallocation_rounds:  # the memory held fewer
            settings = sampler.settings = replace(settings, reallocation_rounds=len(placements))
        work = Timed(label, enqueue, placements, bytes_moved, launch_on=enqueue, setup=setup)
        measurement = sampler.run(
            [work],
            kernel_name=kernel.name,
            extra_fields=_kernel_fields(backend, kernel, launch, copies, settings),
        )[0]
        if settings.cache == "rotate" or settings.reallocation_rounds > 1:
            if setup is not None:
                setup()
            enqueue(launch.args)  # untimed: the real output lands in the caller's own buffers
        backend.synchronize()
        # The backend works out the occupancy of a launch shape at its first launch, which
        # came after extra_fields was built: read the resources again.
        return replace(measurement, resources=kernel.resources)
    finally:
        sampler.close()


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
    buffer_sets: int | None = None,
) -> PairedComparison:
    """Time two builds of one kernel (head and base) interleaved, for an A/B comparison.

    Same buffers, launch configuration, cache mode and flush for both; every sample slot runs
    one head and one base sample back to back, in an order drawn at random per slot (seeded
    by `seed`), so slow drift of the device, and the placement of the buffers, are shared by
    the two sides of every pair. Each side is loaded `loads` times (Backend.load_again: the
    same code object, separate modules) and successive slots take successive loads, so the
    comparison's interval carries the drift between loads as measured in this run
    (stats.nested_trimmed_mean). Load j runs on buffer set j % `buffer_sets` (None: one set
    per load; set 0 is the caller's buffers, the others fresh device copies of them), so
    where the buffers landed varies between the loads as it would between two runs, and the
    interval carries that too: a second round on fresh buffers is what it predicts
    (docs/measurement.md, "Buffer sets"). A call with `setup` runs on the caller's buffers
    only (the setup resets those), and the sets shrink to what half the device memory holds;
    `PairedComparison.buffer_sets` says how many were used. The pair does not use
    `settings.reallocation_rounds`: its buffer sets are those rounds. The statistic is the
    trimmed mean of the pairs' log time ratios, which resolves below the event timer's step
    (docs/measurement.md). Sampling stops once the head's median is within the target
    interval and `stop_when(ratio_ci, base_time_s)` says the comparison is decided (the
    gate's rule, at `settings.confidence`), or at the budget, which covers both kernels. The
    caller's buffers end with head's output.
    """
    launch = Launch.of(grid, block, args, shared_bytes=shared_bytes, setup=setup)
    return measure_launch_pair(
        backend,
        head,
        base,
        launch,
        bytes_moved=bytes_moved,
        device=device,
        settings=settings,
        name=name,
        stop_when=stop_when,
        seed=seed,
        loads=loads,
        buffer_sets=buffer_sets,
    )


def measure_launch_pair(
    backend: Backend,
    head: Kernel,
    base: Kernel,
    launch: Launch,
    *,
    bytes_moved: int,
    device: Any,
    settings: MeasureSettings = MeasureSettings(),
    name: str | None = None,
    stop_when: Callable[[tuple[float, float], float], bool] | None = None,
    seed: int = 0,
    loads: int = DEFAULT_PAIR_LOADS,
    buffer_sets: int | None = None,
) -> PairedComparison:
    """`measure_pair` of one `Launch`."""
    if not isinstance(loads, int) or loads < 1:
        raise ConfigError(f"loads must be a whole number of module loads >= 1, got {loads!r}")
    if buffer_sets is not None and (not isinstance(buffer_sets, int) or buffer_sets < 1):
        raise ConfigError(
            f"buffer_sets must be a whole number of buffer sets >= 1 (or None: one per load), "
            f"got {buffer_sets!r}"
        )
    args, buffers, setup, label = launch.args, launch.buffers, launch.setup, name or head.name
    _check_rotate(settings, buffers, label)
    sampler = Sampler(backend, device, settings, label)
    extra_loads: list[Module] = []
    try:
        sides = []
        for kernel in (head, base):
            again = [backend.load_again(kernel.module) for _ in range(loads - 1)]
            extra_loads += again
            sides.append([kernel, *(module.kernel(kernel.name) for module in again)])
        launch_head, launch_base = (_loaded(backend, kernels, launch) for kernels in sides)
        for load in range(loads):  # first launches (lazy function loading) stay untimed
            for enqueue in (launch_head, launch_base):
                if setup is not None:
                    setup()
                enqueue((load, *args))
        backend.synchronize()
        if setup is not None:  # a setup that waits for the device is refused, in one line
            check_host_waits(sampler, [], [(lambda: launch_head((0, *args)), setup)])
        copies = _copies_needed(
            replace(settings, reallocation_rounds=1), buffers, bytes_moved, sampler, label
        )
        wanted = loads if buffer_sets is None else buffer_sets
        sets, sets_note = pair_buffer_sets(
            wanted,
            loads,
            copies,
            buffers,
            has_setup=setup is not None,
            memory_bytes=sampler.backend.info.memory_bytes,
            hot_cache_bytes=sampler.cache_bytes if settings.cache == "hot" else 0,
        )
        buffer_sets_of_round = sampler.placements(args, buffers, copies, rounds=sets)
        # Placement j runs load j on buffer set j % sets: slot s of a batch takes placement
        # s % loads, so the slots go round the loads, both sides of a slot on the same load
        # number and the same buffers.
        placements = [
            [(load, *copy) for copy in buffer_sets_of_round[load % sets]] for load in range(loads)
        ]
        cursor = [0]  # shared: successive launches of either side take successive copies
        works = [
            Timed(label, work, placements, bytes_moved, launch_on=work, setup=setup, cursor=cursor)
            for work in (launch_head, launch_base)
        ]
        fields = _kernel_fields(backend, head, launch, copies, settings)
        base_fields = {**fields, "fingerprint": backend.kernel_fingerprint(base)}
        head_m, base_m = sampler.run(
            works,
            kernel_name=head.name,
            extra_fields=fields,
            pair=Pairing(np.random.default_rng(seed), stop_when, loads, len(placements)),
            per_item_fields=[{}, base_fields],
        )
        # Untimed: head's output lands in the caller's own buffers (the last timed launch may
        # have been base's).
        if setup is not None:
            setup()
        launch_head((0, *args))
        backend.synchronize()
        return _paired_comparison(
            sampler,
            replace(head_m, resources=head.resources),
            replace(base_m, resources=base.resources),
            loads=loads,
            buffer_sets=sets,
            buffer_sets_note=sets_note,
        )
    finally:
        sampler.close()
        for module in extra_loads:
            with contextlib.suppress(GpuPerfError):
                backend.unload(module)


def _loaded(backend: Backend, kernels: Sequence[Kernel], launch: Launch) -> Callable[..., None]:
    """A launch of one side of an A/B pair whose arguments start with the load to use."""

    def enqueue(call_args: tuple, stream: Any = None) -> None:
        load, *rest = call_args
        launch.enqueue(backend, kernels[load], rest, stream)

    return enqueue


def _kernel_fields(
    backend: Backend, kernel: Kernel, launch: Launch, copies: int, settings: MeasureSettings
) -> dict[str, Any]:
    return {
        "resources": kernel.resources,
        **launch.shape(),
        "rotation_copies": copies if settings.cache == "rotate" else 0,
        "fingerprint": backend.kernel_fingerprint(kernel),
    }


def _spread(
    settings: MeasureSettings,
    backend: Backend,
    buffers: list[DeviceBuffer],
    setup: Callable[[], None] | None,
) -> MeasureSettings:
    """`settings` with the placements a spread cold measurement takes (policy.PLACEMENT_SETS,
    as many as the memory allows) as its reallocation_rounds. A setup resets the caller's
    own buffers, so a kernel with one keeps them; an explicit reallocation_rounds stands."""
    if not (settings.spread_placements and settings.cache == "cold" and buffers):
        return settings
    if setup is not None or settings.reallocation_rounds != 1:
        return settings
    sets = placement_sets_for(sum(b.nbytes for b in buffers), backend.info.memory_bytes)
    return replace(settings, reallocation_rounds=sets)


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
    sampler = Sampler(backend, device, settings, label)
    try:
        call = sampler.bounded(fn)
        before = sampler.limit.bounded_setup(setup)
        work = Timed(label, lambda _args: call(), [[()]], bytes_moved, setup=before)
        first_calls(sampler, [fn])
        check_queues_work(sampler, work)
        check_host_waits(sampler, [work], [(call, before)])
        return sampler.run([work], kernel_name=label, extra_fields={})[0]
    except Overdue as stopped:  # a call that never returned (engine/overdue.py)
        raise stopped.timeout from None
    finally:
        sampler.close()


def measure_callable_pair(
    backend: Backend,
    head: Callable[[], Any] | Sequence[Callable[[], Any]],
    base: Callable[[], Any] | Sequence[Callable[[], Any]],
    *,
    bytes_moved: int,
    device: Any,
    settings: MeasureSettings = MeasureSettings(),
    name: str | None = None,
    setup: Callable[[], None] | Sequence[Callable[[], None] | None] | None = None,
    base_setup: Callable[[], None] | Sequence[Callable[[], None] | None] | None = None,
    stop_when: Callable[[tuple[float, float], float], bool] | None = None,
    seed: int = 0,
    head_fingerprint: str = "",
    base_fingerprint: str = "",
) -> PairedComparison:
    """Time two versions of a callable (head and base) interleaved, for an A/B comparison.

    What measure_pair does for two builds of a kernel, for work two callables launch on the
    default stream: every sample slot times one head call and one base call back to back in a
    random order (seeded by `seed`), and the statistic is the same trimmed mean of log ratios.
    A callable cannot be loaded again as a module can, and the engine cannot see (or copy) its
    buffers; what stands for a kernel's loads and buffer sets is a list of captures a side:
    `head[i]` and `base[i]` (with `setup[i]`, `base_setup[i]`) are load i, each a callable its
    test body made anew on buffers of its own, and successive slots take successive loads. So
    where each capture's buffers landed varies between the loads, and with >= 3 loads the
    interval carries that drift as measured (stats.nested_trimmed_mean); with one load a side
    it is not measured (the gate assumes the backend's, gate/ab.py). Head's first callable
    runs last, so what it writes is what the caller's buffers hold."""
    heads = list(head) if isinstance(head, Sequence) else [head]
    bases = list(base) if isinstance(base, Sequence) else [base]
    if not heads or len(heads) != len(bases):
        raise ConfigError(
            f"a callable pair needs as many base callables as head ones, got {len(heads)} "
            f"and {len(bases)}"
        )
    loads = len(heads)
    head_setups = per_load(setup, loads)
    base_setups = per_load(base_setup, loads)
    label = name or str(getattr(heads[0], "__name__", "callable"))
    if settings.cache == "rotate":
        raise ConfigError(
            f"{label}: cache='rotate' needs the buffers to copy, which a callable hides"
        )
    session = Sampler(backend, device, settings, label)
    placements = [[(load,)] for load in range(loads)]
    sides = ((heads, head_setups), (bases, base_setups))
    # first calls of every capture (lazy compiles, autotuning), untimed and unbounded; the
    # first loads' setups run before their timed calls only
    firsts = [fns[0] for fns, _ in sides]
    firsts += [after(s[load], f[load]) for load in range(1, loads) for f, s in sides]
    # every later call is checked against the hard limit
    checked = [
        ([session.bounded(fn) for fn in fns], [session.limit.bounded_setup(s) for s in setups])
        for fns, setups in sides
    ]
    try:
        works = [
            Timed(
                label,
                called(fns),
                placements,
                bytes_moved,
                setup=setup_of(setups),
                setups=setups_of(setups),
            )
            for fns, setups in checked
        ]
        first_calls(session, firsts)
        check_queues_work(session, works[0])
        check_host_waits(session, works, [(fns[0], setups[0]) for fns, setups in checked])
        head_m, base_m = session.run(
            works,
            kernel_name=label,
            extra_fields={"fingerprint": head_fingerprint},
            pair=Pairing(np.random.default_rng(seed), stop_when, loads, loads),
            per_item_fields=[{}, {"fingerprint": base_fingerprint}],
        )
        if head_setups[0] is not None:
            head_setups[0]()
        heads[0]()
        backend.synchronize()
        return _paired_comparison(
            session,
            head_m,
            base_m,
            loads=loads,
            buffer_sets=loads,
            buffer_sets_note=(
                "a callable's buffers are its own: one set"
                if loads == 1
                else f"each of the {loads} captures a side made its own buffers"
            ),
        )
    except Overdue as stopped:  # a call that never returned (engine/overdue.py)
        raise stopped.timeout from None
    finally:
        session.close()


def _paired_comparison(
    sampler: Sampler,
    head_m: Measurement,
    base_m: Measurement,
    *,
    loads: int,
    buffer_sets: int,
    buffer_sets_note: str,
) -> PairedComparison:
    """The comparison a finished paired run gives: the pairing's estimate of the ratio, its
    interval and drift, beside the two sides' measurements (one place for the kernels' pair
    and the callables' pair)."""
    pairing = sampler.pairing
    assert pairing is not None
    found = pairing.estimate()
    confidence = sampler.settings.confidence
    return PairedComparison(
        head=head_m,
        base=base_m,
        ratio=found.ratio,
        ratio_ci=found.ratio_interval(confidence),
        pairs=found.pairs,
        confidence=confidence,
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
        buffer_sets=buffer_sets,
        buffer_sets_note=buffer_sets_note,
    )


def _copies_needed(
    settings: MeasureSettings,
    buffers: list[DeviceBuffer],
    bytes_moved: int,
    sampler: Sampler,
    label: str,
) -> int:
    """Rotation copies for this launch (1 outside rotate mode).

    The working set is the smaller of the buffers' total size and the declared bytes: a
    kernel that touches only part of a large buffer needs more copies, never fewer.
    """
    if settings.cache != "rotate":
        return 1
    check_bytes(bytes_moved, label)
    buffer_bytes = sum(b.nbytes for b in buffers)
    working_set_bytes = min(buffer_bytes, bytes_moved)
    copies = rotation_copies_for(working_set_bytes, sampler.cache_bytes)
    if copies > MAX_ROTATION_COPIES:
        smallest = math.ceil(2 * sampler.cache_bytes / MAX_ROTATION_COPIES)
        raise ConfigError(
            f"{label}: cache='rotate' would need {copies} copies of its {working_set_bytes}-byte "
            f"working set to cover twice the {sampler.cache_bytes}-byte caches (at most "
            f"{MAX_ROTATION_COPIES}: rotate needs a working set of at least {smallest} bytes "
            "here); use cache='cold', which evicts with one scratch buffer instead"
        )
    extra_bytes = (copies * settings.reallocation_rounds - 1) * buffer_bytes
    if extra_bytes > MAX_ROTATION_MEMORY_FRACTION * sampler.backend.info.memory_bytes:
        raise ConfigError(
            f"{label}: cache='rotate' needs {copies} copies of {buffer_bytes} bytes of "
            f"buffers ({extra_bytes / 2**30:.1f} GiB), more than half the device memory; "
            "use cache='cold', which evicts with one scratch buffer instead"
        )
    return copies
