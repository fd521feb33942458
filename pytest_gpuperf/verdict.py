"""The gate: a measurement, a floor and a baseline in; pass / fail / marginal and why, out.

Floor (`min_bw(x)`): the efficiency must reach x. The efficiency interval decides when it
can; when it straddles x (the engine has already sampled to its budget), the median decides
and the result is called marginal.

Baseline: the relative change of efficiency against the stored value fails the test when it
is a drop larger than the allowance, max(tolerance, noise allowance). The noise allowance is
what an unchanged kernel would still show (see `noise_allowance`), so that false alarms stay
rare (`FALSE_ALARM_RATE`) without hiding drops the noise cannot explain.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.stats import norm

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

# One-sided: an unchanged kernel whose noise matches what the baseline recorded fails the
# baseline gate about 1% of the time.
FALSE_ALARM_RATE = 0.01
# BaselineRef.run_spread is a +-range at about 95% ("0.07 is +-7%", the seed's "+/- 7%").
RUN_SPREAD_CONFIDENCE = 0.95
DEFAULT_UPDATE_COMMAND = "pytest --gpuperf --gpuperf-save"


def noise_allowance(
    measured_rel_ci: float,
    baseline_rel_ci: float,
    run_spread: float,
    *,
    confidence: float = 0.95,
    false_alarm_rate: float = FALSE_ALARM_RATE,
) -> float:
    """The relative change of efficiency that noise alone explains, one-sided.

    z(1 - false_alarm_rate) * sqrt(2 * (run_spread / z95)^2 + (ci_now / zc)^2 + (ci_base / zc)^2):
    the baseline run and this run each sit somewhere in the run-to-run spread (hence twice
    its variance; the spread is a +-range at ~95%, so its sigma is run_spread / 1.96), and
    each median carries its own interval (half-widths at `confidence` turned into sigmas).
    The within-run terms are partly inside the run-to-run spread already: counting them
    again errs towards fewer false alarms.
    """
    z_ci = float(norm.ppf(0.5 + confidence / 2.0))
    z_run = float(norm.ppf(0.5 + RUN_SPREAD_CONFIDENCE / 2.0))
    sigma = math.sqrt(
        2.0 * (run_spread / z_run) ** 2
        + (measured_rel_ci / z_ci) ** 2
        + (baseline_rel_ci / z_ci) ** 2
    )
    return float(norm.ppf(1.0 - false_alarm_rate)) * sigma


def decide(
    measurement: Measurement,
    *,
    floor: float | None,
    baseline: BaselineRef | None,
    baseline_status: str = NO_BASELINE,
    tolerance: float,
    strict_baseline: bool = False,
    update_command: str = "",
    confidence: float = 0.95,
    false_alarm_rate: float = FALSE_ALARM_RATE,
) -> Verdict:
    """Decide one measurement against its floor and its baseline.

    Floor, with the efficiency interval [low, high] (at `confidence`, as measured):
      low >= floor -> PASS; high < floor -> FAIL;
      straddling, median >= floor -> MARGINAL: the test passes, with a warning;
      straddling, median < floor -> FAIL, the reason saying it was marginal. A median
      below the floor is the best estimate of a kernel that misses it; letting it pass
      would let a slow kernel through whenever it is noisy enough.
    Baseline, delta = efficiency / baseline efficiency - 1 and
    allowance = max(tolerance, noise_allowance(...)):
      delta < -allowance -> REGRESSED (FAIL); delta > +allowance -> IMPROVED (passes, noted);
      otherwise WITHIN_NOISE. A baseline recorded in another cache mode is not comparable
      and counts as no baseline.
    No baseline (`baseline_status` NO_BASELINE or OTHER_DEVICE): reported, not failed,
    unless `strict_baseline`, which fails and says how to record one.
    `update_command` is the command that (re)records this test's baseline; it is quoted
    in every message that asks for one.
    """
    if not 0.0 <= tolerance < 1.0:
        raise ValueError(f"tolerance is a fraction in [0, 1), not {tolerance}")
    if floor is not None and not floor > 0.0:
        raise ValueError(f"floor is an efficiency fraction > 0, not {floor}")
    command = update_command or DEFAULT_UPDATE_COMMAND
    facts = _Facts.of(measurement, confidence)
    floor_check = _check_floor(facts, floor, confidence)
    base_check = _check_baseline(
        facts,
        baseline,
        baseline_status,
        tolerance=tolerance,
        strict=strict_baseline,
        command=command,
        confidence=confidence,
        false_alarm_rate=false_alarm_rate,
    )
    checks = [c for c in (floor_check, base_check) if c is not None]
    if any(c.status == FAIL for c in checks):
        status = FAIL
    elif any(c.status == MARGINAL for c in checks):
        status = MARGINAL
    else:
        status = PASS

    if status == PASS:
        reason = f"{facts.label}: " + "; ".join(c.summary for c in checks)
    else:
        headlines = [c.summary for c in checks if c.status != PASS]
        details = [("measured", facts.measured_line)]
        for check in checks:
            details.extend(check.details)
        details += [("cache", facts.cache), ("device", facts.device_line)]
        for check in checks:
            details.extend(check.trailer)
        reason = f"{facts.label}: " + "; ".join(headlines) + "\n" + _block(details)

    return Verdict(
        status=status,
        reason=reason,
        floor=floor,
        floor_status=floor_check.status if floor_check else None,
        baseline_status=base_check.baseline_status,
        baseline=base_check.baseline,
        delta=base_check.delta,
        allowance=base_check.allowance,
        notes=tuple(note for c in checks for note in c.notes),
    )


# -- the two checks -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Facts:
    """What every message says about the measurement, computed once."""

    label: str
    device_key: str
    cache: str
    efficiency: float
    efficiency_ci: tuple[float, float]
    rel_ci: float
    peak_bps: float
    measured_line: str
    device_line: str

    @classmethod
    def of(cls, m: Measurement, confidence: float) -> _Facts:
        efficiency = m.efficiency
        low, high = m.efficiency_ci
        rel_ci = (high - low) / 2.0 / efficiency
        stopped = f", stopped by {m.stopped_by}" if m.stopped_by else ""
        measured = (
            f"{_pct(efficiency)} of peak = {_gbps(m.bandwidth_bps)} "
            f"({confidence:.0%} CI {_pct(low)} to {_pct(high)}, +-{rel_ci:.2%}; "
            f"median {_time(m.time_s)} of {len(m.samples_s)} samples{stopped})"
        )
        simulated = ", simulated" if m.simulated else ""
        device = (
            f"{m.device_key} ({m.device_name}{simulated}), {m.backend} backend, "
            f"peak {_gbps(m.peak_bps)}"
        )
        label = m.name if m.kernel in ("", m.name) else f"{m.name} (kernel {m.kernel})"
        return cls(
            label=label,
            device_key=m.device_key,
            cache=m.cache,
            efficiency=efficiency,
            efficiency_ci=(low, high),
            rel_ci=rel_ci,
            peak_bps=m.peak_bps,
            measured_line=measured,
            device_line=device,
        )


@dataclass(frozen=True)
class _Check:
    """One gate's outcome: a status, a one-line summary, and the lines a failure adds."""

    status: str
    summary: str
    details: tuple[tuple[str, str], ...] = ()
    trailer: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()
    baseline_status: str = NO_BASELINE
    baseline: BaselineRef | None = None
    delta: float | None = None
    allowance: float | None = None


