"""One pairing policy (gate/pairing.py) for the `gpu_bench` fixture and the library: the same
pair, on the same simulated device, is sampled for the same budget and decided the same way
whether a test compares it through the fixture or a script through `Device.compare`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import pytest_gpuperf as gp
from pytest_gpuperf.config.settings import Settings, TestSettings
from pytest_gpuperf.engine.launch import Launch
from pytest_gpuperf.engine.measure import MeasureSettings
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.gate.ab import check_comparison
from pytest_gpuperf.gate.pairing import PAIR_BUDGETS, PAIR_MAX_SAMPLES, PairPolicy
from pytest_gpuperf.gate.policy import DEFAULT_COMPARE_THRESHOLD
from pytest_gpuperf.runtime import open_backend
from pytest_gpuperf.session import kernel_pairs
from pytest_gpuperf.session.bench_session import BenchSession
from pytest_gpuperf.session.fixture import GpuBench

KERNEL = Path(__file__).resolve().parents[2] / "kernels" / "vector_add.hip"
N = 1 << 20  # 12 MiB moved: a short kernel, whose identical pair runs out of budget undecided
SEED = 11
BUDGET_S = 0.25  # one kernel's (--gpuperf-budget); the pair gets PAIR_BUDGETS of them


def _buffers(backend):
    a = np.random.default_rng(0).random(N, dtype=np.float32)
    return (backend.to_device(a), backend.to_device(a), backend.alloc(a.nbytes), N)


def _through_the_fixture(tmp_path):
    session = BenchSession(
        Settings(backends=("sim",), measure=True),
        rootdir=tmp_path,
        opener=lambda name, index, **options: open_backend(name, index, seed=SEED, **options),
    )
    device = session.device()
    bench = GpuBench(session, device, TestSettings("test_pairing.py::test_pair"))
    try:
        kernel = bench.kernel(KERNEL, "vector_add")
        launch = Launch.of(N // 256, 256, _buffers(device.backend))
        common = {"bytes_moved": 12 * N, "device": device.match.spec, "name": "pair"}
        settings = MeasureSettings(cache="cold", budget_s=BUDGET_S)
        return kernel_pairs.pair(bench, kernel, kernel, launch, settings, 0.95, 0, common)
    finally:
        bench.close()
        session.close()


def _through_the_library():
    with gp.open_device("sim", seed=SEED) as device:
        kernel = device.kernel(KERNEL, "vector_add")
        return device.compare(
            kernel,
            kernel,
            grid=N // 256,
            block=256,
            args=_buffers(device.backend),
            bytes=12 * N,
            budget_s=BUDGET_S,
            name="pair",
            threshold=DEFAULT_COMPARE_THRESHOLD,
        )


def test_the_fixture_and_the_library_decide_a_pair_identically(tmp_path):
    fixture, library = _through_the_fixture(tmp_path), _through_the_library()
    # Undecided at the budget: the case where the budgets, not the gate, end the pair.
    assert fixture.stopped_by == "budget"
    assert fixture.pairs > 2000  # more than MeasureSettings' own limit: the pair's applies
    assert fixture.head.simulated and library.head.simulated
    assert (library.pairs, library.ratio, library.ratio_ci, library.stopped_by) == (
        fixture.pairs,
        fixture.ratio,
        fixture.ratio_ci,
        fixture.stopped_by,
    )
    states = {
        check_comparison(
            paired, ref="base", ref_commit="", threshold=DEFAULT_COMPARE_THRESHOLD
        ).state
        for paired in (fixture, library)
    }
    assert len(states) == 1


def test_the_run_and_the_library_default_to_one_policy(tmp_path):
    session = BenchSession(Settings(backends=("sim",)), rootdir=tmp_path)
    run = session.pair_policy
    assert run == PairPolicy(threshold=DEFAULT_COMPARE_THRESHOLD)
    assert (run.budgets, run.max_samples) == (PAIR_BUDGETS, PAIR_MAX_SAMPLES)
    kernel = MeasureSettings(cache="cold", budget_s=0.5)
    pair = run.settings(kernel, 0.99)
    assert (pair.budget_s, pair.max_samples, pair.confidence) == (2.0, PAIR_MAX_SAMPLES, 0.99)
    assert pair.cache == "cold"
    assert PairPolicy(threshold=None).stop_when(None, None, None) is None  # type: ignore[arg-type]


def test_a_caller_may_ask_for_other_budgets_and_bad_ones_are_refused():
    with gp.open_device("sim", seed=SEED) as device:
        kernel = device.kernel(KERNEL, "vector_add")
        args = _buffers(device.backend)
        launch = {"grid": N // 256, "block": 256, "args": args, "bytes": 12 * N}
        short = device.compare(kernel, kernel, budget_s=0.05, budgets=1, max_pairs=300, **launch)
        assert short.pairs <= 300
        with pytest.raises(ConfigError, match="budgets must be positive"):
            device.compare(kernel, kernel, budgets=0, **launch)
        with pytest.raises(ConfigError, match="max_samples >= 3"):
            device.compare(kernel, kernel, max_pairs=2, **launch)


# -- a callable pair over several captures a side ------------------------------------------------


def _capture(backend, kernel, side, load, events, n):
    """One capture of a callable: its own buffers, and a setup that resets its own output."""
    a = np.full(n, 1.0, np.float32)
    args = (backend.to_device(a), backend.to_device(a), backend.alloc(a.nbytes), n)

    def setup():
        events.append(("setup", side, load))

    def fn():
        events.append(("call", side, load))
        backend.launch(kernel, n // 256, 256, args)

    return fn, setup


def test_a_callable_pair_nests_over_its_captures_each_with_its_own_setup():
    """Head capture i against base capture i is load i: the pair's interval is nested over
    the captures (drift measured from their spread, each on buffers of its own, which the
    simulated device places apart), and every timed call of a capture follows its own
    setup, not another capture's."""
    from pytest_gpuperf.engine.measure import measure_callable_pair
    from pytest_gpuperf.runtime.devices import get_device

    backend = open_backend("sim", 0, seed=SEED, buffer_code_spread=0.02)
    kernel = backend.compile(KERNEL).kernel("vector_add")
    n, loads, events = 1 << 16, 4, []
    heads = [_capture(backend, kernel, "head", i, events, n) for i in range(loads)]
    bases = [_capture(backend, kernel, "base", i, events, n) for i in range(loads)]
    paired = measure_callable_pair(
        backend,
        [fn for fn, _ in heads],
        [fn for fn, _ in bases],
        setup=[setup for _, setup in heads],
        base_setup=[setup for _, setup in bases],
        bytes_moved=12 * n,
        device=get_device("mi300x"),
        settings=MeasureSettings(cache="cold", budget_s=0.1),
        name="captures",
    )
    assert paired.loads == loads and paired.drift_basis == "measured"
    assert sorted(set(paired.pair_loads)) == list(range(loads))
    followed = [events[i + 1] for i, event in enumerate(events[:-1]) if event[0] == "setup"]
    setups = [event for event in events[:-1] if event[0] == "setup"]
    assert len(setups) > 4 * loads
    assert all(after == ("call", *setup[1:]) for setup, after in zip(setups, followed, strict=True))


def test_a_callable_pair_refuses_sides_of_different_lengths():
    from pytest_gpuperf.engine.measure import measure_callable_pair
    from pytest_gpuperf.runtime.devices import get_device

    backend = open_backend("sim", 0, seed=SEED)
    with pytest.raises(ConfigError, match="as many base callables as head ones, got 2 and 1"):
        measure_callable_pair(
            backend,
            [lambda: None, lambda: None],
            [lambda: None],
            bytes_moved=4,
            device=get_device("mi300x"),
        )
