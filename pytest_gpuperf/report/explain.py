"""The message a failing (or marginal) measurement fails its test with.

It names what was measured against what was expected, the difference, the noise allowance and
where it comes from, the cache mode, the device, where the baseline came from, and the command
that updates it: everything a reviewer needs to tell a real slowdown from noise.
"""

from __future__ import annotations

import math

from pytest_gpuperf.gate.policy import code_allowance
from pytest_gpuperf.report.text import (
    ab_cell,
    format_time,
    gbps_text,
    no_base_text,
    pct,
    signed_pct,
)
from pytest_gpuperf.results import (
    AB_REGRESSED,
    FAIL,
    IMPROVED,
    MARGINAL,
    REGRESSED,
    WITHIN_NOISE,
    BaselineCheck,
    ComparisonCheck,
    FloorCheck,
    Measurement,
    NoiseBand,
    Verdict,
)


def label_of(measurement: Measurement) -> str:
    m = measurement
    return m.name if m.kernel in ("", m.name) else f"{m.name} (kernel {m.kernel})"


def one_line(measurement: Measurement, verdict: Verdict) -> str:
    """'vector_add: 81.2% of peak; reaches the floor 74%; within noise of the baseline ...'"""
    parts = [f"{pct(measurement.efficiency)} of peak"]
    parts += _headlines(measurement, verdict, everything=True)
    return f"{label_of(measurement)}: " + "; ".join(parts)


def failure_text(measurement: Measurement, verdict: Verdict) -> str:
    """The full message of a FAIL or MARGINAL verdict (the first line says why)."""
    m = measurement
    headline = "; ".join(_headlines(m, verdict, everything=False))
    details: list[tuple[str, str]] = [("measured", _measured(m))]
    if verdict.floor is not None:
        details += _floor_details(m, verdict.floor)
    if verdict.baseline.baseline is not None:
        details += _baseline_details(m, verdict.baseline)
    if verdict.comparison is not None:
        details += _comparison_details(verdict.comparison)
    details += [("cache", m.cache), ("device", _device(m))]
    if verdict.baseline.baseline is not None:
        ref = verdict.baseline.baseline
        details.append(("provenance", f"{ref.provenance} [{ref.path}]"))
    if verdict.status == FAIL:
        command = verdict.update_command or "pytest --gpuperf --gpuperf-save"
        if "regression" in verdict.failed_checks:
            details.append(
                ("update", f"{command}   (if this slowdown is intended: re-records the baseline)")
            )
        elif "strict-baseline" in verdict.failed_checks:
            details.append(("record", command))
    return f"{label_of(m)}: {headline}\n" + _block(details)


def _headlines(m: Measurement, verdict: Verdict, *, everything: bool) -> list[str]:
    lines = []
    floor = verdict.floor
    if floor is not None and (everything or floor.status != "pass"):
        lines.append(_floor_headline(floor))
    baseline = verdict.baseline
    if everything or (baseline.gating and verdict.status == FAIL and _baseline_failed(verdict)):
        text = _baseline_headline(baseline)
        if text:
            lines.append(text)
    comparison = verdict.comparison
    if comparison is not None and (
        everything or comparison.state == AB_REGRESSED or "strict-ab" in verdict.failed_checks
    ):
        lines.append(_comparison_headline(comparison))
    return lines or ["ok"]


def _baseline_failed(verdict: Verdict) -> bool:
    return any(c in verdict.failed_checks for c in ("regression", "strict-baseline"))


def _floor_headline(floor: FloorCheck) -> str:
    if floor.status == "pass":
        return f"reaches the floor {pct(floor.floor)}"
    if floor.status == MARGINAL:
        return (
            f"marginal: efficiency {pct(floor.efficiency)} is just at the floor {pct(floor.floor)}"
        )
    text = f"efficiency {pct(floor.efficiency)} is below the floor {pct(floor.floor)}"
    if floor.straddles:
        text += " (marginal: the interval straddles the floor; decided on the median)"
    return text


