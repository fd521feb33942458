"""verdict.decide: every path through the floor and baseline gates, and what the messages say."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_gpuperf.results import (
    FAIL,
    IMPROVED,
    MARGINAL,
    NO_BASELINE,
    OTHER_DEVICE,
    PASS,
    REGRESSED,
    WITHIN_NOISE,
    BaselineRef,
    Measurement,
    Verdict,
)
from pytest_gpuperf.verdict import FALSE_ALARM_RATE, decide, noise_allowance

PEAK_BPS = 5.3e12  # MI300X datasheet: 5.3 TB/s
BYTES = 12 * (32 << 20)  # the MI300X blog post's 32M-element fp32 vector add
UPDATE = "pytest --gpuperf --gpuperf-save 'tests/perf/test_vector_add.py::test_vector_add'"


def measurement(efficiency: float, rel_ci: float = 0.002, **overrides) -> Measurement:
    """A measurement whose median efficiency is `efficiency`, time interval +-rel_ci."""
    time_s = BYTES / (efficiency * PEAK_BPS)
    fields = dict(
        name="test_vector_add[cold]",
        kernel="vector_add",
        cache="cold",
        bytes_moved=BYTES,
        time_s=time_s,
        time_ci_s=(time_s * (1 - rel_ci), time_s * (1 + rel_ci)),
        samples_s=(time_s,) * 400,
        peak_bps=PEAK_BPS,
        device_key="mi300x",
        device_name="AMD Instinct MI300X",
        backend="sim",
        simulated=True,
        queue_method="flush kernel",
        stopped_by="budget",
    )
    fields.update(overrides)
    return Measurement(**fields)


def baseline(efficiency: float, **overrides) -> BaselineRef:
    fields = dict(
        efficiency=efficiency,
        efficiency_ci=(efficiency * 0.998, efficiency * 1.002),
        run_spread=0.01,
        bandwidth_bps=efficiency * PEAK_BPS,
        time_s=BYTES / (efficiency * PEAK_BPS),
        cache="cold",
        source="measured",
        provenance=(
            "simulated 2025-06-01T12:00:00Z on AMD Instinct MI300X (sim), commit 0123456789ab"
        ),
        path="baselines/mi300x.toml",
    )
    fields.update(overrides)
    return BaselineRef(**fields)


def gate(m: Measurement, **kwargs) -> Verdict:
    kwargs.setdefault("floor", None)
    kwargs.setdefault("baseline", None)
    kwargs.setdefault("tolerance", 0.05)
    kwargs.setdefault("update_command", UPDATE)
    return decide(m, **kwargs)


# -- floor --------------------------------------------------------------------------------------


def test_floor_passes_when_the_whole_interval_is_above():
    verdict = gate(measurement(0.85), floor=0.80)
    assert (verdict.status, verdict.floor_status, verdict.floor) == (PASS, PASS, 0.80)
    assert verdict.baseline_status == NO_BASELINE
    assert "85.00% reaches the floor 80.00%" in verdict.reason
    assert "\n" not in verdict.reason  # a pass is one line


def test_floor_fails_when_the_whole_interval_is_below():
    m = measurement(0.70)
    verdict = gate(m, floor=0.80)
    assert (verdict.status, verdict.floor_status) == (FAIL, FAIL)
    reason = verdict.reason
    assert reason.startswith("test_vector_add[cold] (kernel vector_add): efficiency 70.00%")
    assert "below the floor 80.00%" in reason
    assert "70.00% of peak = 3,710 GB/s" in reason  # measured: % and GB/s
    assert "expected >= 80.00% of peak = 4,240 GB/s" in reason  # expected: % and GB/s
    assert "-10.00 points of peak (-12.50% relative)" in reason  # difference
    assert "lies entirely below the floor" in reason  # noise
    assert "cache:" in reason and "cold" in reason
    assert "mi300x (AMD Instinct MI300X, simulated)" in reason
    assert "marginal" not in reason
    assert UPDATE not in reason  # re-recording a baseline does not fix a floor


def test_straddling_with_the_median_above_is_marginal_and_passes():
    verdict = gate(measurement(0.801, rel_ci=0.01), floor=0.80)
    assert (verdict.status, verdict.floor_status) == (MARGINAL, MARGINAL)
    assert "marginal" in verdict.reason
    assert "straddles the floor; decided on the median, which reaches it" in verdict.reason
    assert any("marginal" in note for note in verdict.notes)


def test_straddling_with_the_median_below_fails_and_says_marginal():
    verdict = gate(measurement(0.799, rel_ci=0.01), floor=0.80)
    assert (verdict.status, verdict.floor_status) == (FAIL, FAIL)
    assert "below the floor 80.00% (marginal" in verdict.reason
    assert "decided on the median, which misses it" in verdict.reason


def test_floor_of_exactly_the_measured_value():
    m = measurement(0.80, rel_ci=0.01)
    # the interval straddles a floor equal to the median: the median reaches it
    assert gate(m, floor=m.efficiency).status == MARGINAL
    # no spread at all: the interval is the point, which reaches the floor
    exact = measurement(0.80, rel_ci=0.0)
    verdict = gate(exact, floor=exact.efficiency)
    assert (verdict.status, verdict.floor_status) == (PASS, PASS)
    # the low end of the interval exactly at the floor still reaches it
    assert gate(m, floor=m.efficiency_ci[0]).status == PASS


def test_no_floor_and_no_baseline_passes_without_a_gate():
    verdict = gate(measurement(0.3))
    assert verdict.status == PASS
    assert verdict.floor_status is None
    assert verdict.reason == (
        "test_vector_add[cold] (kernel vector_add): no baseline for device mi300x, not compared"
    )


# -- baseline -----------------------------------------------------------------------------------


def test_within_noise_passes():
    base = baseline(0.80)
    verdict = gate(measurement(0.79), baseline=base)
    assert (verdict.status, verdict.baseline_status) == (PASS, WITHIN_NOISE)
    assert verdict.baseline is base
    assert verdict.delta == pytest.approx(0.79 / 0.80 - 1)
    assert verdict.allowance == 0.05  # tolerance dominates a quiet machine
    assert "within noise of the baseline" in verdict.reason
    assert verdict.notes == ()


def test_regression_fails_with_the_whole_story():
    base = baseline(0.80)
    verdict = gate(measurement(0.72), baseline=base, floor=0.5)
    assert (verdict.status, verdict.baseline_status, verdict.floor_status) == (
        FAIL,
        REGRESSED,
        PASS,
    )
    assert verdict.delta == pytest.approx(-0.10)
    reason = verdict.reason
    assert "regressed: 72.00% vs baseline 80.00% (-10.00%" in reason.splitlines()[0]
    assert "72.00% of peak = 3,816 GB/s" in reason  # measured
    assert "expected 80.00% of peak = 4,240 GB/s" in reason  # expected
    assert "-8.00 points of peak (-10.00% relative)" in reason  # difference
    assert "allowance:   +-5.00% = the larger of tolerance and noise: tolerance 5.00%" in reason
    assert "run-to-run +-1.0%" in reason
    assert "cold" in reason
    assert "mi300x (AMD Instinct MI300X, simulated)" in reason
    assert "simulated 2025-06-01T12:00:00Z on AMD Instinct MI300X" in reason  # provenance
    assert "baselines/mi300x.toml" in reason
    assert UPDATE in reason


def test_a_reported_baseline_says_where_it_was_reported():
    base = baseline(
        0.7185,
        efficiency_ci=(0.7185, 0.7185),
        run_spread=0.07,
        source="reported",
        provenance="reported in Making memory bound kernels go brr on a MI300X (rocprof)",
    )
    verdict = gate(measurement(0.55), baseline=base)
    assert (verdict.status, verdict.baseline_status) == (FAIL, REGRESSED)
    assert "reported in Making memory bound kernels go brr on a MI300X" in verdict.reason
    assert "reported, cache=cold" in verdict.reason
    # the +-7% between MI300X runs (baselines/mi300x.toml) widens the allowance beyond the
    # 5% tolerance
    assert verdict.allowance == pytest.approx(noise_allowance(0.002, 0.0, 0.07), rel=0.01)
    assert verdict.allowance > 0.1


def test_improvement_passes_with_a_note():
    verdict = gate(measurement(0.90), baseline=baseline(0.80))
    assert (verdict.status, verdict.baseline_status) == (PASS, IMPROVED)
    assert verdict.notes == (f"faster than baseline by 12.5%: consider --gpuperf-save ({UPDATE})",)
    assert "improved" in verdict.reason


def test_the_tolerance_is_the_least_allowance():
    m, base = measurement(0.768), baseline(0.80, run_spread=0.01)  # 4% drop, ~1.7% noise
    loose = gate(m, baseline=base, tolerance=0.05)
    assert (loose.status, loose.baseline_status, loose.allowance) == (PASS, WITHIN_NOISE, 0.05)
    tight = gate(m, baseline=base, tolerance=0.02)
    assert (tight.status, tight.baseline_status) == (FAIL, REGRESSED)
    assert tight.allowance == 0.02


def test_noise_widens_the_allowance_beyond_the_tolerance():
    m = measurement(0.74)  # 7.5% below
    assert gate(m, baseline=baseline(0.80, run_spread=0.01)).status == FAIL
    noisy = gate(m, baseline=baseline(0.80, run_spread=0.07))
    assert (noisy.status, noisy.baseline_status) == (PASS, WITHIN_NOISE)
    assert noisy.allowance > 0.075


def test_noise_allowance_formula():
    # run_spread is a +-range at 95% (BaselineRef), so sigma = spread / 1.96, counted for
    # both runs; CI half-widths at 95% likewise; one-sided at the false-alarm rate.
    z99, z95 = 2.3263478740408408, 1.959963984540054
    expected = z99 * math.sqrt(2 * (0.07 / z95) ** 2 + (0.004 / z95) ** 2 + (0.003 / z95) ** 2)
    assert noise_allowance(0.004, 0.003, 0.07) == pytest.approx(expected)
    assert noise_allowance(0.0, 0.0, 0.0) == 0.0
    assert noise_allowance(0.01, 0.0, 0.0, false_alarm_rate=0.05) < noise_allowance(0.01, 0.0, 0.0)


def test_the_gate_cries_wolf_at_about_its_false_alarm_rate():
    """Unchanged kernel, run-to-run drift as BaselineRef documents it: ~1% false alarms.

    A 25% slowdown (well beyond the 11.7% allowance of a +-7% spread) is caught nearly always.
    """
    rng = np.random.default_rng(12)
    spread, trials = 0.07, 4000
    sigma = spread / 1.959963984540054
    base_runs = 0.72 * (1 + sigma * rng.standard_normal(trials))
    now_runs = 0.72 * (1 + sigma * rng.standard_normal(trials))
    false_alarms = detected = 0
    for base_eff, now_eff in zip(base_runs, now_runs, strict=True):
        ref = baseline(base_eff, efficiency_ci=(base_eff, base_eff), run_spread=spread)
        false_alarms += gate(measurement(now_eff, rel_ci=0.0), baseline=ref).status == FAIL
        slowed = measurement(now_eff * 0.75, rel_ci=0.0)
        detected += gate(slowed, baseline=ref).status == FAIL
    standard_error = math.sqrt(FALSE_ALARM_RATE * (1 - FALSE_ALARM_RATE) / trials)
    assert abs(false_alarms / trials - FALSE_ALARM_RATE) < 4 * standard_error
    assert detected / trials > 0.95


# -- no baseline ------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [NO_BASELINE, OTHER_DEVICE])
def test_missing_baseline_is_reported_not_failed(status):
    verdict = gate(measurement(0.7), baseline_status=status)
    assert (verdict.status, verdict.baseline_status) == (PASS, status)
    assert verdict.baseline is None and verdict.delta is None
    (note,) = verdict.notes
    assert "no baseline for device mi300x" in note and UPDATE in note
    assert ("other devices" in note) == (status == OTHER_DEVICE)


@pytest.mark.parametrize("status", [NO_BASELINE, OTHER_DEVICE])
def test_strict_baseline_fails_without_one(status):
    verdict = gate(measurement(0.7), baseline_status=status, strict_baseline=True)
    assert (verdict.status, verdict.baseline_status) == (FAIL, status)
    assert "no baseline for device mi300x" in verdict.reason
    assert "a baseline is required" in verdict.reason
    assert f"record:   {UPDATE}" in verdict.reason


def test_strict_baseline_is_satisfied_by_a_baseline():
    verdict = gate(measurement(0.80), baseline=baseline(0.80), strict_baseline=True)
    assert verdict.status == PASS


def test_a_baseline_of_another_cache_mode_is_not_compared():
    verdict = gate(measurement(0.5), baseline=baseline(0.9, cache="hot"))
    assert (verdict.status, verdict.baseline_status) == (PASS, NO_BASELINE)
    assert verdict.delta is None
    assert "cache='hot'" in verdict.notes[0] and "not comparable" in verdict.notes[0]
    strict = gate(measurement(0.5), baseline=baseline(0.9, cache="hot"), strict_baseline=True)
    assert strict.status == FAIL


def test_missing_update_command_falls_back_to_the_generic_one():
    verdict = gate(measurement(0.7), update_command="")
    assert "record one with: pytest --gpuperf --gpuperf-save" in verdict.notes[0]


# -- combinations and inputs --------------------------------------------------------------------


def test_floor_failure_wins_over_a_good_baseline():
    verdict = gate(measurement(0.70), floor=0.8, baseline=baseline(0.70))
    assert (verdict.status, verdict.floor_status, verdict.baseline_status) == (
        FAIL,
        FAIL,
        WITHIN_NOISE,
    )
    assert "vs floor:" in verdict.reason and "vs baseline:" in verdict.reason


def test_marginal_floor_and_regression_fail():
    verdict = gate(measurement(0.801, rel_ci=0.01), floor=0.8, baseline=baseline(0.95))
    assert (verdict.status, verdict.floor_status, verdict.baseline_status) == (
        FAIL,
        MARGINAL,
        REGRESSED,
    )
    first = verdict.reason.splitlines()[0]
    assert "marginal" in first and "regressed" in first


def test_marginal_floor_with_a_baseline_within_noise_stays_marginal():
    verdict = gate(measurement(0.801, rel_ci=0.01), floor=0.8, baseline=baseline(0.80))
    assert (verdict.status, verdict.baseline_status) == (MARGINAL, WITHIN_NOISE)


def test_a_real_device_is_not_called_simulated():
    m = measurement(
        0.5, device_key="h100-sxm", device_name="NVIDIA H100 80GB HBM3", simulated=False
    )
    verdict = gate(m, floor=0.8)
    assert "h100-sxm (NVIDIA H100 80GB HBM3)" in verdict.reason
    assert "simulated" not in verdict.reason


@pytest.mark.parametrize(
    "kwargs",
    [
        {"tolerance": -0.1},
        {"tolerance": 1.5},
        {"floor": 0.0},
        {"baseline_status": WITHIN_NOISE},
    ],
)
def test_invalid_inputs_are_refused(kwargs):
    with pytest.raises(ValueError):
        gate(measurement(0.8), **kwargs)
