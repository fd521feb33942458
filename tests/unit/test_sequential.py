"""The sequential stopping rule (engine/sequential.py) and the targets the gate gives it
(gate/stop_target.py): the boundary's shape, its error held over every look on seeded
simulated batches (independent samples and samples whose level wanders), the edges where
the stored gate's verdict really changes, and the rule's edge cases."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from pytest_gpuperf.baseline import BaselineEntry, SaveRecord
from pytest_gpuperf.engine import sequential as seq
from pytest_gpuperf.engine.results import Measurement
from pytest_gpuperf.engine.sequential import Edge, StopTarget
from pytest_gpuperf.gate.policy import prior_run_spread
from pytest_gpuperf.gate.stop_target import stop_target_for, stored_edges
from pytest_gpuperf.gate.stored import check_baseline
from pytest_gpuperf.record.checks import IMPROVED, REGRESSED, WITHIN_NOISE

PEAK_BPS = 3.352e12

LOOKS = [64 * 2**k for k in range(8)]  # geometric looks, as the sampling loop's batches


def test_the_boundary_narrows_with_samples_but_slower_than_a_fixed_n_interval():
    counts = np.array([10, 64, 256, 1024, 4096, 50_000])
    radius = seq.mixture_radius(counts, 0.01)
    assert np.all(np.diff(radius) < 0)  # more samples: a tighter bound
    in_sigmas = radius * np.sqrt(counts)  # the bound in standard errors of the mean
    assert np.all(in_sigmas > 2.576)  # always wider than a fixed-n 99% interval...
    # tightest near TIGHT_AT_SAMPLES (256), widening only slowly beyond it
    assert int(np.argmin(in_sigmas)) == 2 and np.all(np.diff(in_sigmas[2:]) > 0)
    assert in_sigmas[-1] < 4.5
    # a stricter alpha, a wider bound, at every count
    assert np.all(seq.mixture_radius(counts, 0.001) > radius)


def _coverage_misses(rows: np.ndarray, alpha: float) -> float:
    """Share of rows (runs, in time order) whose bound excluded the true level (0) at any
    of LOOKS."""
    missed = np.zeros(rows.shape[0], dtype=bool)
    for n in LOOKS:
        centre, radius = seq.bounds(rows[:, :n], alpha)
        missed |= np.abs(centre) > radius
    return float(missed.mean())


def test_alpha_is_held_over_every_look_for_independent_samples():
    rng = np.random.default_rng(46)
    rows = rng.normal(0.0, 0.02, size=(2000, LOOKS[-1]))
    for alpha in (0.2, 0.05):
        assert _coverage_misses(rows, alpha) <= alpha


def _wandering(runs: int, n: int, tau: float, wander: float, seed: int) -> np.ndarray:
    """Log times of `runs` processes: an AR(1) level (correlation time `tau` samples, sd
    `wander`) under independent jitter of 1%."""
    rng = np.random.default_rng(seed)
    keep = math.exp(-1 / tau)
    shocks = rng.normal(0.0, wander * math.sqrt(1 - keep**2), size=(runs, n))
    level = np.zeros((runs, n))
    level[:, 0] = rng.normal(0.0, wander, size=runs)
    for i in range(1, n):
        level[:, i] = keep * level[:, i - 1] + shocks[:, i]
    return level + rng.normal(0.0, 0.01, size=(runs, n))


def test_alpha_is_held_when_the_level_wanders_faster_than_a_segment():
    """A level that wanders within a few samples: batch medians see it; a bound made of the
    samples' independent scatter alone misses far more often than alpha."""
    rows = _wandering(1000, LOOKS[-1], tau=5, wander=0.006, seed=47)
    assert _coverage_misses(rows, 0.2) <= 0.2
    iid_only = np.zeros(rows.shape[0], dtype=bool)
    for count in LOOKS:
        part = rows[:, :count]
        mad = np.median(np.abs(part - np.median(part, 1)[:, None]), 1)
        sigma = seq.MEDIAN_FACTOR * seq.MAD_TO_SIGMA * mad
        iid_only |= np.abs(np.median(part, 1)) > seq.mixture_radius(count, 0.2) * sigma
    assert iid_only.mean() > 0.2 + 0.1


