"""The gate: floor, stored baseline (prior and learned history), A/B, saving, and how they
compose into one verdict; plus the rule that only the gate decides."""

from __future__ import annotations

import ast
import dataclasses
import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import t as student_t

from pytest_gpuperf.baseline import BaselineStore
from pytest_gpuperf.baseline.ref import BaselineRef
from pytest_gpuperf.engine.results import Measurement, PairedComparison
from pytest_gpuperf.gate.ab import ab_state, check_comparison, decided, no_base, unchanged
from pytest_gpuperf.gate.decide import decide
from pytest_gpuperf.gate.floor import check_floor
from pytest_gpuperf.gate.judge import AbResult, JudgeContext, Taken, judge
from pytest_gpuperf.gate.noise import prior_allowance, stored_band
from pytest_gpuperf.gate.policy import (
    DEFAULT_CODE_SPREAD,
    FALSE_ALARM_RATE,
    PRIOR_DF,
    RUN_SPREAD_MODEL,
    code_allowance,
    compare_threshold,
    prior_run_spread,
)
from pytest_gpuperf.gate.saving import SaveContext, learned_spread, plan_save
from pytest_gpuperf.gate.stored import check_baseline
from pytest_gpuperf.record.checks import (
    AB_IMPROVED,
    AB_INCONCLUSIVE,
    AB_MODELLED,
    AB_NO_BASE,
    AB_PASS,
    AB_REGRESSED,
    AB_UNCHANGED,
    IMPROVED,
    NO_BASE_FILE,
    NO_BASE_REF,
    NO_BASELINE,
    OTHER_DEVICE,
    REGRESSED,
    WITHIN_NOISE,
)
from pytest_gpuperf.record.verdict import FAIL, MARGINAL, PASS, UNJUDGED
from pytest_gpuperf.report import failure_text
from tests import records

PEAK_BPS = 5.3e12  # MI300X datasheet
BYTES = 12 * (32 << 20)  # the seed's 32M-element fp32 vector add
UPDATE = "pytest --gpuperf --gpuperf-save 'tests/perf/test_vector_add.py::test_vector_add'"
PACKAGE = Path(__file__).resolve().parents[2] / "pytest_gpuperf"


def measurement(efficiency: float, rel_ci: float = 0.002, **overrides) -> Measurement:
    """A measurement whose median efficiency is `efficiency`, time interval +-rel_ci."""
    fields = dict(
        name="test_vector_add[cold]",
        kernel="vector_add",
        peak_bps=PEAK_BPS,
        stopped_by="budget",
        grid=(131072, 1, 1),
        block=(256, 1, 1),
        fingerprint="sha256:head",
    )
    built = records.measurement(efficiency, bytes_moved=BYTES, rel_ci=rel_ci, samples=400, **fields)
    return dataclasses.replace(built, **overrides) if overrides else built


def baseline(efficiency: float, **overrides) -> BaselineRef:
    fields = dict(
        efficiency=efficiency,
        efficiency_ci=(efficiency * 0.998, efficiency * 1.002),
        run_spread=0.01,
        bandwidth_bps=efficiency * PEAK_BPS,
        time_s=BYTES / (efficiency * PEAK_BPS),
        cache="cold",
        source="measured",
        provenance="measured 2025-06-01T12:00:00Z on AMD Instinct MI300X (hip), commit 0123",
        path="baselines/mi300x.toml",
        device_key="mi300x",
    )
    fields.update(overrides)
    return BaselineRef(**fields)


def paired(ratio: float, half_width: float, base_time_s: float = 100e-6) -> PairedComparison:
    base = measurement(0.8, time_s=base_time_s)
    head = measurement(0.8 / ratio, time_s=base_time_s * ratio)
    return PairedComparison(
        head=head,
        base=replace(base, fingerprint="sha256:base"),
        ratio=ratio,
        ratio_ci=(ratio - half_width, ratio + half_width),
        pairs=60,
    )


def strict_undecided_ab():
    """An A/B whose interval (1.002 to 1.008) straddles the 0.5% threshold, asked strict."""
    return check_comparison(
        paired(1.005, 0.003), ref="main", ref_commit="c", threshold=0.005, strict=True,
        code_spread=0.0,
    )  # fmt: skip


# -- floor ------------------------------------------------------------------------------------


def test_floor_pass_fail_and_marginal():
    assert check_floor(measurement(0.85), 0.80).status == PASS
    failed = check_floor(measurement(0.70), 0.80)
    assert (failed.status, failed.straddles) == (FAIL, False)
    marginal = check_floor(measurement(0.801, rel_ci=0.01), 0.80)
    assert (marginal.status, marginal.straddles) == (MARGINAL, True)
    missed = check_floor(measurement(0.799, rel_ci=0.01), 0.80)
    assert (missed.status, missed.straddles) == (FAIL, True)
    exact = check_floor(measurement(0.80, rel_ci=0.0), 0.80)
    assert exact.status == PASS
    assert check_floor(measurement(1.9, cache="hot"), 0.8).hot_floor


