"""One pairing policy (gate/pairing.py) for the `gpu_bench` fixture and the library: the same
pair, on the same simulated device, is sampled for the same budget and decided the same way
whether a test compares it through the fixture or a script through `Device.compare`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import pytest_gpuperf as gp
from pytest_gpuperf.config.settings import Settings, TestSettings
from pytest_gpuperf.engine.measure import MeasureSettings
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.gate.ab import check_comparison
from pytest_gpuperf.gate.pairing import PAIR_BUDGETS, PAIR_MAX_SAMPLES, PairPolicy
from pytest_gpuperf.gate.policy import DEFAULT_COMPARE_THRESHOLD
from pytest_gpuperf.runtime import open_backend
from pytest_gpuperf.session.bench_session import BenchSession
from pytest_gpuperf.session import kernel_pairs
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
        common = {
            "grid": N // 256,
            "block": 256,
            "args": _buffers(device.backend),
            "bytes_moved": 12 * N,
            "device": device.match.spec,
            "name": "pair",
        }
        settings = MeasureSettings(cache="cold", budget_s=BUDGET_S)
        return kernel_pairs.pair(bench, kernel, kernel, settings, 0.95, 0, common)
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