def test_a_slow_wander_needs_the_measured_figure_and_with_it_the_horizon_is_not_crossed():
    """A level that wanders over hundreds of samples: the first looks cannot see it, and the
    horizon's median lies outside their bound far more often than alpha; with the wander's
    figure (as measured between processes: the sd of a reference-length level about the
    horizon's) the rule's bound holds the horizon's median at every look."""
    rows = _wandering(1000, LOOKS[-1], tau=60, wander=0.006, seed=48)
    reference = 256
    sample_s = seq.WANDER_REFERENCE_S / reference
    horizon = np.median(rows, axis=1)
    figure = float(np.std(np.median(rows[:, :reference], axis=1) - horizon))
    target = StopTarget(
        seq.STORED,
        (Edge(1.0),),
        alpha=0.2,
        horizon_s=LOOKS[-1] * sample_s,
        wander_s=figure,
    )
    blind = np.zeros(rows.shape[0], dtype=bool)
    told = np.zeros(rows.shape[0], dtype=bool)
    for count in LOOKS[:-1]:
        centre, radius = seq.bounds(rows[:, :count], 0.2)
        blind |= np.abs(centre - horizon) > radius
        wander = target.wander_rel(count * sample_s, 1.0)
        centre, radius = seq.bounds(rows[:, :count], 0.2, wander_rel=wander)
        told |= np.abs(centre - horizon) > radius
    assert blind.mean() > 0.2 + 0.1
    assert told.mean() <= 0.2


def _target(*edges: Edge, horizon_s: float = 0.3) -> StopTarget:
    return StopTarget(seq.STORED, edges, alpha=0.01, horizon_s=horizon_s, max_samples=50_000)


def _samples(level_s: float, n: int, seed: int = 1) -> list[float]:
    return list(level_s * np.exp(np.random.default_rng(seed).normal(0, 0.01, n)))


def test_far_inside_the_band_stops_at_the_first_look_it_may():
    target = _target(Edge(11e-6, slow_early=False), Edge(9e-6))
    samples = _samples(10e-6, 200)
    reason = seq.stop_reason(
        target,
        samples[: seq.MIN_DECIDE_SAMPLES - 1],
        precise=True,
        sampling_s=0.001,
        max_samples=2000,
    )
    assert reason == ""  # too few samples to see a wander
    reason = seq.stop_reason(target, samples, precise=True, sampling_s=0.002, max_samples=2000)
    assert reason == seq.DECIDED
    # precision is still required first
    reason = seq.stop_reason(target, samples, precise=False, sampling_s=0.002, max_samples=2000)
    assert reason == ""


def test_near_an_edge_it_samples_to_the_horizon_and_a_regression_is_never_decided_early():
    near = _target(Edge(10.002e-6, slow_early=False), Edge(9e-6))
    samples = _samples(10e-6, 4000)
    assert seq.stop_reason(near, samples, precise=True, sampling_s=0.1, max_samples=2000) == ""
    assert (
        seq.stop_reason(near, samples, precise=True, sampling_s=0.3, max_samples=2000)
        == seq.HORIZON
    )
    slow = _samples(13e-6, 4000)  # 30% beyond the regressed edge: still waits
    far = _target(Edge(10e-6, slow_early=False), Edge(9e-6))
    assert seq.stop_reason(far, slow, precise=True, sampling_s=0.1, max_samples=2000) == ""
    # a floor missed by far is decided early (its slow side may stop)
    floor = StopTarget(seq.FLOOR, (Edge(10e-6),), alpha=0.05)
    assert seq.stop_reason(floor, slow, precise=True, sampling_s=0.1, max_samples=2000) == "decided"
    # ...and without a horizon a floor near its edge stops at max_samples (or the budget)
    close = StopTarget(seq.FLOOR, (Edge(10.001e-6),), alpha=0.05)
    assert (
        seq.stop_reason(close, samples[:2000], precise=True, sampling_s=0.1, max_samples=2000)
        == "max_samples"
    )