def test_floor_must_be_positive():
    with pytest.raises(ValueError):
        check_floor(measurement(0.8), 0.0)


def test_floor_message_says_measured_expected_and_why():
    m = measurement(0.70)
    verdict = decide(
        baseline=check_baseline(m, None, tolerance=0.01),
        floor=check_floor(m, 0.8),
        update_command=UPDATE,
    )
    assert verdict.status == FAIL and verdict.failed_checks == ("floor",)
    text = failure_text(m, verdict)
    assert text.startswith("test_vector_add[cold] (kernel vector_add): efficiency 70.00%")
    assert "below the floor 80.00%" in text
    assert "70.00% of peak = 3,710 GB/s" in text
    assert "expected >= 80.00% of peak = 4,240 GB/s (min_bw)" in text
    assert "-10.00 points of peak (-12.50% relative)" in text
    assert "lies entirely below the floor" in text
    assert "mi300x (AMD Instinct MI300X), hip backend" in text
    assert UPDATE not in text  # re-recording a baseline does not fix a floor


# -- stored baseline: the prior of a first save --------------------------------------------


def test_prior_allowance_formula():
    z99, z95 = 2.3263478740408408, 1.959963984540054
    expected = z99 * math.sqrt(2 * (0.07 / z95) ** 2 + (0.004 / z95) ** 2 + (0.003 / z95) ** 2)
    assert prior_allowance(0.004, 0.003, 0.07) == pytest.approx(expected)
    assert prior_allowance(0.0, 0.0, 0.0) == 0.0


def test_prior_run_spread_of_a_first_save():
    """A relative part and a launch jitter per backend and cache mode (RUN_SPREAD_MODEL)."""
    relative, jitter_s = RUN_SPREAD_MODEL["cuda"]["cold"]
    for time_s in (145e-6, 30e-6, 8e-6):
        expected = 1.959963984540054 * math.hypot(relative, jitter_s / time_s)
        assert prior_run_spread("cuda", time_s) == pytest.approx(expected, abs=1e-5)
    # shorter kernels scatter more; hot launches less than cold ones
    assert prior_run_spread("cuda", 8e-6) > 2 * prior_run_spread("cuda", 145e-6)
    assert prior_run_spread("cuda", 3.5e-6, "hot") < prior_run_spread("cuda", 3.5e-6, "cold")
    assert prior_run_spread("hip", 145e-6) == pytest.approx(0.07, abs=0.0005)
    assert prior_run_spread("sim", 1e-6, simulated_spread=0.03) == 0.03


def test_within_noise_regressed_and_improved():
    ref = baseline(0.80, run_spread=0.0)
    assert check_baseline(measurement(0.80), ref, tolerance=0.01).outcome == WITHIN_NOISE
    regressed = check_baseline(measurement(0.76), ref, tolerance=0.01)
    assert (regressed.outcome, regressed.delta) == (REGRESSED, pytest.approx(-0.05))
    assert regressed.allowance == pytest.approx(max(0.01, regressed.noise))
    assert check_baseline(measurement(0.85), ref, tolerance=0.01).outcome == IMPROVED


def test_the_tolerance_is_the_least_allowance():
    check = check_baseline(
        measurement(0.79, rel_ci=0.0),
        baseline(0.80, run_spread=0.0, efficiency_ci=(0.8, 0.8)),
        tolerance=0.05,
    )
    assert check.allowance == 0.05 and check.outcome == WITHIN_NOISE


def test_judging_many_entries_asks_scipy_for_each_quantile_once(monkeypatch):
    """A run judges many entries at one rate and confidence: the band's quantiles come from
    SciPy once, then from memory (the Monte Carlo tests below made 12,000 SciPy calls)."""
    from pytest_gpuperf.engine import distributions
    from pytest_gpuperf.gate import noise

    for cached in (noise._norm_ppf, noise._norm_isf, noise._t_isf):
        cached.cache_clear()
    asked = []
    real = distributions._special
    monkeypatch.setattr(distributions, "_special", lambda: asked.append(1) or real())
    ref = baseline(0.80, saves=5, spread_basis="history", history_sd=0.002)
    first = check_baseline(measurement(0.79), ref, tolerance=0.0)
    once = len(asked)
    for _ in range(5):
        assert check_baseline(measurement(0.79), ref, tolerance=0.0) == first
    assert once > 0 and len(asked) == once