def _check_floor(facts: _Facts, floor: float | None, confidence: float) -> _Check | None:
    if floor is None:
        return None
    low, high = facts.efficiency_ci
    median = facts.efficiency
    interval = f"the {confidence:.0%} interval {_pct(low)} to {_pct(high)}"
    if low >= floor:
        return _Check(PASS, f"{_pct(median)} reaches the floor {_pct(floor)}")
    if high < floor:
        status, summary = FAIL, f"efficiency {_pct(median)} is below the floor {_pct(floor)}"
        noise = f"{interval} lies entirely below the floor: not noise"
        notes: tuple[str, ...] = ()
    elif median >= floor:
        status = MARGINAL
        summary = f"marginal: efficiency {_pct(median)} is just at the floor {_pct(floor)}"
        noise = f"{interval} straddles the floor; decided on the median, which reaches it"
        notes = (
            f"marginal: {interval} straddles the floor {_pct(floor)}; passed on the median "
            f"{_pct(median)}. A longer budget or a steadier machine would settle it.",
        )
    else:
        status = FAIL
        summary = (
            f"efficiency {_pct(median)} is below the floor {_pct(floor)} (marginal: the "
            "interval straddles the floor; decided on the median)"
        )
        noise = f"{interval} straddles the floor; decided on the median, which misses it"
        notes = ()
    details = (
        ("floor", f"expected >= {_pct(floor)} of peak = {_gbps(floor * facts.peak_bps)}"),
        ("vs floor", _difference(median, floor)),
        ("floor noise", noise),
    )
    return _Check(status, summary, details=details, notes=notes)