def test_a_horizon_with_too_few_samples_does_not_stop_a_stalled_measurement():
    """A host stall that ate the horizon's time leaves a few samples: sampling goes on (the
    budget still stops it) until horizon_samples."""
    near = replace(_target(Edge(10.002e-6, slow_early=False)), horizon_samples=256)
    samples = _samples(10e-6, 4000)
    few = dict(precise=True, sampling_s=0.3, max_samples=50_000)
    assert seq.stop_reason(near, samples[:100], **few) == ""
    assert seq.stop_reason(near, samples[:256], **few) == seq.HORIZON
    with pytest.raises(ValueError, match="horizon_samples"):
        replace(near, horizon_samples=-1)


def test_the_decision_is_monotone_in_the_distance_to_the_edge():
    samples = _samples(10e-6, 512, seed=3)
    decided = [
        seq.decided(seq.look(samples, 0.01), _target(Edge(10e-6 * (1 + gap), slow_early=False)))
        for gap in (0.0, 0.001, 0.002, 0.004, 0.008, 0.016, 0.05)
    ]
    assert decided == sorted(decided) and decided[0] is False and decided[-1] is True


def test_a_precision_target_is_the_precision_rule():
    target = StopTarget()
    assert seq.stop_reason(target, [1e-5] * 10, precise=True, sampling_s=0, max_samples=20) == (
        "precision"
    )
    assert seq.stop_reason(target, [1e-5] * 19, precise=False, sampling_s=0, max_samples=20) == ""
    assert (
        seq.stop_reason(target, [1e-5] * 20, precise=False, sampling_s=0, max_samples=20)
        == "max_samples"
    )


def test_a_timer_grid_widens_the_bound_by_half_a_step():
    rng = np.random.default_rng(5)
    raw = 7.6e-6 + rng.normal(0, 40e-9, 2000)
    ticked = list(np.round(raw / 32e-9) * 32e-9)
    assert seq.grid_step(ticked) == pytest.approx(32e-9, rel=1e-6)
    assert seq.grid_step(list(raw)) == 0.0
    on_grid, off_grid = seq.look(ticked, 0.01), seq.look(list(raw), 0.01)
    width = math.log(on_grid.high_s / on_grid.low_s) - math.log(off_grid.high_s / off_grid.low_s)
    assert width > 0.9 * 32e-9 / 7.6e-6


def test_bad_targets_are_refused():
    with pytest.raises(ValueError, match="kind"):
        StopTarget("maybe")
    with pytest.raises(ValueError, match="alpha"):
        StopTarget(seq.STORED, (Edge(1e-6),), alpha=0.0)
    with pytest.raises(ValueError, match="horizon"):
        StopTarget(seq.STORED, (Edge(1e-6),), horizon_s=math.nan)
    with pytest.raises(ValueError, match="no edges"):
        StopTarget(seq.PRECISION, (Edge(1e-6),))
    with pytest.raises(ValueError, match="positive time"):
        Edge(math.inf)
    with pytest.raises(ValueError, match="positive time"):
        Edge(0.0)


def test_the_horizon_is_the_minimum_it_replaces():
    assert seq.stored_horizon_s("cuda", "cold", 1.0, 0.3) == 0.3
    assert seq.stored_horizon_s("cuda", "rotate", 0.1, 0.1) == 0.1
    assert seq.stored_horizon_s("cuda", "hot", 1.0, 0.0) == 0.0
    assert seq.stored_horizon_s("sim", "cold", 1.0, 0.0) == seq.SIM_STORED_HORIZON_S
    assert seq.stored_horizon_s("sim", "cold", 0.02, 0.0) == 0.02


# -- the gate's edges ---------------------------------------------------------------------