def _baseline_headline(check: BaselineCheck) -> str:
    ref = check.baseline
    if ref is None:
        why = f"no baseline for device {check.device_key}"
        if check.elsewhere:
            why += " (this test has baselines for other devices only)"
        if check.strict and check.gating:
            return f"{why}, and a baseline is required (strict baselines)"
        return f"{why}, not compared"
    assert check.delta is not None and check.allowance is not None
    measured = ref.efficiency * (1.0 + check.delta)
    versus = f"{pct(measured)} vs baseline {pct(ref.efficiency)} ({signed_pct(check.delta)}"
    shown = "" if check.gating else " [shown, not gated]"
    if check.outcome == REGRESSED:
        return f"regressed: {versus}, beyond the allowance of -{pct(check.allowance)}){shown}"
    if check.outcome == IMPROVED:
        return f"improved: {versus}, beyond the allowance of +{pct(check.allowance)}){shown}"
    if check.outcome == WITHIN_NOISE:
        return f"within noise of the baseline: {versus}, allowance +-{pct(check.allowance)}){shown}"
    return ""


def _comparison_headline(c: ComparisonCheck) -> str:
    against = f"{c.ref}" + (f" ({c.ref_commit[:12]})" if c.ref_commit else "")
    if c.ratio is None:
        if c.state == "unchanged":
            return f"A/B: same code object as {against}"
        return f"A/B: no base at {against} ({no_base_text(c)})"
    assert c.ratio_ci is not None
    low, high = c.ratio_ci
    interval = f"{signed_pct(low - 1)} to {signed_pct(high - 1)}"
    if c.state == AB_REGRESSED:
        return (
            f"A/B regressed: {signed_pct(c.ratio - 1)} time against {against} (95% CI "
            f"{interval}, beyond the threshold of +{pct(c.threshold)})"
        )
    return f"A/B {ab_cell(c)} against {against} (95% CI {interval}, threshold +-{pct(c.threshold)})"


def _measured(m: Measurement) -> str:
    low, high = m.efficiency_ci
    stopped = f", stopped by {m.stopped_by}" if m.stopped_by else ""
    return (
        f"{pct(m.efficiency)} of peak = {gbps_text(m.bandwidth_bps)} "
        f"(95% CI {pct(low)} to {pct(high)}, +-{m.relative_ci:.2%}; "
        f"median {format_time(m.time_s)} of {len(m.samples_s)} samples{stopped})"
    )


def _device(m: Measurement) -> str:
    simulated = ", simulated" if m.simulated else ""
    return (
        f"{m.device_key} ({m.device_name}{simulated}), {m.backend} backend, "
        f"peak {gbps_text(m.peak_bps)}"
    )


def _difference(value: float, expected: float) -> str:
    return (
        f"{(value - expected) * 100:+.2f} points of peak ({value / expected - 1.0:+.2%} relative)"
    )


def _floor_details(m: Measurement, floor: FloorCheck) -> list[tuple[str, str]]:
    low, high = floor.efficiency_ci
    interval = f"the 95% interval {pct(low)} to {pct(high)}"
    if low >= floor.floor:
        noise = f"{interval} lies at or above the floor"
    elif high < floor.floor:
        noise = f"{interval} lies entirely below the floor: not noise"
    elif floor.efficiency >= floor.floor:
        noise = f"{interval} straddles the floor; decided on the median, which reaches it"
    else:
        noise = f"{interval} straddles the floor; decided on the median, which misses it"
    return [
        (
            "floor",
            f"expected >= {pct(floor.floor)} of peak = {gbps_text(floor.floor * m.peak_bps)} "
            f"({floor.origin})",
        ),
        ("vs floor", _difference(floor.efficiency, floor.floor)),
        ("floor noise", noise),
    ]


def _baseline_details(m: Measurement, check: BaselineCheck) -> list[tuple[str, str]]:
    ref = check.baseline
    assert ref is not None and check.allowance is not None and check.noise is not None
    saves = "1 save" if ref.saves == 1 else f"{ref.saves} saves"
    spread = f"{saves}, run-to-run +-{ref.run_spread:.2%} in the file"
    noise = f"noise {pct(check.noise)}"
    if check.band is not None:
        noise += f" ({band_text(check.band)})"
    return [
        (
            "baseline",
            f"expected {pct(ref.efficiency)} of peak = {gbps_text(ref.bandwidth_bps)} "
            f"({spread}, {ref.source}, cache={ref.cache})",
        ),
        ("vs baseline", _difference(m.efficiency, ref.efficiency)),
        (
            "allowance",
            f"+-{pct(check.allowance)} = the larger of the tolerance {pct(check.tolerance)} "
            f"and the {noise}",
        ),
    ]


