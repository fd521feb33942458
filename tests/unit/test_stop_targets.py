"""Where a measurement learns the decision it serves (session/stop_targets.py): a save keeps
its minimum sampling time, hot mode and a run with nothing to judge stop at the precision
rule, an A/B run never reads a stored baseline for its stop, and a stored baseline gives the
stored target with the backend's horizon and process wander."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from pytest_gpuperf.config.settings import TestSettings
from pytest_gpuperf.engine import sequential as seq
from pytest_gpuperf.engine.policy import STORED_MIN_SAMPLES, STORED_MIN_SAMPLING_S
from pytest_gpuperf.gate.policy import PROCESS_WANDER_S
from pytest_gpuperf.gate.suite import SuiteBudget
from pytest_gpuperf.runtime.devices import KNOWN_DEVICES
from pytest_gpuperf.runtime.info import DeviceInfo
from pytest_gpuperf.session.stop_targets import measure_plan
from tests.unit.test_sequential import entry

H100 = KNOWN_DEVICES["h100-sxm"]


class Store:
    """The one lookup measure_plan makes, recorded."""

    def __init__(self, ref: Any) -> None:
        self.ref = ref
        self.asked: list[tuple] = []

    def lookup(self, key: str, test_id: str, name: str, cache: str, *, board: str) -> Any:
        self.asked.append((key, test_id, name, cache, board))
        return self.ref


def session(ref: Any = None, *, save: bool = False, compare_ref: str | None = None) -> Any:
    store = Store(ref)
    return SimpleNamespace(
        settings=SimpleNamespace(save=save, compare_ref=compare_ref),
        baselines=lambda: store,
        suite=SuiteBudget(0.01, 4),
        device=lambda: SimpleNamespace(backend=SimpleNamespace(settings=None)),
        store=store,
    )


def info(backend: str = "cuda") -> DeviceInfo:
    return DeviceInfo(
        backend=backend,
        index=0,
        name="NVIDIA H100 80GB HBM3",
        arch="sm_90",
        compute_units=132,
        l2_bytes=50 << 20,
        memory_bytes=80 << 30,
        warp_size=32,
        max_threads_per_block=1024,
        shared_bytes_per_block=48 << 10,
        uuid="GPU-1",
        simulated=backend == "sim",
    )


def plan(owner: Any, cache: str = "cold", backend: str = "cuda", floor: float | None = None):
    return measure_plan(
        owner,
        TestSettings("t.py::test_k", budget_s=1.0),
        info(backend),
        H100,
        label="k",
        cache=cache,
        bytes_moved=int(0.8 * H100.peak_bps * 27e-6),
        floor=floor,
    )


REF = entry([0.0], time_s=27e-6).to_ref("f.toml")


def test_a_save_keeps_its_minimum_sampling_time():
    got = plan(session(REF, save=True))
    assert got.stop is None and got.min_sampling_s == STORED_MIN_SAMPLING_S


def test_a_stored_baseline_gives_the_stored_target():
    owner = session(REF)
    got = plan(owner)
    assert got.min_sampling_s == 0.0
    assert got.stop is not None and got.stop.kind == seq.STORED
    assert got.stop.horizon_s == STORED_MIN_SAMPLING_S
    assert got.stop.alpha == pytest.approx(0.01 / 4)  # the run's level for one measurement
    assert got.stop.wander_s == PROCESS_WANDER_S["cuda"]["cold"]
    assert got.stop.horizon_samples == STORED_MIN_SAMPLES
    assert owner.store.asked == [("h100-sxm", "t.py::test_k", "k", "cold", "GPU-1")]
    simulated = plan(session(REF), backend="sim")
    assert simulated.stop is not None and simulated.stop.horizon_s == seq.SIM_STORED_HORIZON_S
    assert simulated.stop.wander_s == 0.0 and simulated.stop.horizon_samples == 0


def test_nothing_to_judge_hot_mode_and_an_ab_run_stop_at_precision():
    assert plan(session(None)).stop == seq.StopTarget()
    assert plan(session(REF), cache="hot").stop == seq.StopTarget()
    comparing = session(REF, compare_ref="main")
    assert plan(comparing).stop == seq.StopTarget()
    assert comparing.store.asked == []  # stored baselines are shown, never gated, in A/B
    floored = plan(session(None), floor=0.5).stop
    assert floored is not None and floored.kind == seq.FLOOR


def test_cold_kernels_on_a_gpu_spread_their_placements_saved_and_judged():
    assert plan(session(REF, save=True)).spread_placements
    assert plan(session(None, save=True)).spread_placements  # a first save too
    assert plan(session(REF)).spread_placements
    # what no stored judgement needs, a floor or nothing to judge, pays no copies for it
    assert not plan(session(None)).spread_placements
    assert not plan(session(None), floor=0.05).spread_placements
    assert plan(session(None), floor=0.05).stop.horizon_samples == 0
    assert not plan(session(REF), cache="hot").spread_placements
    assert not plan(session(REF, save=True), cache="rotate").spread_placements
    assert not plan(session(REF), backend="sim").spread_placements