def entry(logs: list[float], *, time_s: float) -> BaselineEntry:
    """A measured CUDA entry whose saves have these log efficiencies (around log 0.8)."""
    saves = tuple(
        SaveRecord(
            efficiency=0.8 * math.exp(y),
            efficiency_ci=(0.8 * math.exp(y), 0.8 * math.exp(y)),
            time_s=time_s,
            when=f"2026-11-28T00:00:{i:02d}Z",
            backend="cuda",
            fingerprint="sha256:k",
        )
        for i, y in enumerate(logs)
    )
    centre = float(np.median([s.efficiency for s in saves]))
    prior = prior_run_spread("cuda", time_s, "cold")
    return BaselineEntry(
        test_id="t.py::test_k",
        name="k",
        cache="cold",
        efficiency=centre,
        efficiency_ci=(centre, centre),
        run_spread=prior,
        bandwidth_bps=centre * PEAK_BPS,
        time_s=time_s,
        bytes_moved=int(centre * PEAK_BPS * time_s),
        spread_basis="history" if len(saves) >= 3 else "prior",
        prior_spread=prior,
        saves=saves,
    )


def _measured(time_s: float, bytes_moved: int) -> Measurement:
    return Measurement(
        name="k",
        kernel="k",
        cache="cold",
        bytes_moved=bytes_moved,
        time_s=time_s,
        time_ci_s=(time_s, time_s),
        samples_s=(time_s,) * 100,
        peak_bps=PEAK_BPS,
        device_key="h100-sxm",
        device_name="NVIDIA H100 SXM 80GB",
        backend="cuda",
        simulated=False,
        queue_method="graph-batch",
    )


@pytest.mark.parametrize("time_s", [7.5e-6, 27e-6, 210e-6])
@pytest.mark.parametrize("saves", [1, 3])
def test_the_edges_are_where_the_stored_verdict_changes(time_s, saves):
    logs = [0.0, 0.003, -0.002][:saves]
    ref = entry(logs, time_s=time_s).to_ref("f.toml")
    bytes_moved = int(0.8 * PEAK_BPS * time_s)
    kwargs = {"bytes_moved": bytes_moved, "peak_bps": PEAK_BPS, "tolerance": 0.01}
    regressed, improved = stored_edges(ref, false_alarm_rate=0.01, **kwargs)
    assert not regressed.slow_early and improved.slow_early

    def outcome(t: float) -> str:
        return check_baseline(_measured(t, bytes_moved), ref, tolerance=0.01).outcome

    assert outcome(regressed.time_s * 1.0001) == REGRESSED
    assert outcome(regressed.time_s * 0.9999) == WITHIN_NOISE
    assert outcome(improved.time_s * 0.9999) == IMPROVED
    assert outcome(improved.time_s * 1.0001) == WITHIN_NOISE
    # a stricter level (more tests in the run) widens the band: the edges move out
    strict, _ = stored_edges(ref, false_alarm_rate=0.0001, **kwargs)
    assert strict.time_s >= regressed.time_s


def test_the_target_follows_what_is_known():
    ref = entry([0.0], time_s=27e-6).to_ref("f.toml")
    common = {
        "bytes_moved": int(0.8 * PEAK_BPS * 27e-6),
        "peak_bps": PEAK_BPS,
        "tolerance": 0.01,
        "false_alarm_rate": 0.003,
        "horizon_s": 0.3,
        "max_samples": 50_000,
    }
    stored = stop_target_for(ref, **common)
    assert stored.kind == seq.STORED and stored.alpha == 0.003 and stored.horizon_s == 0.3
    assert [e.what for e in stored.edges] == ["regressed", "improved"]
    both = stop_target_for(ref, floor=0.5, **common)
    assert [e.what for e in both.edges] == ["regressed", "improved", "floor"]
    floor = stop_target_for(None, floor=0.5, **common)
    assert floor.kind == seq.FLOOR and floor.horizon_s == 0 and floor.max_samples == 0
    assert floor.edges[0].time_s == pytest.approx(common["bytes_moved"] / (PEAK_BPS * 0.5))
    assert stop_target_for(None, **common) == StopTarget()