def _check_baseline(
    facts: _Facts,
    baseline: BaselineRef | None,
    baseline_status: str,
    *,
    tolerance: float,
    strict: bool,
    command: str,
    confidence: float,
    false_alarm_rate: float,
) -> _Check:
    if baseline is None:
        if baseline_status not in (NO_BASELINE, OTHER_DEVICE):
            raise ValueError(
                f"without a baseline, baseline_status must be {NO_BASELINE!r} or "
                f"{OTHER_DEVICE!r}, not {baseline_status!r}"
            )
        why = f"no baseline for device {facts.device_key}"
        if baseline_status == OTHER_DEVICE:
            why += " (this test has baselines for other devices only)"
        return _missing(baseline_status, why, strict, command)
    if baseline.cache != facts.cache:
        why = (
            f"the baseline in {baseline.path} was recorded with cache={baseline.cache!r}, "
            f"not {facts.cache!r}: not comparable"
        )
        return _missing(NO_BASELINE, why, strict, command)

    delta = facts.efficiency / baseline.efficiency - 1.0
    base_low, base_high = baseline.efficiency_ci
    base_rel_ci = (base_high - base_low) / 2.0 / baseline.efficiency
    noise = noise_allowance(
        facts.rel_ci,
        base_rel_ci,
        baseline.run_spread,
        confidence=confidence,
        false_alarm_rate=false_alarm_rate,
    )
    allowance = max(tolerance, noise)
    versus = f"{_pct(facts.efficiency)} vs baseline {_pct(baseline.efficiency)} ({delta:+.2%}"
    if delta < -allowance:
        outcome, status = REGRESSED, FAIL
        summary = f"regressed: {versus}, beyond the allowance of -{allowance:.2%})"
    elif delta > allowance:
        outcome, status = IMPROVED, PASS
        summary = f"improved: {versus}, beyond the allowance of +{allowance:.2%})"
    else:
        outcome, status = WITHIN_NOISE, PASS
        summary = f"within noise of the baseline: {versus}, allowance +-{allowance:.2%})"
    notes: tuple[str, ...] = ()
    if outcome == IMPROVED:
        notes = (f"faster than baseline by {delta:.1%}: consider --gpuperf-save ({command})",)
    rule = "the larger of tolerance and noise"
    details = (
        (
            "baseline",
            f"expected {_pct(baseline.efficiency)} of peak = {_gbps(baseline.bandwidth_bps)} "
            f"(CI {_pct(base_low)} to {_pct(base_high)}, run-to-run +-{baseline.run_spread:.1%}, "
            f"{baseline.source}, cache={baseline.cache})",
        ),
        ("vs baseline", _difference(facts.efficiency, baseline.efficiency)),
        (
            "allowance",
            f"+-{allowance:.2%} = {rule}: tolerance {tolerance:.2%}, noise {noise:.2%} "
            f"(run-to-run +-{baseline.run_spread:.1%} of both runs, CI +-{facts.rel_ci:.2%} "
            f"now and +-{base_rel_ci:.2%} then, at a {false_alarm_rate:.0%} false-alarm rate)",
        ),
    )
    trailer: tuple[tuple[str, str], ...] = (
        ("provenance", f"{baseline.provenance} [{baseline.path}]"),
    )
    if status == FAIL:
        trailer += (
            (
                "update",
                f"{command}   (if this slowdown is intended: re-records the baseline)",
            ),
        )
    return _Check(
        status,
        summary,
        details=details,
        trailer=trailer,
        notes=notes,
        baseline_status=outcome,
        baseline=baseline,
        delta=delta,
        allowance=allowance,
    )


def _missing(outcome: str, why: str, strict: bool, command: str) -> _Check:
    if not strict:
        return _Check(
            PASS,
            f"{why}, not compared",
            notes=(f"{why}; record one with: {command}",),
            baseline_status=outcome,
        )
    return _Check(
        FAIL,
        f"{why}, and a baseline is required (strict baselines)",
        details=(("baseline", why),),
        trailer=(("record", command),),
        baseline_status=outcome,
    )


# -- formatting -----------------------------------------------------------------------------


def _difference(value: float, expected: float) -> str:
    return (
        f"{(value - expected) * 100:+.2f} points of peak ({value / expected - 1.0:+.2%} relative)"
    )


def _block(rows: list[tuple[str, str]]) -> str:
    width = max(len(key) for key, _ in rows) + 1
    return "\n".join(f"  {key + ':':<{width}} {value}" for key, value in rows)


def _pct(fraction: float) -> str:
    return f"{fraction:.2%}"


def _gbps(bandwidth_bps: float) -> str:
    gbps = bandwidth_bps / 1e9
    return f"{gbps:,.0f} GB/s" if gbps >= 100 else f"{gbps:.3g} GB/s"


def _time(time_s: float) -> str:
    if time_s >= 1e-3:
        return f"{time_s * 1e3:.4g} ms"
    return f"{time_s * 1e6:.4g} µs"