def _band_level(confidence: float) -> str:
    """'99%', '99.99%': a one-sided level as few digits as say it (a suite's budget sets
    levels such as 1 - 0.01 / 100)."""
    for digits in range(5):
        text = f"{confidence:.{digits}%}"
        if abs(float(text[:-1]) / 100 - confidence) < 1e-9:
            return text
    return f"{confidence:.4%}"


def band_text(band: NoiseBand) -> str:
    """How the stored-baseline band was reached: its basis and every number in it (the same
    words in failures and in `python -m pytest_gpuperf.history`)."""
    saves = "1 save" if band.saves == 1 else f"{band.saves} saves"
    quantile = f"z {band.quantile:.2f}"
    if band.df > 0:
        quantile = f"t({band.df:.0f} df) {band.quantile:.2f}"
    bound = (
        f"basis {band.basis}: a one-sided {_band_level(1 - band.false_alarm_rate)} prediction "
        "bound for "
        f"one new run, {quantile} x sigma {band.sigma:.2%} x {band.centre_factor:.3f} for a "
        f"centre that is the median of {saves}"
    )
    if band.prior_source == "file":
        prior = (
            f"the spread pooled from {band.pooled_entries} other "
            f"{'entry' if band.pooled_entries == 1 else 'entries'} of this file of similar "
            f"kernel time (sigma {band.prior_sigma:.2%}, {band.prior_df:.0f} df)"
        )
    else:
        if band.prior_source == "entry":
            whose = "the entry's run_spread as written"
        elif band.prior_df > 0:
            whose = "the backend's prior for a first save"
        else:
            whose = "the simulated device's spread setting"
        worth = f"worth {band.prior_df:.0f} df" if band.prior_df > 0 else "known exactly"
        prior = f"{whose} (sigma {band.prior_sigma:.2%}, {worth})"
    if band.history_df > 0 and band.prior_df > 0:
        sources = (
            f"{prior} and this entry's {saves} (sigma {band.history_sigma:.2%}, "
            f"{band.history_df} df)"
        )
    else:
        sources = prior
    text = f"{bound}; sigma from {sources}"
    if band.pool_refused_p > 0:
        text += (
            f"; the file's pooled spread is not used: this entry's saves scatter more than it "
            f"(F test, p = {band.pool_refused_p:.3f})"
        )
    if band.measured_sigma > 0:
        text += f"; this run's own sigma {band.measured_sigma:.2%} is larger and taken instead"
    return text


def _comparison_details(c: ComparisonCheck) -> list[tuple[str, str]]:
    if c.ratio is None or c.ratio_ci is None:
        return [("A/B", _comparison_headline(c))]
    assert c.head_efficiency is not None and c.base_efficiency is not None
    low, high = c.ratio_ci
    base = f"{pct(c.base_efficiency)}" + (
        f", {format_time(c.base_time_s)}" if c.base_time_s else ""
    )
    return [
        (
            "A/B",
            f"head {pct(c.head_efficiency)} vs base {base} at {c.ref} "
            f"({c.ref_commit[:12] or 'unresolved'}); head/base time {c.ratio:.4f} "
            f"(95% CI {low:.4f} to {high:.4f}) over {c.pairs} interleaved pairs",
        ),
        ("A/B rule", _comparison_rule(c)),
    ]


def _comparison_rule(c: ComparisonCheck) -> str:
    rule = f"regressed when the whole interval lies above 1 + {pct(c.threshold)}"
    if c.code_spread > 0 and math.isclose(c.threshold, code_allowance(c.code_spread)):
        # widened to what two different code objects of equal speed can differ by
        return (
            f"{rule}: what a different code object's drift of +-{pct(c.code_spread)} explains "
            "(--gpuperf-compare-code-spread; the pair cancels what the run shares, not where "
            "each code object landed)"
        )
    return f"{rule} (--gpuperf-compare-threshold)"


def _block(rows: list[tuple[str, str]]) -> str:
    width = max(len(key) for key, _ in rows) + 1
    return "\n".join(f"  {key + ':':<{width}} {value}" for key, value in rows)
