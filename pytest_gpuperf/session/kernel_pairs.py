"""A kernel's A/B in the `gpu_bench` fixture: whether head and base are timed as a pair (not
for the same code object, nor on the simulated device for two builds of one model), the pair
itself, and the confirmation round that loads both afresh on fresh copies of the buffers.
Also `Recipe`, how any measurement was taken, so a confirmation round can take it again. A
kernel's measurement is its `Launch` (engine/launch.py) with `common`: the declared bytes, the
device spec and the measurement's name.
Split from session/fixture.py, whose `GpuBench` calls these with itself as `bench`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from pytest_gpuperf.engine.launch import Launch
from pytest_gpuperf.engine.measure import MeasureSettings, measure_launch
from pytest_gpuperf.engine.results import Measurement, PairedComparison
from pytest_gpuperf.gate.judge import AbResult, Recheck, Taken
from pytest_gpuperf.gate.pairing import measure_launch_ab
from pytest_gpuperf.gate.suite import interval_confidence
from pytest_gpuperf.runtime.base import DeviceBuffer, Kernel
from pytest_gpuperf.session.callable_base import BaseCallable


@dataclass(frozen=True)
class Recipe:
    """How one measurement was taken, so a confirming round can take it again: the kernel
    (and the base build it was paired with) and its launch, or the callable; `common` the
    engine's other keywords."""

    label: str
    mode: str
    common: Mapping[str, Any]
    kernel: Kernel | None = None
    base: Kernel | None = None
    fn: Callable[[], Any] | None = None
    compared: Kernel | None = None  # the base build, timed or not (what explain/ reads)
    base_fn: BaseCallable | None = None  # a callable's base, when it was timed as a pair
    launch: Launch | None = None  # a kernel's


def measure_kernel_ab(
    bench: Any,
    kernel: Kernel,
    launch: Launch,
    found: tuple[Kernel | None, str, str],
    settings: MeasureSettings,
    common: Mapping[str, Any],
) -> tuple[Measurement, AbResult | None, PairedComparison | None]:
    """Measure `kernel`'s `launch`, as an A/B pair with its base build where one is to be
    timed: (head's measurement, the A/B result or None without compare, the pair or None).
    `found` is (base build, why none, detail) as bench.base_of gives it."""
    backend, forced = bench.backend, bench.bench_session.settings.compare_force
    base, why, detail = found
    if base is None:
        measurement = measure_launch(backend, kernel, launch, settings=settings, **common)
        return measurement, (AbResult(no_base_why=why, detail=detail) if why else None), None
    head_print = backend.kernel_fingerprint(kernel)
    base_print = backend.kernel_fingerprint(base)
    model = backend.speed_model(kernel)
    if head_print == base_print and not forced:
        measurement = measure_launch(backend, kernel, launch, settings=settings, **common)
        return measurement, AbResult(unchanged_fingerprint=head_print), None
    if model is not None and not forced and model == backend.speed_model(base):
        # The simulated device times both from one model: timing the pair would measure
        # its noise and call it a verdict on the edit.
        measurement = measure_launch(backend, kernel, launch, settings=settings, **common)
        ab = AbResult(
            modelled_by=model.efficiency_from,
            modelled_efficiency=model.efficiency,
            head_fingerprint=head_print,
            base_fingerprint=base_print,
        )
        return measurement, ab, None
    first = interval_confidence(bench.bench_session.suite.ab_round_rate)
    paired = pair(bench, kernel, base, launch, settings, first, len(bench.taken), common)
    return paired.head, AbResult(paired=paired), paired


def again(
    bench: Any, recipe: Recipe, taken: Taken, recheck: Recheck, settings: MeasureSettings
) -> tuple[Taken | None, str]:
    """The confirmation round of a kernel's measurement: the kernel (and its base build)
    loaded afresh, on fresh device copies of the buffers the call passed (its own when it has
    a `setup=`, which resets those); (None, why) when it cannot be taken again."""
    assert recipe.kernel is not None and recipe.launch is not None
    if recheck.paired and recipe.base is None:
        return None, "the first round was not an A/B pair"
    buffers = recipe.launch.buffers
    if any(buffer.freed for buffer in buffers):
        return None, "a buffer the call passed was freed before the test ended"
    fresh: dict[int, DeviceBuffer] = {}
    if recipe.launch.setup is None:
        for buffer in buffers:
            copy = bench.backend.alloc(buffer.nbytes)
            bench.backend.copy(copy, buffer)
            fresh[id(buffer)] = copy
    args = recipe.launch.args
    launch = recipe.launch.on(
        fresh.get(id(a), a) if isinstance(a, DeviceBuffer) else a for a in args
    )
    try:
        kernel = bench.bench_session.reload(recipe.kernel)
        if not recheck.paired:
            measurement = measure_launch(
                bench.backend, kernel, launch, settings=settings, **recipe.common
            )
            return replace(taken, measurement=measurement, ab=None), ""
        assert recipe.base is not None
        base = bench.bench_session.reload(recipe.base)
        seed = 1_000_003 + recheck.position  # another slot order than the first round's
        paired = pair(
            bench, kernel, base, launch, settings, recheck.confidence, seed, recipe.common
        )
        return replace(taken, measurement=paired.head, ab=AbResult(paired=paired)), ""
    finally:
        bench.backend.synchronize()
        for copy in fresh.values():
            copy.free()


def pair(
    bench: Any,
    head: Kernel,
    base: Kernel,
    launch: Launch,
    settings: MeasureSettings,
    confidence: float,
    seed: int,
    common: Mapping[str, Any],
) -> PairedComparison:
    """An A/B pair, its interval at `confidence` (the round's level of the run's budget,
    gate/suite.py), sampled by the run's pairing policy until the gate's state is known
    or the budget is spent."""
    return measure_launch_ab(
        bench.backend,
        head,
        base,
        launch,
        policy=bench.bench_session.pair_policy,
        settings=settings,
        confidence=confidence,
        seed=seed,
        **common,
    )
