"""What a measurement checks about the user's work before it samples it: that a callable
queues GPU work where it is timed, and whether it (or a setup) waits for the device, which
decides how it is timed (engine/host_waits.py). measure.py calls these on its Sampler."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from pytest_gpuperf.engine.host_waits import waits_on_device
from pytest_gpuperf.engine.policy import NO_WORK_MARGIN_S
from pytest_gpuperf.engine.sampling import Sampler
from pytest_gpuperf.engine.timing import Timed, run_batch
from pytest_gpuperf.errors import ConfigError

AS_IT_RUNS_WAITS = "it waits for the device (it synchronises the host)"


def first_calls(sampler: Sampler, calls: Sequence[Callable[[], object]]) -> None:
    """One call of each (lazy compiles, module loads, autotuning), untimed and outside the
    hard limit, which starts after them (Sampler.first_calls_done)."""
    for call in calls:
        call()
    sampler.backend.synchronize()
    sampler.first_calls_done(alarm=True)


def check_queues_work(sampler: Sampler, work: Timed) -> None:
    """Refuse a callable that queues no GPU work where it is timed: its event pairs would
    time nothing, and its 'efficiency' would be thousands of percent. Compared with an
    event pair around nothing, a real launch takes at least NO_WORK_MARGIN_S more. The
    work's first calls are made (`first_calls`)."""
    nothing = Timed("nothing", lambda _args: None, [[()]], 1)
    batch = run_batch(
        sampler.engine, [work, nothing], 5, cold=False, spin_s=2e-3, clock=sampler.clock
    )
    timed, empty = batch.samples_s
    if not timed or not empty:
        return  # the queue starved: no verdict from this probe
    if min(timed) <= float(np.median(empty)) + NO_WORK_MARGIN_S:
        raise ConfigError(
            f"{sampler.label}: the callable queued no GPU work on the stream being timed "
            f"(its event pairs took {min(timed) * 1e6:.3f} us, as long as a pair around "
            "nothing): gpu_bench.run(fn) times what fn launches on the default stream. "
            "Launch the work there (PyTorch: the current stream; CuPy: the null stream), "
            "or measure the kernel with gpu_bench(kernel, ...)"
        )


def check_host_waits(
    sampler: Sampler,
    works: list[Timed],
    sides: list[tuple[Callable[[], object], Callable[[], object] | None]],
) -> None:
    """Time the works as they run when one side's call waits for the device (a callable that
    synchronises the host: engine/host_waits.py), all of them alike, so that both sides of a
    pair are timed one way; refuse a setup that waits. `sides` holds each side's (call, its
    setup or None), each called once already; a setup is only ever called before its call."""
    sampler.phase = "the probe for host waits"
    engine, clock = sampler.engine, sampler.clock
    if any(waits_on_device(engine, call, clock) for call, _ in sides):
        sampler.as_it_runs_why = AS_IT_RUNS_WAITS
        for work in works:
            work.as_it_runs = True
        return  # a wait in its setup changes nothing then: it runs before the event pair
    for call, setup in sides:
        if setup is not None and waits_on_device(engine, _after(setup, call), clock):
            raise ConfigError(
                f"{sampler.label}: setup= waits for the device (it synchronises the host), "
                "so no timed launch after it can find the device busy and every sample "
                "would time the host's launch; queue the reset without waiting "
                "(gpu_bench.fill, gpu_bench.copy, gpu_bench.launch(..., wait=False); in "
                "PyTorch, x.copy_(x0)) and keep .item(), .cpu() and the like out of it"
            )


def after(setup: Callable[[], object] | None, call: Callable[[], object]) -> Callable[[], object]:
    """`call`, preceded by `setup` where there is one."""
    return call if setup is None else _after(setup, call)


def _after(setup: Callable[[], object], call: Callable[[], object]) -> Callable[[], None]:
    def both() -> None:
        setup()
        call()

    return both
