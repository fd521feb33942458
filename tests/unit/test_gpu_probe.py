"""The degraded-GPU probe: the comparison rule, and its rates on simulated GPUs over 50 seeds
(bench/gpu_probe_rates.py measures the same with more; docs/benchmarks.md quotes it)."""

from __future__ import annotations

import contextlib
import importlib.util
from pathlib import Path

from pytest_gpuperf.config.options import DEFAULT_GPU_MARGIN
from pytest_gpuperf.session import gpu_probe
from pytest_gpuperf.session.gpu_probe import GpuProbe, compare
from pytest_gpuperf.simulate import device as sim

BENCH = Path(__file__).resolve().parents[2] / "bench" / "gpu_probe_rates.py"


def gpu(index: int, bandwidth_bps: float, name: str = "GPU") -> GpuProbe:
    return GpuProbe(index, name, None, None, bandwidth_bps, 0.005, 0.01)


def test_each_gpu_is_compared_with_the_median_of_the_others():
    found = compare([gpu(0, 100), gpu(1, 100), gpu(2, 101), gpu(3, 95)], 0.03)
    ratios = [round(g.ratio, 4) for g in found]
    assert ratios == [1.0, 1.0, 1.01, 0.95]
    assert [g.degraded for g in found] == [False, False, False, True]


def test_margin_zero_names_nothing_and_a_lone_gpu_has_no_ratio():
    assert not any(g.degraded for g in compare([gpu(0, 100), gpu(1, 50)], 0.0))
    assert compare([gpu(0, 100)], 0.03)[0].ratio is None


def open_sim(speeds, seed=7, device="h100-sxm"):
    return lambda index: sim.open(index, device=device, seed=seed, gpu_speeds=speeds)


def run_probe(speeds, *, refuse=False, seed=7, opener=None):
    return gpu_probe.probe_gpus(
        "sim",
        list(range(len(speeds))),
        DEFAULT_GPU_MARGIN,
        open_gpu=opener or open_sim(speeds, seed),
        cache_bytes_of=lambda backend: backend.spec.cache_bytes,
        hold=lambda backend: contextlib.nullcontext(),
        refuse=refuse,
    )


def test_the_probe_refuses_a_degraded_gpu_and_never_the_fastest():
    report = run_probe((1.0, 1.0, 0.9), refuse=True)
    assert report.refused == (2,) and report.usable(3) == (0, 1)
    # the fastest GPU is at least as fast as the median of the others: never degraded
    found = compare([gpu(0, 50), gpu(1, 60), gpu(2, 100)], 0.03)
    assert [g.degraded for g in found] == [True, True, False]


def test_gpus_of_different_models_are_not_compared():
    def opener(index):
        return sim.open(index, device=("h100-sxm", "mi300x")[index], seed=3, gpu_speeds=(1, 1))

    report = run_probe((1.0, 1.0), opener=opener)
    assert "different models" in report.skipped and not report.degraded


def test_the_probe_reads_each_gpus_clocks_and_its_own_noise():
    report = run_probe((1.0, 1.0))
    assert all(g.clocks is not None and g.clocks.source == "sim" for g in report.gpus)
    assert all(g.bandwidth_bps > 0 and 0 < g.spread < 0.05 for g in report.gpus)


def test_over_50_seeds_a_5pct_slow_gpu_is_named_and_a_healthy_pair_is_not():
    spec = importlib.util.spec_from_file_location("gpu_probe_rates", BENCH)
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    found = bench.rates(50, "h100-sxm")
    assert found["healthy"]["named"] == 0
    assert found["slow_5pct"]["as_expected"] == 50
    # room on both sides of the margin
    assert found["healthy"]["lowest_ratio_min"] > 1 - DEFAULT_GPU_MARGIN + 0.01
    assert found["slow_5pct"]["lowest_ratio_max"] < 1 - DEFAULT_GPU_MARGIN - 0.005
