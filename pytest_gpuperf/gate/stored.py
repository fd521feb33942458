"""The stored-baseline check: did the efficiency drop against `baselines/<device>.toml`?"""

from __future__ import annotations

from typing import Any

from pytest_gpuperf.gate.noise import history_allowance, prior_allowance
from pytest_gpuperf.gate.policy import FALSE_ALARM_RATE, MIN_HISTORY
from pytest_gpuperf.results import (
    IMPROVED,
    NO_BASELINE,
    OTHER_DEVICE,
    REGRESSED,
    WITHIN_NOISE,
    BaselineCheck,
    BaselineRef,
    Measurement,
)


def check_baseline(
    measurement: Measurement,
    baseline: BaselineRef | None,
    *,
    tolerance: float,
    strict: bool = False,
    gating: bool = True,
    elsewhere: tuple[str, ...] = (),
    info: BaselineRef | None = None,
    device_key: str = "",
    confidence: float = 0.95,
    false_alarm_rate: float = FALSE_ALARM_RATE,
) -> BaselineCheck:
    """Compare with the stored baseline.

    delta = efficiency / baseline - 1, allowance = max(tolerance, noise): REGRESSED below
    -allowance, IMPROVED above +allowance, else WITHIN_NOISE. The noise comes from the spread
    the baseline learned from its history of saves when it has MIN_HISTORY of them, else from
    the prior a first save recorded (gate/noise.py). Without a baseline the outcome is
    NO_BASELINE (OTHER_DEVICE when `elsewhere` names devices that have one). `gating` False
    keeps the result for the reader only (an A/B comparison gates instead).
    """
    if not 0.0 <= tolerance < 1.0:
        raise ValueError(f"tolerance is a fraction in [0, 1), not {tolerance}")
    common: dict[str, Any] = {
        "tolerance": tolerance,
        "strict": strict,
        "gating": gating,
        "info": info,
        "device_key": device_key or measurement.device_key,
    }
    if baseline is None:
        outcome = OTHER_DEVICE if elsewhere else NO_BASELINE
        return BaselineCheck(outcome=outcome, elsewhere=elsewhere, **common)
    delta = measurement.efficiency / baseline.efficiency - 1.0
    if baseline.spread_basis == "history" and baseline.saves >= MIN_HISTORY:
        # Two bounds, each at half the false-alarm rate: the one learned from the saves, and
        # the prior's. A short history of a noisy device (t with 2 degrees of freedom) can be
        # wider than the prior; a history of a quiet one is far narrower. The smaller bound
        # holds the false-alarm rate (Bonferroni), whichever it is.
        noise = history_allowance(
            baseline.run_spread,
            baseline.saves,
            measurement.relative_ci,
            confidence=confidence,
            false_alarm_rate=false_alarm_rate / 2,
        )
        if baseline.prior_spread > 0:
            prior = prior_allowance(
                measurement.relative_ci,
                0.0,
                baseline.prior_spread,
                confidence=confidence,
                false_alarm_rate=false_alarm_rate / 2,
            )
            noise = min(noise, prior)
    else:
        base_low, base_high = baseline.efficiency_ci
        noise = prior_allowance(
            measurement.relative_ci,
            (base_high - base_low) / 2.0 / baseline.efficiency,
            baseline.run_spread,
            confidence=confidence,
            false_alarm_rate=false_alarm_rate,
        )
    allowance = max(tolerance, noise)
    if delta < -allowance:
        outcome = REGRESSED
    elif delta > allowance:
        outcome = IMPROVED
    else:
        outcome = WITHIN_NOISE
    return BaselineCheck(
        outcome=outcome,
        baseline=baseline,
        delta=delta,
        allowance=allowance,
        noise=noise,
        **common,
    )
