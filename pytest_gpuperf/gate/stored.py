"""The stored-baseline check: did the efficiency drop against `baselines/<device>.toml`?"""

from __future__ import annotations

from typing import Any

from pytest_gpuperf.baseline.ref import BaselineRef
from pytest_gpuperf.engine.results import Measurement
from pytest_gpuperf.gate.drift import drift_of
from pytest_gpuperf.gate.noise import stored_band
from pytest_gpuperf.gate.policy import FALSE_ALARM_RATE
from pytest_gpuperf.record.checks import (
    IMPROVED,
    NO_BASELINE,
    OTHER_DEVICE,
    REGRESSED,
    WITHIN_NOISE,
    BaselineCheck,
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
    prior_df: float | None = None,
    simulated_board_spread: float = 0.0,
) -> BaselineCheck:
    """Compare with the stored baseline.

    delta = efficiency / baseline - 1, allowance = max(tolerance, noise): REGRESSED below
    -allowance, IMPROVED above +allowance, else WITHIN_NOISE. The noise is a one-sided
    prediction bound at `false_alarm_rate` for one new run, from the entry's saves combined
    with a prior: the file's pooled spread, or the backend's figure worth `prior_df` degrees of
    freedom (None: the backend's default, policy.prior_df_for); gate/noise.py, `stored_band`;
    the check keeps it as `band`, with its basis. `confidence` is the level of the
    measurement's own interval. Without a baseline the outcome is
    NO_BASELINE (OTHER_DEVICE when `elsewhere` names devices that have one). `gating` False
    keeps the result for the reader only (an A/B comparison gates instead). On the simulated
    device, a result within the noise for code other than the entry's is `modelled`.
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
    judgement = stored_judgement(
        measurement,
        baseline,
        measurement.efficiency,
        measurement.relative_ci,
        tolerance=tolerance,
        false_alarm_rate=false_alarm_rate,
        confidence=confidence,
        prior_df=prior_df,
        simulated_board_spread=simulated_board_spread,
    )
    drift = None
    if baseline.source == "measured":
        drift = drift_of(
            baseline,
            tolerance=tolerance,
            false_alarm_rate=false_alarm_rate,
            simulated_board_spread=simulated_board_spread,
        )
    return BaselineCheck(drift=drift, **judgement, **common)


def stored_judgement(
    measurement: Measurement,
    baseline: BaselineRef,
    efficiency: float,
    relative_ci: float,
    *,
    tolerance: float,
    false_alarm_rate: float,
    confidence: float = 0.95,
    prior_df: float | None = None,
    simulated_board_spread: float = 0.0,
) -> dict[str, Any]:
    """The BaselineCheck fields the stored rule decides for `efficiency` (its interval
    `relative_ci`) of `measurement` against `baseline` (check_baseline's words say how): the
    delta, the band and allowance, the outcome, whether it was only modelled. What
    check_baseline gives a measurement, and gate/recheck.py a report's numbers (a confirming
    round's too)."""
    delta = efficiency / baseline.efficiency - 1.0
    band = stored_band(
        baseline,
        relative_ci,
        confidence=confidence,
        false_alarm_rate=false_alarm_rate,
        prior_df=prior_df,
        simulated_board_spread=simulated_board_spread,
    )
    allowance = max(tolerance, band.noise)
    if delta < -allowance:
        outcome = REGRESSED
    elif delta > allowance:
        outcome = IMPROVED
    else:
        outcome = WITHIN_NOISE
    return {
        "outcome": outcome,
        "baseline": baseline,
        "delta": delta,
        "allowance": allowance,
        "noise": band.noise,
        "band": band,
        "modelled": outcome == WITHIN_NOISE and _modelled(measurement, baseline),
    }


def _modelled(measurement: Measurement, baseline: BaselineRef) -> bool:
    """The simulated device timed other code than the entry was saved from: its time comes
    from the kernel's model, which an edit of the body leaves alone, so "within the noise"
    says nothing about the edit (a changed model moves the time and still decides)."""
    return (
        measurement.simulated
        and bool(measurement.fingerprint and baseline.fingerprint)
        and measurement.fingerprint != baseline.fingerprint
    )