def test_a_first_save_whose_prior_is_right_alarms_no_more_than_the_rate():
    """One save, the backend's figure exact: the figure is taken as a guess worth PRIOR_DF
    degrees of freedom, so the band is t(0.99; 8) rather than the normal quantile and an
    unchanged kernel fails less often than 1% (about 0.2%), never more."""
    rng = np.random.default_rng(12)
    spread, trials = 0.07, 4000
    sigma = spread / 1.959963984540054
    base_runs = 0.72 * (1 + sigma * rng.standard_normal(trials))
    now_runs = 0.72 * (1 + sigma * rng.standard_normal(trials))
    alarms = 0
    for base_eff, now_eff in zip(base_runs, now_runs, strict=True):
        ref = baseline(base_eff, efficiency_ci=(base_eff, base_eff), run_spread=spread)
        check = check_baseline(measurement(now_eff, rel_ci=0.0), ref, tolerance=0.0)
        alarms += check.outcome == REGRESSED
        assert check.band is not None and check.band.basis == "prior"
        # the gate is live: the bound is t(PRIOR_DF) x sigma x sqrt(2), not infinite
        bound = student_t.ppf(1 - FALSE_ALARM_RATE, PRIOR_DF) * sigma * math.sqrt(2)
        assert check.noise == pytest.approx(bound, rel=1e-6)
    assert alarms / trials <= FALSE_ALARM_RATE


# -- stored baseline: a spread learned from a history of saves -----------------------------


def test_the_band_of_five_saves_is_a_t_prediction_interval():
    sigma_prior, sd = 0.003 / 1.959963984540054, 0.002
    ref = baseline(0.8, run_spread=0.003, saves=5, spread_basis="history", history_sd=sd)
    band = stored_band(ref, 0.0)
    df = PRIOR_DF + 4
    posterior = math.sqrt((PRIOR_DF * sigma_prior**2 + 4 * sd**2) / df)
    quantile = student_t.ppf(0.99, df)
    expected = quantile * posterior * math.sqrt(1 + math.pi / 10)  # median of 5
    assert (band.basis, band.df, band.noise) == ("history", df, pytest.approx(expected, rel=1e-5))
    # never more precise than this run's own interval says
    assert stored_band(ref, 0.05).noise > stored_band(ref, 0.001).noise == band.noise
    assert stored_band(ref, 0.05).measured_sigma == pytest.approx(0.05 / 1.959963984540054)


def test_a_learned_history_gates_at_its_false_alarm_rate_and_catches_3_percent():
    """Simulate saves and runs of one kernel whose run-to-run sigma is 0.15% (the H100 at
    hundreds of us): history of 5 saves, then an unchanged run or one 3% slower."""
    rng = np.random.default_rng(3)
    sigma, trials = 0.0015, 3000
    alarms = caught = 0
    for _ in range(trials):
        saves = 0.83 * np.exp(sigma * rng.standard_normal(5))
        logs = np.log(saves)
        spread = 1.959963984540054 * max(float(np.std(logs, ddof=1)), 1e-9)
        # the file's other entries of this length lend a spread learned from 12 df
        pooled = sigma * math.sqrt(rng.chisquare(12) / 12)
        ref = baseline(
            float(np.median(saves)),
            run_spread=spread,
            saves=5,
            spread_basis="history",
            prior_spread=0.02,
            history_sd=float(np.std(logs, ddof=1)),
            pooled_spread=1.959963984540054 * pooled,
            pooled_df=12,
            pooled_entries=4,
        )
        now = 0.83 * math.exp(sigma * rng.standard_normal())
        alarms += (
            check_baseline(measurement(now, rel_ci=0.0), ref, tolerance=0.0).outcome == REGRESSED
        )
        slow = now / 1.03
        caught += (
            check_baseline(measurement(slow, rel_ci=0.0), ref, tolerance=0.0).outcome == REGRESSED
        )
    assert alarms / trials < 0.02
    assert caught / trials > 0.99


def test_learned_spread_follows_the_saves_both_ways():
    from pytest_gpuperf.baseline import SaveRecord

    def saves(values):
        return [SaveRecord(v, (v * 0.9999, v * 1.0001), 1e-4) for v in values]

    assert learned_spread(saves([0.8, 0.81]), 0.07) == (0.07, "prior")
    wide, basis = learned_spread(saves([0.80, 0.84, 0.76]), 0.07)
    narrow, _ = learned_spread(saves([0.800, 0.801, 0.799]), 0.07)
    assert basis == "history" and wide > 0.07 > narrow  # grows as well as shrinks
    # identical numbers cannot claim more precision than each run's interval
    floor, _ = learned_spread(saves([0.8, 0.8, 0.8]), 0.07)
    assert floor == pytest.approx(1.96 * 0.0001 / 1.96, rel=0.01)


