"""The message a failing (or marginal) measurement fails its test with.

It names what was measured against what was expected, the difference, the noise allowance and
where it comes from, the cache mode, the device, where the baseline came from, and the command
that updates it: everything a reviewer needs to tell a real slowdown from noise.
"""

from __future__ import annotations

import math
import time

from pytest_gpuperf.engine.results import (
    AB_MODELLED,
    AB_REGRESSED,
    ACCEPTABLE_CHECKS,
    DRIFT_MEASURED,
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
from pytest_gpuperf.gate.policy import BASIS_DRIFT, BASIS_QUANTUM, Z_95, code_allowance
from pytest_gpuperf.report.text import (
    ab_cell,
    drift_text,
    format_time,
    gbps_text,
    modelled_text,
    no_base_text,
    pct,
    signed_pct,
)


def label_of(measurement: Measurement) -> str:
    m = measurement
    return m.name if m.kernel in ("", m.name) else f"{m.name} (kernel {m.kernel})"


def one_line(measurement: Measurement, verdict: Verdict) -> str:
    """'vector_add: 81.2% of peak; reaches the floor 74%; within noise of the baseline ...'"""
    parts = [f"{pct(measurement.efficiency)} of peak"]
    parts += _headlines(measurement, verdict, everything=True)
    return f"{label_of(measurement)}: " + "; ".join(parts)


def failure_text(
    measurement: Measurement, verdict: Verdict, *, verbose: bool = False, test_id: str = ""
) -> str:
    """The message of a FAIL or MARGINAL verdict, led by what decided it.

    The first line names each check that failed (or is marginal) with the numbers that
    decided it; the rows under it bear on that decision only (for an A/B: the pairs and where
    the threshold came from; for a baseline: the allowance and what it is made of; for a
    floor: the interval against it), then the device and the command to act on. Everything
    else (checks that passed, the measurement in full, the provenance) follows under
    `verbose` (pytest -v) and is always in the JSON report.
    """
    m = measurement
    headline = "; ".join(_headlines(m, verdict, everything=False))
    deciding = _deciding(verdict)
    rows: list[tuple[str, str]] = []
    for check in deciding:
        rows += _DECISIVE[check](m, verdict)
    rows.append(("device", f"{_device(m)}; cache={m.cache}"))
    if m.gpu is not None:
        rows.append(("gpu", _gpu(m)))
    rows += _actions(verdict, test_id)
    rest = _context(m, verdict, deciding)
    if verbose:
        rows += [row for _, group in rest for row in group]
    elif rest:
        rows.append(("more", f"pytest -v adds {', '.join(what for what, _ in rest)}"))
    return f"{label_of(m)}: {headline}\n" + _block(rows)


def not_measured_reason(modelled: list[tuple[Measurement, Verdict]]) -> str:
    """The one line an xfailed (MODELLED) test shows: what was not measured, and why."""
    parts = []
    for m, verdict in modelled:
        what = " and ".join(
            {"ab": "A/B", "stored": "stored check"}[check] for check in verdict.unmeasured
        )
        parts.append(f"{m.name} ({what} modelled)")
    return (
        f"gpuperf: not measured: {', '.join(parts)}: the simulated device times changed code "
        "from its unchanged model, so the edit's speed is unknown (not a pass; "
        "--gpuperf-strict fails it)"
    )


# The checks a message can lead with, in the order they are told.
PEAK_CHECK, FLOOR_CHECK, BASELINE_CHECK, AB_CHECK = "beyond-peak", "floor", "baseline", "ab"


def _deciding(verdict: Verdict) -> list[str]:
    """The checks that made this verdict FAIL (or MARGINAL): what the message is about."""
    failed = verdict.failed_checks
    deciding = []
    if verdict.beyond_peak is not None:
        deciding.append(PEAK_CHECK)
    floor = verdict.floor
    if floor is not None and ("floor" in failed or floor.status == MARGINAL):
        deciding.append(FLOOR_CHECK)
    unmeasured = verdict.unmeasured if "strict-modelled" in failed else ()
    stored_failed = any(c in failed for c in ("regression", "strict-baseline", "drift"))
    if stored_failed or "stored" in unmeasured:
        deciding.append(BASELINE_CHECK)
    if any(c in failed for c in ("ab", "strict-ab")) or "ab" in unmeasured:
        deciding.append(AB_CHECK)
    return deciding


def _floor_decisive(m: Measurement, verdict: Verdict) -> list[tuple[str, str]]:
    assert verdict.floor is not None
    return [*_floor_details(m, verdict.floor), ("measured", _measured(m))]


def _baseline_decisive(m: Measurement, verdict: Verdict) -> list[tuple[str, str]]:
    check = verdict.baseline
    if check.baseline is None:  # strict: a baseline is required and there is none
        return [("measured", _measured(m))]
    details = dict(_baseline_details(m, check))
    ref = check.baseline
    basis = _basis(check)
    confirmation = [("confirmation", details["confirmation"])] if "confirmation" in details else []
    drift = []
    if check.drift is not None:
        drift = [("drift", drift_text(check.drift, strict=check.strict))]
    return [
        *drift,
        ("allowance", details["allowance"] + (f"; {basis}" if basis else "")),
        *confirmation,
        ("baseline", details["baseline"]),
        ("provenance", f"{ref.provenance} [{ref.path}]"),
        ("measured", _measured(m)),
    ]


def _ab_decisive(m: Measurement, verdict: Verdict) -> list[tuple[str, str]]:
    c = verdict.comparison
    assert c is not None
    if c.state == AB_MODELLED:  # strict: not timed
        return [("code", f"head {c.head_fingerprint[:19]}, base {c.base_fingerprint[:19]}")]
    if c.ratio is None or c.ratio_ci is None:  # strict: no base, or nothing reached
        return [("A/B", _comparison_headline(c))]
    confirmation = [("confirmation", _comparison_confirmation(c))] if c.first_state else []
    return [
        ("threshold", _threshold_origin(c)),
        ("pairs", _pairs_text(c)),
        *confirmation,
    ]


def _peak_decisive(m: Measurement, verdict: Verdict) -> list[tuple[str, str]]:
    check = verdict.beyond_peak
    assert check is not None
    if check.cache == "hot":
        limit = (
            f"hot, but {check.bytes_moved:,} declared bytes exceed the device's caches "
            f"({check.cache_bytes:,} bytes): at least the rest comes from HBM each launch, "
            f"so at most {pct(check.limit)} of peak"
        )
    else:
        limit = f"{check.cache}: every declared byte comes from HBM, so at most 100% of peak"
    return [
        ("declared", f"{check.bytes_moved:,} bytes"),
        ("limit", limit),
        ("measured", _measured(m)),
        (
            "way out",
            "declare what the kernel must move (each input read once, each output written "
            "once: reads=/writes=), and check that the kernel does all of its work",
        ),
    ]


def _peak_headline(verdict: Verdict) -> str:
    check = verdict.beyond_peak
    assert check is not None
    low, high = check.efficiency_ci
    return (
        f"declared bytes exceed what the device can move: {pct(low)}-"
        f"{pct(high)} of peak ({gbps_text(check.bandwidth_bps)} against the peak "
        f"{gbps_text(check.peak_bps)}), above the {pct(check.limit)} a {check.cache} "
        "measurement can reach"
    )


_DECISIVE = {
    PEAK_CHECK: _peak_decisive,
    FLOOR_CHECK: _floor_decisive,
    BASELINE_CHECK: _baseline_decisive,
    AB_CHECK: _ab_decisive,
}


def _actions(verdict: Verdict, test_id: str = "") -> list[tuple[str, str]]:
    if verdict.status != FAIL:
        return []
    command = verdict.update_command or "pytest --gpuperf --gpuperf-save"
    failed = verdict.failed_checks
    actions = []
    if "regression" in failed:
        actions.append(
            ("update", f"{command}   (if this slowdown is intended: re-records the baseline)")
        )
    if "strict-baseline" in failed:
        actions.append(("record", command))
    if "strict-modelled" in failed:
        actions.append(
            (
                "why",
                "--gpuperf-strict fails what was not measured: the simulated device cannot "
                "time an edit of a kernel's body; run on a GPU, or gate the edit with "
                "--gpuperf-static=ARCH (docs/static-gate.md)",
            )
        )
    if "drift" in failed:
        actions.append(
            (
                "drift",
                "find the commits that cost it (the drift names them), or run without "
                "--gpuperf-strict to report the drift without failing",
            )
        )
    if failed and all(cause in ACCEPTABLE_CHECKS for cause in failed):
        pattern = test_id or "TEST_ID"
        actions.append(
            (
                "accept",
                f"if this slowdown is intended: a commit trailer 'Gpuperf-Accept: {pattern} "
                f"<why>' (under --gpuperf-compare), or --gpuperf-accept='{pattern} <why>' "
                "(docs/ci.md, 'Accepting an intended slowdown')",
            )
        )
    return actions


def _context(
    m: Measurement, verdict: Verdict, deciding: list[str]
) -> list[tuple[str, list[tuple[str, str]]]]:
    """What did not decide this verdict, for -v, as (what it is, its rows): the checks that
    passed or were only shown, and the measurement where no deciding check printed it."""
    groups: list[tuple[str, list[tuple[str, str]]]] = []
    if not {PEAK_CHECK, FLOOR_CHECK, BASELINE_CHECK} & set(deciding):
        groups.append(("the measurement", [("measured", _measured(m))]))
    floor = verdict.floor
    if floor is not None and FLOOR_CHECK not in deciding:
        groups.append((f"the floor ({floor.status})", _floor_details(m, floor)))
    check = verdict.baseline
    if check.baseline is not None and BASELINE_CHECK not in deciding:
        state = check.outcome if check.gating else "shown, not gated"
        stored = ("provenance", f"{check.baseline.provenance} [{check.baseline.path}]")
        groups.append((f"the stored baseline ({state})", [*_baseline_details(m, check), stored]))
    comparison = verdict.comparison
    if comparison is not None and AB_CHECK not in deciding:
        groups.append((f"the A/B ({comparison.state})", _comparison_details(comparison)))
    return groups


def _gpu(m: Measurement) -> str:
    """'GPU 1 (0000:07:00.0), 12:03:04.512-12:03:05.630 UTC', and a warning on a GPU the
    probe found degraded: the slowdown may be the GPU's, not the code's."""
    assert m.gpu is not None
    text = m.gpu.describe()
    if m.gpu.uuid:
        text += f" {m.gpu.uuid}"
    if m.started_s is not None and m.ended_s is not None:
        start, end = (
            time.strftime("%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}"
            for t in (m.started_s, m.ended_s)
        )
        text += f", measured {start}-{end} UTC"
    if m.gpu.degraded:
        text += (
            " -- this GPU was slower than its peers in the run's probe: the result may be the "
            "GPU's, not the code's; rerun on a healthy GPU (--gpuperf-gpu=INDEX)"
        )
    return text


def _headlines(m: Measurement, verdict: Verdict, *, everything: bool) -> list[str]:
    lines = [_peak_headline(verdict)] if verdict.beyond_peak is not None else []
    floor = verdict.floor
    if floor is not None and (everything or floor.status != "pass"):
        lines.append(_floor_headline(floor))
    baseline = verdict.baseline
    if everything or (baseline.gating and verdict.status == FAIL and _baseline_failed(verdict)):
        text = _baseline_headline(baseline)
        if text:
            lines.append(text)
        drift = baseline.drift
        if drift is not None and "drift" in verdict.failed_checks:
            since = drift.since_commit[:12] or "an unrecorded commit"
            lines.append(
                f"drifted across saves: {signed_pct(drift.change)} since {since}, beyond "
                f"-{pct(drift.allowance)} (strict)"
            )
    comparison = verdict.comparison
    failed = verdict.failed_checks
    if comparison is not None and (
        everything
        or comparison.state == AB_REGRESSED
        or "strict-ab" in failed
        or ("strict-modelled" in failed and comparison.state == AB_MODELLED)
    ):
        lines.append(_comparison_headline(comparison))
    return lines or ["ok"]


def _baseline_failed(verdict: Verdict) -> bool:
    failed = verdict.failed_checks
    modelled = "strict-modelled" in failed and "stored" in verdict.unmeasured
    return modelled or any(c in failed for c in ("regression", "strict-baseline", "drift"))


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
        again = ""
        second = check.confirmation
        if second is not None and second.delta is not None:
            again = f", confirmed by a second round: {signed_pct(second.delta)}"
        elif check.unconfirmed:
            again = f"; not confirmed: {check.unconfirmed}"
        return (
            f"regressed: {versus}, beyond the allowance of -{pct(check.allowance)}){shown}{again}"
        )
    if check.outcome == IMPROVED:
        return f"improved: {versus}, beyond the allowance of +{pct(check.allowance)}){shown}"
    if check.outcome == WITHIN_NOISE and check.modelled:
        return (
            f"stored modelled: other code than the baseline was saved from, one model on the "
            f"simulated device: {versus}) restates the model, not measured{shown}"
        )
    if check.outcome == WITHIN_NOISE:
        return f"within noise of the baseline: {versus}, allowance +-{pct(check.allowance)}){shown}"
    return ""


def _comparison_headline(c: ComparisonCheck) -> str:
    against = f"{c.ref}" + (f" ({c.ref_commit[:12]})" if c.ref_commit else "")
    if c.ratio is None:
        if c.state == "unchanged":
            return f"A/B: same code object as {against}"
        if c.state == AB_MODELLED:
            return (
                f"A/B modelled: other code than {against}, one model on the simulated device "
                f"({modelled_text(c)}): the speed comes from the model, not measured"
            )
        return f"A/B: no base at {against} ({no_base_text(c)})"
    assert c.ratio_ci is not None
    low, high = c.ratio_ci
    interval = f"{signed_pct(low - 1)} to {signed_pct(high - 1)}"
    level = _level(c.confidence)
    if c.state == AB_REGRESSED:
        again = ""
        if c.confirmation is not None and c.confirmation.ratio is not None:
            again = f", confirmed by a second round: {signed_pct(c.confirmation.ratio - 1)}"
        elif c.unconfirmed:
            again = f"; not confirmed: {c.unconfirmed}"
        return (
            f"A/B regressed against {against}: head/base time {c.ratio:.4f} "
            f"({signed_pct(c.ratio - 1)}), {level} CI {low:.4f} to {high:.4f}, all above the "
            f"threshold 1 + {pct(c.threshold)}{again}"
        )
    return (
        f"A/B {ab_cell(c)} against {against} ({level} CI {interval}, "
        f"threshold +-{pct(c.threshold)})"
    )


def _level(confidence: float) -> str:
    """'95%', '98%', '99.37%': an interval's confidence, as few digits as say it."""
    for digits in range(3):
        text = f"{confidence:.{digits}%}"
        if abs(float(text[:-1]) / 100 - confidence) < 1e-9:
            return text
    return f"{confidence:.2%}"


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
    rows = [
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
    if check.first_outcome:
        second = check.confirmation
        if second is None or second.delta is None:
            said = f"could not be measured again: {check.unconfirmed}"
        else:
            confirmed = check.outcome == REGRESSED
            verdict = "regressed again: confirmed" if confirmed else "not confirmed"
            said = (
                f"measured again with freshly loaded code on fresh buffers: "
                f"{signed_pct(second.delta)} against the allowance of -{pct(second.allowance or 0)}"
                f": {verdict}"
            )
        rows.append(("confirmation", said))
    return rows


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
        elif band.prior_source == "reported":
            whose = "the spread its document reports"
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
    if band.pool_set_aside > 0:
        text += (
            f"; the spread pooled from {band.pooled_entries} other "
            f"{'entry' if band.pooled_entries == 1 else 'entries'} of this file would allow "
            f"{band.pool_set_aside:.2%}: set aside, a noisier neighbour never widens this "
            "entry's band"
        )
    if band.measured_sigma > 0:
        text += f"; this run's own sigma {band.measured_sigma:.2%} is larger and taken instead"
    board = board_level_text(band)
    return f"{text}; {board}" if board else text


_BOARD_WHY = {
    "unseen": "judged on a board the baseline has not seen",
    "unrecorded": "judged against saves that do not record their board",
    "unknown": "judged on a board whose UUID is unknown",
}


def board_level_text(band: NoiseBand) -> str:
    """Which level of noise the band is for: 'judged on the board that made the saves' or
    'judged on a board the baseline has not seen: between-board +-x% added (...)'."""
    if band.board_status == "seen":
        return "judged on a board that made the saves: the run-to-run spread on one board"
    why = _BOARD_WHY.get(band.board_status)
    if why is None:
        return ""
    added = Z_95 * band.between_sigma
    if band.between_source == "file":
        source = (
            f"learned from saves on {band.boards} boards with the figure "
            f"{band.between_figure} as prior ({band.between_df:.0f} df)"
        )
    else:
        source = band.between_figure or "the backend's figure"
    return f"{why}: between-board +-{added:.2%} added ({source})"


def _comparison_details(c: ComparisonCheck) -> list[tuple[str, str]]:
    if c.ratio is None or c.ratio_ci is None:
        return [("A/B", _comparison_headline(c))]
    assert c.head_efficiency is not None and c.base_efficiency is not None
    low, high = c.ratio_ci
    base = f"{pct(c.base_efficiency)}" + (
        f", {format_time(c.base_time_s)}" if c.base_time_s else ""
    )
    rows = [
        (
            "A/B",
            f"head {pct(c.head_efficiency)} vs base {base} at {c.ref} "
            f"({c.ref_commit[:12] or 'unresolved'}); head/base time {c.ratio:.4f} "
            f"({_level(c.confidence)} CI {low:.4f} to {high:.4f}) over {c.pairs} interleaved "
            "pairs",
        ),
        *_comparison_drift(c),
        ("A/B rule", _comparison_rule(c)),
    ]
    if c.first_state:
        rows.append(("confirmation", _comparison_confirmation(c)))
    return rows


def _comparison_confirmation(c: ComparisonCheck) -> str:
    second = c.confirmation
    if second is None or second.ratio is None or second.ratio_ci is None:
        return f"the first round regressed and could not be measured again: {c.unconfirmed}"
    low, high = second.ratio_ci
    said = "regressed again: confirmed" if c.state == AB_REGRESSED else f"{second.state}"
    return (
        f"measured again with freshly loaded code objects on fresh buffers: head/base time "
        f"{second.ratio:.4f} ({_level(second.confidence)} CI {low:.4f} to {high:.4f}) over "
        f"{second.pairs} pairs: {said}"
    )


def _comparison_drift(c: ComparisonCheck) -> list[tuple[str, str]]:
    """The drift between module loads, where the run measured it (DRIFT_MEASURED)."""
    if c.drift_basis != DRIFT_MEASURED:
        return []
    levels, over = _drift_levels(c)
    return [
        (
            "A/B drift",
            f"+-{pct(c.drift)} {levels}, measured {over} and carried in the interval",
        )
    ]


def _drift_levels(c: ComparisonCheck) -> tuple[str, str]:
    """('between module loads and buffer sets', 'over 8 loads per side on 8 buffer sets'):
    what the measured drift covers (a confirming round draws both anew), and from what."""
    over = f"over {c.loads} loads per side"
    if c.buffer_sets > 1:
        levels, over = (
            "between module loads and buffer sets",
            f"{over} on {c.buffer_sets} buffer sets",
        )
    else:
        levels = "between module loads"
    if c.buffer_sets_note:
        over += f" ({c.buffer_sets_note})"
    return levels, over


def _comparison_rule(c: ComparisonCheck) -> str:
    return (
        f"regressed when the whole interval lies above 1 + {pct(c.threshold)}: "
        f"{_threshold_origin(c)}"
    )


# Fields a check may carry (now or from a later gate) that say in words where its threshold
# or allowance came from; the first non-empty one is quoted as it is.
BASIS_FIELDS = ("basis",)


def _basis(check: object) -> str:
    for name in BASIS_FIELDS:
        value = getattr(check, name, "")
        if isinstance(value, str) and value:
            return value
    return ""


def _threshold_origin(c: ComparisonCheck) -> str:
    """+2.67% and what decided it (the check's threshold_basis): the user's threshold, a
    widening for a very short kernel, or an assumed code-object drift; and, when the run
    measured the drift between module loads, that it sits in the interval instead."""
    threshold = f"+{pct(c.threshold)}"
    user = f"+{pct(c.user_threshold)}" if c.user_threshold else "the threshold"
    if c.threshold_basis == BASIS_DRIFT or (
        not c.threshold_basis
        and c.code_spread > 0
        and math.isclose(c.threshold, code_allowance(c.code_spread))
    ):
        said = (
            f"{threshold}: what a different code object's drift of +-{pct(c.code_spread)} "
            "explains, ASSUMED (--gpuperf-compare-code-spread): too few loads per side to "
            "measure it (--gpuperf-compare-loads)"
        )
    elif c.threshold_basis == BASIS_QUANTUM:
        said = (
            f"{threshold}: widened from your {user} for a very short kernel, whose launches "
            "jitter by more (--gpuperf-compare-threshold)"
        )
    else:
        said = f"{threshold} (--gpuperf-compare-threshold)"
    if c.drift_basis == DRIFT_MEASURED:
        levels, over = _drift_levels(c)
        said += (
            f"; the drift {levels}, measured in this run at +-{pct(c.drift)} {over}, is "
            "carried in the interval"
        )
    return said


def _pairs_text(c: ComparisonCheck) -> str:
    """'10 interleaved pairs: head 40.37% vs base 46.20% of peak (5.138 µs) at HEAD (…)'"""
    against = f"{c.ref} ({c.ref_commit[:12] or 'unresolved'})"
    head = pct(c.head_efficiency) if c.head_efficiency is not None else "?"
    base = pct(c.base_efficiency) if c.base_efficiency is not None else "?"
    base_time = f", base {format_time(c.base_time_s)}" if c.base_time_s else ""
    return (
        f"{c.pairs} interleaved head/base pairs on the same buffers: head {head} vs base "
        f"{base} of peak{base_time}, base built from {against}"
    )


def _block(rows: list[tuple[str, str]]) -> str:
    width = max(len(key) for key, _ in rows) + 1
    return "\n".join(f"  {key + ':':<{width}} {value}" for key, value in rows)
