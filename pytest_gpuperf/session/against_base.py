"""A kernel call measured against its base build (--gpuperf-compare), and measured again for a
confirming round: the A/B half of `gpu_bench(...)`, apart from the fixture's own work (code,
buffers, the checks of what a test declares) in fixture.py.

A call with a base is timed alone when timing the pair would say nothing: the base is the very
same code (equal fingerprints), or the simulated device times both from one speed model (it
would measure its own noise and call it a verdict on the edit); otherwise head and base are
timed as an interleaved pair. A confirming round loads the kernel (and its base) afresh as new
modules and runs on fresh copies of the buffers. No pytest import here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from pytest_gpuperf.engine.measure import MeasureSettings, measure_kernel
from pytest_gpuperf.engine.results import Measurement, PairedComparison
from pytest_gpuperf.gate.judge import AbResult, Recheck, Taken
from pytest_gpuperf.gate.pairing import measure_ab
from pytest_gpuperf.gate.suite import interval_confidence
from pytest_gpuperf.runtime.base import Backend, DeviceBuffer, Kernel
from pytest_gpuperf.session.bench_session import BenchSession


@dataclass(frozen=True)
class Recipe:
    """How one measurement was taken, so a confirming round can take it again: the kernel
    (and the base build it was paired with) and the call's arguments, or the callable."""

    label: str
    mode: str
    common: Mapping[str, Any]
    kernel: Kernel | None = None
    base: Kernel | None = None
    fn: Callable[[], Any] | None = None
    compared: Kernel | None = None  # the base build, timed or not (what explain/ reads)


def measure_call(
    session: BenchSession,
    backend: Backend,
    kernel: Kernel,
    base: Kernel | None,
    no_base: tuple[str, str],
    settings: MeasureSettings,
    *,
    forced: bool,
    seed: int,
    common: Mapping[str, Any],
) -> tuple[Measurement, AbResult | None, PairedComparison | None]:
    """(the head's measurement, the A/B part of it, the pair when one was timed) of one call.
    `no_base` is (why, detail) when the run compares and `base` could not be had;
    `forced` (--gpuperf-compare-force) times a pair even of the same code."""
    if base is None:
        measurement = measure_kernel(backend, kernel, settings=settings, **common)
        why, detail = no_base
        return measurement, (AbResult(no_base_why=why, detail=detail) if why else None), None
    head_print = backend.kernel_fingerprint(kernel)
    base_print = backend.kernel_fingerprint(base)
    model = backend.speed_model(kernel)
    if head_print == base_print and not forced:
        measurement = measure_kernel(backend, kernel, settings=settings, **common)
        return measurement, AbResult(unchanged_fingerprint=head_print), None
    if model is not None and not forced and model == backend.speed_model(base):
        measurement = measure_kernel(backend, kernel, settings=settings, **common)
        ab = AbResult(
            modelled_by=model.efficiency_from,
            modelled_efficiency=model.efficiency,
            head_fingerprint=head_print,
            base_fingerprint=base_print,
        )
        return measurement, ab, None
    first = interval_confidence(session.suite.ab_round_rate)
    paired = pair(session, backend, kernel, base, settings, first, seed, common)
    return paired.head, AbResult(paired=paired), paired


def pair(
    session: BenchSession,
    backend: Backend,
    head: Kernel,
    base: Kernel,
    settings: MeasureSettings,
    confidence: float,
    seed: int,
    common: Mapping[str, Any],
) -> PairedComparison:
    """An A/B pair, its interval at `confidence` (the round's level of the run's budget,
    gate/suite.py), sampled by the run's pairing policy until the gate's state is known
    or the budget is spent."""
    return measure_ab(
        backend,
        head,
        base,
        policy=session.pair_policy,
        settings=settings,
        confidence=confidence,
        seed=seed,
        **common,
    )


def measure_again(
    session: BenchSession,
    backend: Backend,
    recipe: Recipe,
    taken: Taken,
    recheck: Recheck,
    settings: MeasureSettings,
) -> tuple[Taken | None, str]:
    """The kernel of `recipe` (and its base, for a pair) measured again, loaded afresh as new
    modules, on fresh device copies of the buffers the call passed (its own buffers when it
    has a `setup=`, which resets those); (None, why) when it cannot be."""
    assert recipe.kernel is not None
    if recheck.paired and recipe.base is None:
        return None, "the first round was not an A/B pair"
    args = tuple(recipe.common["args"])
    freed = [a for a in args if isinstance(a, DeviceBuffer) and a.freed]
    if freed:
        return None, "a buffer the call passed was freed before the test ended"
    fresh: dict[int, DeviceBuffer] = {}
    if recipe.common.get("setup") is None:
        for arg in args:
            if isinstance(arg, DeviceBuffer) and id(arg) not in fresh:
                copy = backend.alloc(arg.nbytes)
                backend.copy(copy, arg)
                fresh[id(arg)] = copy
    common = {
        **recipe.common,
        "args": tuple(fresh.get(id(a), a) if isinstance(a, DeviceBuffer) else a for a in args),
    }
    try:
        kernel = session.reload(recipe.kernel)
        if not recheck.paired:
            measurement = measure_kernel(backend, kernel, settings=settings, **common)
            return replace(taken, measurement=measurement, ab=None), ""
        assert recipe.base is not None
        base = session.reload(recipe.base)
        seed = 1_000_003 + recheck.position  # another slot order than the first round's
        paired = pair(session, backend, kernel, base, settings, recheck.confidence, seed, common)
        return replace(taken, measurement=paired.head, ab=AbResult(paired=paired)), ""
    finally:
        backend.synchronize()
        for copy in fresh.values():
            copy.free()