def test_missing_baseline_is_reported_and_strict_fails_it():
    m = measurement(0.7)
    missing = check_baseline(m, None, tolerance=0.01)
    assert missing.outcome == NO_BASELINE
    assert decide(baseline=missing).status == PASS
    elsewhere = check_baseline(m, None, tolerance=0.01, elsewhere=("h100-sxm",))
    assert elsewhere.outcome == OTHER_DEVICE
    strict = check_baseline(m, None, tolerance=0.01, strict=True)
    verdict = decide(baseline=strict, update_command=UPDATE)
    assert verdict.status == FAIL and verdict.failed_checks == ("strict-baseline",)
    assert "a baseline is required" in failure_text(m, verdict)
    assert UPDATE in failure_text(m, verdict)


def test_regression_message_tells_the_whole_story():
    m = measurement(0.70)
    ref = baseline(0.80, run_spread=0.004, saves=5, spread_basis="history")
    verdict = decide(baseline=check_baseline(m, ref, tolerance=0.01), update_command=UPDATE)
    text = failure_text(m, verdict)
    assert verdict.failed_checks == ("regression",)
    assert "regressed: 70.00% vs baseline 80.00% (-12.50%" in text
    assert "5 saves, run-to-run +-0.40% in the file" in text
    assert (
        f"basis history: a one-sided 99% prediction bound for one new run, t({PRIOR_DF + 4:.0f} df)"
        in text
    )
    assert "this entry's 5 saves (sigma 0.00%, 4 df)" in text
    assert re.search(rf"update: +{re.escape(UPDATE)}", text)
    assert "[baselines/mi300x.toml]" in text
    lines = text.splitlines()
    # what decided comes first: the allowance and what it is made of, then the baseline
    assert [line.split(":")[0].strip() for line in lines[1:]] == [
        "allowance", "baseline", "provenance", "measured", "device", "update", "accept",
    ]  # fmt: skip


# -- A/B -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("interval", "state"),
    [
        ((1.006, 1.010), AB_REGRESSED),
        ((0.990, 0.994), AB_IMPROVED),
        ((0.998, 1.003), AB_PASS),
        ((1.003, 1.008), AB_INCONCLUSIVE),
        ((0.980, 1.020), AB_INCONCLUSIVE),
    ],
)
def test_ab_states(interval, state):
    assert ab_state(interval, 0.005) == state


def test_ab_threshold_widens_for_very_short_kernels():
    assert compare_threshold(0.005, 100e-6) == 0.005
    assert compare_threshold(0.005, 2e-6) == pytest.approx(0.02)
    stop = decided(0.005)
    assert stop((1.006, 1.03), 100e-6) and not stop((1.006, 1.03), 2e-6)


def test_ab_regression_fails_and_says_head_base_and_the_interval():
    comparison = check_comparison(
        paired(1.03, 0.002),
        ref="origin/main",
        ref_commit="abc123",
        threshold=0.005,
        code_spread=0.0,  # a device whose code objects do not drift (the H100's)
    )
    assert comparison.state == AB_REGRESSED
    head = measurement(0.8 / 1.03)
    # the stored baseline is shown, not gated, while an A/B comparison decides
    stored = check_baseline(head, baseline(0.9), tolerance=0.01, gating=False)
    verdict = decide(baseline=stored, comparison=comparison)
    assert verdict.status == FAIL and verdict.failed_checks == ("ab",)
    text = failure_text(head, verdict)
    lines = text.splitlines()
    # the first line is the check that failed and the numbers that decided it
    assert lines[0] == (
        "test_vector_add[cold] (kernel vector_add): A/B regressed against origin/main "
        "(abc123): head/base time 1.0300 (+3.00%), 95% CI 1.0280 to 1.0320, all above the "
        "threshold 1 + 0.50%"
    )
    assert lines[1].split() == ["threshold:", "+0.50%", "(--gpuperf-compare-threshold)"]
    assert "60 interleaved head/base pairs on the same buffers" in lines[2]
    # the stored baseline, only shown while comparing, does not bear on it: -v has it
    assert "vs baseline" not in text and "allowance" not in text
    assert lines[-1].split(":", 1)[1].strip() == (
        "pytest -v adds the measurement, the stored baseline (shown, not gated)"
    )
    verbose = failure_text(head, verdict, verbose=True)
    assert "vs baseline" in verbose and "measured:" in verbose and "more:" not in verbose
    assert verbose.startswith(text.splitlines()[0])


