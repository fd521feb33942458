"""How large a change noise alone explains: the allowances of the stored-baseline gate.

Two cases. A baseline saved once carries only a prior spread (policy.prior_run_spread), and
both runs sit somewhere in it: `prior_allowance`. A baseline with a history of saves of the
same code has a spread measured from those saves; the next run is one more draw from the same
distribution, so the allowance is a one-sided prediction interval (`history_allowance`), with
Student's t for a spread estimated from few saves.
"""

from __future__ import annotations

import math

from scipy.stats import norm
from scipy.stats import t as student_t

from pytest_gpuperf.gate.policy import FALSE_ALARM_RATE, RUN_SPREAD_CONFIDENCE


def _z(confidence: float) -> float:
    return float(norm.ppf(0.5 + confidence / 2.0))


def prior_allowance(
    measured_rel_ci: float,
    baseline_rel_ci: float,
    run_spread: float,
    *,
    confidence: float = 0.95,
    false_alarm_rate: float = FALSE_ALARM_RATE,
) -> float:
    """The relative drop noise alone explains against a baseline saved once.

    z(1 - false_alarm_rate) * sqrt(2 * (run_spread / z95)^2 + (ci_now / zc)^2 + (ci_base / zc)^2):
    the baseline run and this run each sit somewhere in the run-to-run spread (hence twice
    its variance; the spread is a +-range at ~95%), and each median carries its own interval.
    The within-run terms are partly inside the run-to-run spread already: counting them again
    errs towards fewer false alarms.
    """
    z_ci, z_run = _z(confidence), _z(RUN_SPREAD_CONFIDENCE)
    sigma = math.sqrt(
        2.0 * (run_spread / z_run) ** 2
        + (measured_rel_ci / z_ci) ** 2
        + (baseline_rel_ci / z_ci) ** 2
    )
    return float(norm.ppf(1.0 - false_alarm_rate)) * sigma


def history_allowance(
    run_spread: float,
    saves: int,
    measured_rel_ci: float,
    *,
    confidence: float = 0.95,
    false_alarm_rate: float = FALSE_ALARM_RATE,
) -> float:
    """The relative drop noise alone explains against the centre of `saves` saves whose
    spread (+-95%) was learned from them.

    t(1 - false_alarm_rate; saves - 1) * sigma * sqrt(1 + pi / (2 * saves)): a prediction
    interval for one more run around the MEDIAN of the saves (whose variance is about
    pi / 2 times the mean's); sigma is the learned spread's, but never less than this run's
    own interval says its median is uncertain by.
    """
    if saves < 2:
        raise ValueError(f"a learned spread needs at least 2 saves, not {saves}")
    sigma = max(run_spread / _z(RUN_SPREAD_CONFIDENCE), measured_rel_ci / _z(confidence))
    quantile = float(student_t.ppf(1.0 - false_alarm_rate, saves - 1))
    return quantile * sigma * math.sqrt(1.0 + math.pi / (2.0 * saves))