@pytest.mark.parametrize(
    ("basis", "drift_basis", "said"),
    [
        ("user", "none", "+0.50% (--gpuperf-compare-threshold)"),
        ("quantum", "none", "+0.50%: widened from your +0.40% for a very short kernel"),
        ("drift", "assumed", "+0.50%: what a different code object's drift of +-0.30% explains"),
        ("user", "measured", "+0.50% (--gpuperf-compare-threshold); the drift between module "
         "loads, measured in this run at +-0.20% over 8 loads per side, is carried in the "
         "interval"),
    ],
)  # fmt: skip
def test_the_failure_says_what_decided_the_threshold(basis, drift_basis, said):
    """The threshold row reads the check's threshold_basis and drift_basis (the gate's
    structured words), never recomputes them: the user's threshold, a widening for a very
    short kernel, an assumed code-object drift, and a measured drift in the interval."""
    comparison = check_comparison(
        paired(1.03, 0.002), ref="origin/main", ref_commit="abc123", threshold=0.005,
        code_spread=0.0,
    )  # fmt: skip
    stated = dataclasses.replace(
        comparison, threshold=0.005, user_threshold=0.004, threshold_basis=basis,
        drift_basis=drift_basis, drift=0.002, loads=8, code_spread=0.003,
    )  # fmt: skip
    head = measurement(0.8 / 1.03)
    text = failure_text(
        head, decide(baseline=check_baseline(head, None, tolerance=0.01), comparison=stated)
    )
    row = text.splitlines()[1]
    assert row.split(":", 1)[0].strip() == "threshold"
    assert row.split(":", 1)[1].strip().startswith(said)


def test_different_code_is_judged_at_what_its_drift_explains():
    """HIP (and the simulated MI300X) default to a code-object drift of +-1.57%: two different
    code objects of equal speed differ by more than 2.67% only 1% of the time, so an edit is
    not called a regression below that; identical code (a forced A/A) is not widened."""
    allowance = code_allowance(DEFAULT_CODE_SPREAD["hip"])
    assert allowance == pytest.approx(0.0267, abs=2e-4)
    assert compare_threshold(0.005, 100e-6, DEFAULT_CODE_SPREAD["hip"]) == allowance
    assert compare_threshold(0.04, 100e-6, DEFAULT_CODE_SPREAD["hip"]) == 0.04  # user's wins
    edit = check_comparison(paired(1.02, 0.002), ref="main", ref_commit="c", threshold=0.005)
    assert (edit.state, edit.code_spread) == (AB_PASS, DEFAULT_CODE_SPREAD["hip"])
    slower = check_comparison(paired(1.05, 0.002), ref="main", ref_commit="c", threshold=0.005)
    assert slower.state == AB_REGRESSED and slower.threshold == pytest.approx(allowance)
    head = measurement(0.8 / 1.05)
    shown = check_baseline(head, None, tolerance=0.01, gating=False)
    text = failure_text(head, decide(baseline=shown, comparison=slower))
    assert "what a different code object's drift of +-1.57% explains" in text
    same_code = paired(1.02, 0.002)
    same_code = replace(same_code, base=replace(same_code.base, fingerprint="sha256:head"))
    forced = check_comparison(same_code, ref="main", ref_commit="c", threshold=0.005, forced=True)
    assert (forced.state, forced.code_spread, forced.threshold) == (AB_REGRESSED, 0.0, 0.005)
    on_cuda = paired(1.02, 0.002)
    on_cuda = replace(
        on_cuda,
        head=replace(on_cuda.head, backend="cuda"),
        base=replace(on_cuda.base, backend="cuda"),
    )
    assert check_comparison(on_cuda, ref="m", ref_commit="c", threshold=0.005).state == AB_REGRESSED
    measured = check_comparison(
        paired(1.02, 0.002), ref="m", ref_commit="c", threshold=0.005, code_spread=0.004
    )
    assert measured.state == AB_REGRESSED  # a team that measured its drift sets it
    stop = decided(0.005, DEFAULT_CODE_SPREAD["hip"])
    assert stop((1.003, 1.02), 100e-6)  # within the widened threshold: decided, PASS
    assert not decided(0.005)((1.003, 1.02), 100e-6)  # straddles 1.005


def test_the_code_allowance_holds_the_false_alarm_rate():
    """A/A' under the assumed model: each code object's log time is N(0, (spread/1.96)^2)."""
    rng = np.random.default_rng(7)
    spread = DEFAULT_CODE_SPREAD["hip"]
    sigma = spread / 1.959963984540054
    ratios = np.exp(rng.normal(0, sigma, 200_000) - rng.normal(0, sigma, 200_000))
    alarms = np.mean(ratios - 1 > code_allowance(spread))
    assert 0.008 < alarms < 0.012  # FALSE_ALARM_RATE, 1%


def test_ab_states_that_pass_and_strict():
    same = check_comparison(
        paired(1.0, 0.001), ref="main", ref_commit="c", threshold=0.005, code_spread=0.0
    )
    assert (
        decide(
            baseline=check_baseline(measurement(0.8), None, tolerance=0.01, gating=False),
            comparison=same,
        ).status
        == PASS
    )
    undecided = strict_undecided_ab()
    assert undecided.state == AB_INCONCLUSIVE
    base = check_baseline(measurement(0.8), None, tolerance=0.01, gating=False)
    assert decide(baseline=base, comparison=undecided).failed_checks == ("strict-ab",)
    lenient = replace(undecided, strict=False)
    assert decide(baseline=base, comparison=lenient).status == PASS
    new_file = no_base(
        ref="main", ref_commit="", why=NO_BASE_FILE, detail="x.hip", threshold=0.005, strict=True
    )
    assert decide(baseline=base, comparison=new_file).status == PASS  # a new kernel is no failure
    bad_ref = no_base(
        ref="nope", ref_commit="", why=NO_BASE_REF, detail="not found", threshold=0.005, strict=True
    )
    assert decide(baseline=base, comparison=bad_ref).status == FAIL
    assert (
        unchanged(ref="main", ref_commit="c", fingerprint="sha256:x", threshold=0.005).state
        == AB_UNCHANGED
    )


# -- saving ---------------------------------------------------------------------------------


def context(**changes) -> SaveContext:
    fields = dict(
        test_id="t::x",
        path="baselines/mi300x.toml",
        device_key="mi300x",
        commit="abc",
        prior_spread=0.07,
        history_length=5,
        when="2026-01-01T00:00:00Z",
    )
    fields.update(changes)
    return SaveContext(**fields)


def test_saves_build_a_history_and_learn_its_spread():
    previous = None
    for index, efficiency in enumerate((0.80, 0.81, 0.79, 0.805, 0.80, 0.802)):
        action, entry = plan_save(measurement(efficiency), previous, context())
        assert action.saved and entry is not None
        assert action.history_saves == min(index + 1, 5)
        assert not action.new_history
        previous = entry
    assert len(previous.saves) == 5  # the oldest fell out
    assert previous.spread_basis == "history"
    assert previous.efficiency == pytest.approx(0.802, rel=1e-4)  # the median of the last five


def test_edited_code_starts_a_new_history_instead_of_widening_the_spread():
    previous = None
    for efficiency in (0.80, 0.801, 0.799):
        _, previous = plan_save(measurement(efficiency), previous, context())
    narrow = previous.run_spread
    edited = measurement(0.60, fingerprint="sha256:edited")  # same commit, uncommitted edit
    action, entry = plan_save(edited, previous, context())
    assert action.new_history and entry.saves[-1].fingerprint == "sha256:edited"
    assert len(entry.saves) == 1 and entry.spread_basis == "prior"
    assert entry.efficiency == pytest.approx(0.60)
    # the old history was not widened by the edited kernel's number
    assert narrow < 0.01
    other_bytes = measurement(0.80, bytes_moved=BYTES // 2)
    assert plan_save(other_bytes, previous, context())[0].new_history


def test_a_missed_floor_or_a_failed_test_saves_nothing():
    m = measurement(0.5)
    action, entry = plan_save(m, None, context(), floor=check_floor(m, 0.8))
    assert (action.saved, action.why_not, entry) == (False, "floor", None)
    action, entry = plan_save(m, None, context(), unjudged=True)
    assert (action.saved, action.why_not, entry) == (False, "unjudged", None)


def test_saving_does_not_fail_on_the_baseline_it_re_records():
    m = measurement(0.5)
    stored = check_baseline(m, baseline(0.8), tolerance=0.01)
    action, _ = plan_save(m, None, context())
    assert stored.outcome == REGRESSED
    assert decide(baseline=stored, save=action).status == PASS
    assert decide(baseline=stored, floor=check_floor(m, 0.7), save=action).status == FAIL


def test_a_save_excuses_only_the_checks_of_the_baseline_it_re_records():
    """Saving re-records the stored baseline: its regression and a strict missing baseline
    pass; an A/B regression and a strict undecided A/B still fail (they are not the save's)."""
    m = measurement(0.5)
    action, _ = plan_save(m, None, context())
    strict_missing = check_baseline(m, None, tolerance=0.01, strict=True)
    assert decide(baseline=strict_missing, save=action).status == PASS
    assert decide(baseline=strict_missing).failed_checks == ("strict-baseline",)
    slower = check_comparison(
        paired(1.05, 0.001), ref="main", ref_commit="c", threshold=0.005, code_spread=0.0
    )
    undecided = strict_undecided_ab()
    base = check_baseline(m, None, tolerance=0.01, gating=False)
    for comparison, cause in ((slower, "ab"), (undecided, "strict-ab")):
        verdict = decide(baseline=base, comparison=comparison, save=action)
        assert verdict.status == FAIL and verdict.failed_checks == (cause,)


def test_an_unjudged_verdict_neither_passes_nor_fails():
    verdict = decide(baseline=check_baseline(measurement(0.8), None, tolerance=0.01), unjudged=True)
    assert verdict.status == UNJUDGED and verdict.failed_checks == ()


# -- judging with a store --------------------------------------------------------------------


def test_simulated_numbers_are_judged_against_sim_files_only(tmp_path):
    real = measurement(0.80)
    _, entry = plan_save(real, None, context())
    BaselineStore(tmp_path).save("mi300x", [entry])
    simulated = measurement(0.40, backend="sim", simulated=True)
    (judged,) = judge(
        "t::x", [Taken(simulated)], BaselineStore(tmp_path), JudgeContext(tolerance=0.01)
    )
    check = judged.verdict.baseline
    assert check.outcome == NO_BASELINE and check.baseline is None
    assert check.info is not None and check.info.efficiency == pytest.approx(0.80)
    assert judged.verdict.status == PASS  # -50% against the real device is not a failure

    saving = JudgeContext(tolerance=0.01, saving=True)
    (saved,) = judge("t::x", [Taken(simulated)], BaselineStore(tmp_path), saving)
    assert saved.save_key == "mi300x-sim" and saved.verdict.save.saved


def test_judge_compares_under_compare_and_shows_the_stored_baseline(tmp_path):
    _, entry = plan_save(measurement(0.80), None, context())
    BaselineStore(tmp_path).save("mi300x", [entry])
    ab = AbResult(paired=paired(1.0, 0.001))
    ctx = JudgeContext(tolerance=0.01, compare_ref="main", compare_commit="c")
    (judged,) = judge("t::x", [Taken(measurement(0.5), ab=ab)], BaselineStore(tmp_path), ctx)
    assert judged.verdict.baseline.outcome == REGRESSED and not judged.verdict.baseline.gating
    assert judged.verdict.comparison.state == AB_PASS
    assert judged.verdict.status == PASS
    (missing,) = judge(
        "t::x",
        [Taken(measurement(0.8), ab=AbResult(no_base_why=NO_BASE_FILE))],
        BaselineStore(tmp_path),
        ctx,
    )
    assert missing.verdict.comparison.state == AB_NO_BASE


@pytest.mark.parametrize(
    ("ab", "state", "strict"),
    [
        (AbResult(paired=paired(1.0, 0.001)), AB_PASS, True),
        (AbResult(modelled_by="model", modelled_efficiency=0.8), AB_MODELLED, True),
        (AbResult(unchanged_fingerprint="f00d"), AB_UNCHANGED, False),
        (AbResult(no_base_why=NO_BASE_REF, detail="no such ref"), AB_NO_BASE, True),
    ],
)
def test_every_kind_of_comparison_records_the_ref_commit_and_threshold_asked_for(
    tmp_path, ab, state, strict
):
    ctx = JudgeContext(
        tolerance=0.01,
        strict=True,
        compare_ref="main",
        compare_commit="c0ffee",
        compare_threshold=0.04,
    )
    (judged,) = judge("t::x", [Taken(measurement(0.8), ab=ab)], BaselineStore(tmp_path), ctx)
    check = judged.verdict.comparison
    assert check.state == state
    assert (check.ref, check.ref_commit, check.user_threshold or check.threshold) == (
        "main",
        "c0ffee",
        0.04,
    )
    assert check.strict is strict  # an identical build has nothing strict could fail


# -- the gate decides once ------------------------------------------------------------------

DECISIONS = {"Verdict", "FloorCheck", "BaselineCheck", "ComparisonCheck", "SaveAction"}
# The static gate's decisions are made in gate/static/gate.py, and only there.
DECISIONS |= {"KernelCheck", "StaticTestResult", "StaticComparison"}
STATIC_GATE = Path("gate") / "static" / "gate.py"
STATIC_COMPARE = Path("gate") / "static" / "compare.py"


def _violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            if name in DECISIONS:
                found.append(f"{path.name}:{node.lineno} builds {name}")
            if name == "replace" and node.args:
                target = ast.unparse(node.args[0])
                if "verdict" in target.lower() or "check" in target.lower():
                    found.append(f"{path.name}:{node.lineno} edits {target}")
    return found


def test_only_the_gate_builds_or_edits_a_verdict():
    """Decisions are structured values made in gate/; renderers and the pytest layer only
    read them (plain.py rebuilds them from plain data generically, by type hints)."""
    deciders = {STATIC_GATE, STATIC_COMPARE}
    outside = [
        p
        for p in PACKAGE.rglob("*.py")
        if "gate" not in p.relative_to(PACKAGE).parts and p.relative_to(PACKAGE) not in deciders
    ]
    violations = [v for p in outside for v in _violations(p)]
    assert violations == []
    inside = [v for p in (PACKAGE / "gate").glob("*.py") for v in _violations(p)]
    assert inside  # the scan does see the gate building them
    assert all(_violations(PACKAGE / path) for path in deciders)  # and the static gate's


def test_verdicts_are_frozen():
    verdict = decide(baseline=check_baseline(measurement(0.8), None, tolerance=0.01))
    with pytest.raises(AttributeError):
        verdict.status = FAIL  # type: ignore[misc]


def test_a_short_noisy_history_gates_at_its_rate_and_no_looser_than_a_first_save():
    """Three saves of a kernel whose runs vary as much as the prior says (MI300X's +-7%): the
    saves' 2 degrees of freedom join the prior's 8, so false alarms stay below 1% and the
    median band is narrower than a first save's."""
    rng = np.random.default_rng(7)
    sigma, trials = 0.07 / 1.959963984540054, 4000
    alarms, allowances = 0, []
    for _ in range(trials):
        saves = 0.72 * np.exp(sigma * rng.standard_normal(3))
        sd = float(np.std(np.log(saves), ddof=1))
        ref = baseline(
            float(np.median(saves)),
            run_spread=1.959963984540054 * sd,
            saves=3,
            spread_basis="history",
            prior_spread=0.07,
            history_sd=sd,
        )
        now = 0.72 * math.exp(sigma * rng.standard_normal())
        check = check_baseline(measurement(now, rel_ci=0.0), ref, tolerance=0.0)
        alarms += check.outcome == REGRESSED
        allowances.append(check.allowance)
    assert alarms / trials < 0.012
    first = stored_band(baseline(0.72, run_spread=0.07), 0.0).noise
    assert float(np.median(allowances)) < first


def measured_pair(log_ratio: float, log_se: float, drift: float = 0.001) -> PairedComparison:
    """A pair over 8 loads per side whose drift the run measured."""
    import math

    ratio = math.exp(log_ratio)
    base = paired(ratio, 0.0)
    level = PairedComparison(
        head=base.head, base=base.base, ratio=ratio, ratio_ci=(0.0, 0.0), pairs=800,
        loads=8, pair_loads=tuple(i % 8 for i in range(800)), log_ratio=log_ratio,
        log_ratio_se=log_se, df=7.0, within_se=log_se / 2, drift=drift, drift_basis="measured",
        median_ratio=1.0,
    )  # fmt: skip
    return replace(level, ratio_ci=level.ratio_ci_at(0.95))


def test_a_measured_drift_leaves_the_users_threshold_and_says_so():
    check = check_comparison(
        measured_pair(0.02, 0.002), ref="main", ref_commit="c", threshold=0.005
    )
    assert check.state == AB_REGRESSED and check.code_spread == 0.0
    assert (check.threshold, check.user_threshold, check.threshold_basis) == (0.005, 0.005, "user")
    assert (check.drift, check.drift_basis, check.loads) == (0.001, "measured", 8)
    assert check.confidence == 0.95 and check.statistic.startswith("10%-trimmed mean")
    assert len(check.pair_loads) == 800 and check.median_ratio == 1.0
    short = check_comparison(
        replace(measured_pair(0.02, 0.002), base=replace(measured_pair(0, 1).base, time_s=4e-6)),
        ref="main", ref_commit="c", threshold=0.005,
    )  # fmt: skip
    assert short.threshold_basis == "quantum" and short.threshold == pytest.approx(0.01)
    assumed = check_comparison(paired(1.05, 0.002), ref="main", ref_commit="c", threshold=0.005)
    assert (assumed.threshold_basis, assumed.drift_basis) == ("drift", "assumed")
    assert assumed.user_threshold == 0.005 and assumed.drift == DEFAULT_CODE_SPREAD["hip"]


def test_the_check_reads_the_interval_at_the_confidence_it_is_given():
    """A suite-wide false-alarm budget asks for a higher per-test level: the same estimate,
    a wider interval, and a comparison that regressed at 95% may be inconclusive at 99.9%."""
    pair = measured_pair(0.012, 0.002)
    at_95 = check_comparison(pair, ref="main", ref_commit="c", threshold=0.005)
    at_999 = check_comparison(pair, ref="main", ref_commit="c", threshold=0.005, confidence=0.999)
    assert at_95.state == AB_REGRESSED and at_999.state == "inconclusive"
    assert at_999.confidence == 0.999 and at_999.ratio_ci[0] < at_95.ratio_ci[0]
    with pytest.raises(ValueError, match="degrees of freedom"):
        check_comparison(
            paired(1.05, 0.002), ref="m", ref_commit="c", threshold=0.005, confidence=0.99
        )
