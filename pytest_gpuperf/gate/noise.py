"""How large a change noise alone explains: the band of the stored-baseline gate.

One rule for every entry, from a first save to a full history (`stored_band`). The run-to-run
spread of an entry is estimated as a posterior, the conjugate update of a normal variance:

    sigma^2 = (prior_df * prior_sigma^2 + SS) / (prior_df + saves - 1),   df = prior_df + saves - 1

where SS is the sum of squared deviations of the saves' log efficiencies. The prior is the
backend's figure for a first save at this kernel time and cache mode
(policy.prior_run_spread, worth policy.prior_df_for degrees of freedom: 8 for CUDA, measured
on four boards, 3 elsewhere; the simulated device's figure is its own setting, known
exactly), or the file's pooled spread at this kernel time (baseline/pool.py: entries of
comparable noise only) when the pool holds at least as many degrees of freedom. An entry
whose saves scatter significantly more than a measured figure (a one-sided F test at
POOL_CONFLICT_P) counts that figure as a guess (policy.PRIOR_DF) instead. The pool is a
second opinion that may only sharpen: the band is made both ways and the pooled one is taken
only when it is no wider (a noisier neighbour never raises a steadier entry's band), and an
entry whose own saves scatter significantly more than its pool (a one-sided F test at
POOL_CONFLICT_P) is judged without it. The next run is one more draw around the centre, the
median of the saves, so the band is a one-sided prediction bound for one new run:

    noise = t(1 - false_alarm_rate; df) * max(sigma, this run's own sigma) * sqrt(1 + c(saves))

with c(n) the variance of a median of n draws in units of sigma^2 (1/n for n <= 2, where the
median is the mean; pi / 2n beyond, at most 1/2).

Why more saves never loosen the band unless they scatter more than assumed: each save adds a
degree of freedom (t falls), shrinks c (the centre is surer), and changes sigma^2 only through
SS; a save raises sigma^2 only when its squared distance from the mean of the earlier saves,
times k / (k + 1), exceeds the sigma^2 assumed before it. Both candidate bands obey this, so
their smaller one does too, and the switch between them (a pool that grows past the prior's
degrees of freedom) can only narrow the band. tests/unit/test_stored_band.py checks this over
thousands of random histories, and over files whose entries are saved together.
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace

from pytest_gpuperf.baseline.ref import BaselineRef
from pytest_gpuperf.engine import distributions
from pytest_gpuperf.gate.policy import (
    BETWEEN_BOARD_SOURCE,
    BETWEEN_PRIOR_DF,
    FALSE_ALARM_RATE,
    POOL_CONFLICT_P,
    PRIOR_DF,
    RUN_SPREAD_CONFIDENCE,
    RUN_SPREAD_MODEL,
    between_board_spread,
    prior_df_for,
    prior_run_spread,
)
from pytest_gpuperf.record.checks import NoiseBand

PRIOR, HISTORY, POOLED = "prior", "history", "pooled"


# The quantiles a band needs, each computed once per process: a run judges many entries at
# the same rate and confidence (a Monte Carlo of the gate asked for them 12,000 times for
# 2,000 checks). They come from scipy.special (engine/distributions.py): a run that judges
# never imports scipy.stats, whose import costs more than the rest of a verdict.
@functools.lru_cache(maxsize=512)
def _norm_ppf(p: float) -> float:
    return distributions.norm_ppf(p)


@functools.lru_cache(maxsize=512)
def _norm_isf(p: float) -> float:
    return distributions.norm_isf(p)


@functools.lru_cache(maxsize=512)
def _t_isf(p: float, df: float) -> float:
    return distributions.t_isf(p, df)


def _z(confidence: float) -> float:
    return _norm_ppf(0.5 + confidence / 2.0)


def prior_allowance(
    measured_rel_ci: float,
    baseline_rel_ci: float,
    run_spread: float,
    *,
    confidence: float = 0.95,
    false_alarm_rate: float = FALSE_ALARM_RATE,
) -> float:
    """The relative drop noise alone explains between two single runs whose run-to-run
    spread is known: z(1 - false_alarm_rate) * sqrt(2 * (run_spread / z95)^2 + (ci_now / zc)^2
    + (ci_base / zc)^2). The calibration study of bench/gate_quality.py uses it (one baseline
    run against one run); the gate's own band is `stored_band`."""
    z_ci, z_run = _z(confidence), _z(RUN_SPREAD_CONFIDENCE)
    sigma = math.sqrt(
        2.0 * (run_spread / z_run) ** 2
        + (measured_rel_ci / z_ci) ** 2
        + (baseline_rel_ci / z_ci) ** 2
    )
    return _norm_isf(false_alarm_rate) * sigma


def centre_factor(saves: int) -> float:
    """sqrt(1 + var(centre) / sigma^2) for a centre that is the median of `saves` runs.

    1/n for one or two saves (their median is their mean); pi / 2n beyond (the large-sample
    variance of a median), capped at 1/2: the exact value for three normal draws is 0.449, so
    the cap errs towards fewer false alarms and keeps the factor falling with every save."""
    n = max(saves, 1)
    share = 1.0 / n if n <= 2 else min(0.5, math.pi / (2.0 * n))
    return math.sqrt(1.0 + share)


def backend_prior_spread(ref: BaselineRef) -> float:
    """The backend's +-95% figure for this entry: as written in the file while the entry is on
    its prior (a hand edit of run_spread counts); for a history of a real GPU, the figure the
    backend gives now at the entry's kernel time and cache mode (policy.prior_run_spread, so
    a file saved under an older, looser figure is judged by the measured one); else the prior
    it was first saved with."""
    if ref.spread_basis != "history" or ref.prior_spread <= 0:
        return ref.run_spread
    if ref.backend in RUN_SPREAD_MODEL and ref.time_s > 0:
        return prior_run_spread(ref.backend, ref.time_s, ref.cache)
    return ref.prior_spread


def stored_band(
    ref: BaselineRef,
    measured_rel_ci: float,
    *,
    confidence: float = 0.95,
    false_alarm_rate: float = FALSE_ALARM_RATE,
    prior_df: float | None = None,
    simulated_board_spread: float = 0.0,
) -> NoiseBand:
    """The drop noise alone explains against `ref` at `false_alarm_rate` (one-sided), and how
    it was reached (module docstring). `measured_rel_ci` is this run's own interval half-width
    at `confidence`; 0 for the band a history of saves implies on its own. `prior_df` is what
    the backend's figure is worth (None: policy.prior_df_for the entry's backend; infinite:
    known exactly, the band then uses the normal quantile and NoiseBand.df is 0)."""
    if not 0.0 < false_alarm_rate < 0.5:
        raise ValueError(f"the false-alarm rate is a fraction in (0, 0.5), not {false_alarm_rate}")
    if prior_df is None:
        # a reported entry's spread is the one its document states (the MI300X blog's +-7%):
        # taken as stated, since no save of it can ever say better
        prior_df = math.inf if ref.source == "reported" else prior_df_for(ref.backend)
    history_df = 0
    if ref.source == "measured":
        history_df = max(ref.saves, 1) - 1 if ref.history_df is None else ref.history_df
    prior_refused_p = prior_conflict(ref, history_df, prior_df)
    if prior_refused_p > 0:
        prior_df = PRIOR_DF
    refused_p = pool_conflict(ref, history_df)
    poolable = ref.pooled_entries > 0 and ref.pooled_df >= prior_df and not refused_p
    inputs = (measured_rel_ci, confidence, false_alarm_rate, prior_df, history_df)
    own = _band(ref, *inputs, simulated_board_spread, refused_p, use_pool=False)
    own = replace(own, prior_refused_p=prior_refused_p)
    if not poolable:
        return own
    pooled = _band(ref, *inputs, simulated_board_spread, refused_p, use_pool=True)
    if pooled.noise <= own.noise:
        return replace(pooled, prior_refused_p=prior_refused_p)
    # the neighbours scatter more than this entry's own figure and saves say it does: a
    # noisier neighbour must not raise a steadier entry's band
    return replace(own, pool_set_aside=pooled.noise, pooled_entries=ref.pooled_entries)


def _band(
    ref: BaselineRef,
    measured_rel_ci: float,
    confidence: float,
    false_alarm_rate: float,
    prior_df: float,
    history_df: int,
    simulated_board_spread: float,
    refused_p: float,
    *,
    use_pool: bool,
) -> NoiseBand:
    """The band with the file's pool as prior (`use_pool`) or the backend's figure."""
    z_run = _z(RUN_SPREAD_CONFIDENCE)
    saves = max(ref.saves, 1)
    if use_pool:
        source, prior_sigma, prior_weight = "file", ref.pooled_spread / z_run, ref.pooled_df
    else:
        # a history entry without the prior it was first saved with (an older or hand-written
        # file): its run_spread as written stands in for the backend's figure
        source = "entry" if ref.spread_basis == "history" and ref.prior_spread <= 0 else "backend"
        if ref.source == "reported":
            source = "reported"
        prior_sigma, prior_weight = backend_prior_spread(ref) / z_run, prior_df
    squares = ref.history_sd**2 * history_df
    df = prior_weight + history_df
    if math.isinf(df):  # a spread known exactly: the saves cannot add to it
        sigma, quantile = prior_sigma, _norm_isf(false_alarm_rate)
    else:
        sigma = math.sqrt((prior_weight * prior_sigma**2 + squares) / df)
        # isf, not ppf(1 - rate): 1 - 1e-17 rounds to 1, whose quantile is infinite
        quantile = _t_isf(false_alarm_rate, df)
    measured_sigma = measured_rel_ci / _z(confidence) if measured_rel_ci > 0 else 0.0
    factor = centre_factor(saves)
    between = _between(ref, simulated_board_spread)
    if between is not None:
        between_sigma, between_df, between_source = between
        # the new run's board differs from the centre's mix of `boards` boards by the spread
        # between boards, the centre from the model's mean by that spread / sqrt(boards)
        own = (max(sigma, measured_sigma) * factor) ** 2
        added = between_sigma**2 * (1.0 + 1.0 / max(ref.boards, 1))
        total_df = _satterthwaite(own, df, added, between_df)
        if math.isinf(total_df):
            quantile = _norm_isf(false_alarm_rate)
        else:
            quantile = _t_isf(false_alarm_rate, total_df)
        noise = quantile * math.sqrt(own + added)
        df = total_df
    else:
        between_sigma, between_df, between_source = 0.0, 0.0, ""
        noise = quantile * max(sigma, measured_sigma) * factor
    if source == "file":
        basis = POOLED
    else:
        basis = HISTORY if history_df > 0 and math.isfinite(prior_weight) else PRIOR
    if not (math.isfinite(noise) and noise >= 0.0):  # an infinite band passes any slowdown
        raise ValueError(
            f"the noise band of the baseline in {ref.path} came out {noise!r} (quantile "
            f"{quantile!r} at a false-alarm rate {false_alarm_rate!r}, sigma {sigma!r}); "
            "refusing to judge by it"
        )
    return NoiseBand(
        basis=basis,
        noise=noise,
        sigma=sigma,
        df=df if math.isfinite(df) else 0.0,
        quantile=quantile,
        centre_factor=factor,
        saves=saves,
        false_alarm_rate=false_alarm_rate,
        prior_source=source,
        prior_sigma=prior_sigma,
        prior_df=prior_weight if math.isfinite(prior_weight) else 0.0,
        history_sigma=ref.history_sd,
        history_df=history_df,
        pooled_entries=ref.pooled_entries if use_pool else 0,
        measured_sigma=measured_sigma if measured_sigma > sigma else 0.0,
        pool_refused_p=refused_p,
        board_status=ref.board_status,
        between_sigma=between_sigma,
        between_df=between_df if math.isfinite(between_df) else 0.0,
        between_source=between_source,
        between_figure=BETWEEN_BOARD_SOURCE.get(ref.backend, "") if between else "",
        boards=ref.boards,
    )


def _between(ref: BaselineRef, simulated_board_spread: float) -> tuple[float, float, str] | None:
    """(sigma between boards, its degrees of freedom, "file" or "figure") when the run is not
    on a board that made the entry's saves; None when it is (or for a reported entry).

    The figure (policy.between_board_spread at the entry's kernel time; the simulated
    device's setting, known exactly) is the prior; saves on two or more boards update it as
    the run-to-run spread's prior is updated (BETWEEN_PRIOR_DF)."""
    if ref.board_status in ("", "seen") or ref.source != "measured":
        return None
    z_run = _z(RUN_SPREAD_CONFIDENCE)
    if ref.backend == "sim":
        return simulated_board_spread / z_run, math.inf, "figure"
    figure_sigma = between_board_spread(ref.backend, ref.time_s, ref.cache) / z_run
    if ref.between_df < 1:
        return figure_sigma, BETWEEN_PRIOR_DF, "figure"
    df = BETWEEN_PRIOR_DF + ref.between_df
    variance = (BETWEEN_PRIOR_DF * figure_sigma**2 + ref.between_df * ref.between_sd**2) / df
    return math.sqrt(variance), df, "file"


def _satterthwaite(a: float, df_a: float, b: float, df_b: float) -> float:
    """Welch-Satterthwaite degrees of freedom of the variance sum a + b."""
    terms = (a * a / df_a if math.isfinite(df_a) and df_a > 0 else 0.0) + (
        b * b / df_b if math.isfinite(df_b) and df_b > 0 else 0.0
    )
    return (a + b) ** 2 / terms if terms > 0 else math.inf


def board_added(band: NoiseBand) -> float:
    """The +-95% range the between-board term stands for (0 on a board that made saves)."""
    return _z(RUN_SPREAD_CONFIDENCE) * band.between_sigma


def prior_conflict(ref: BaselineRef, history_df: int, prior_df: float) -> float:
    """The p-value of the entry's saves scattering MORE than the backend's figure says (a
    one-sided F test of their variance against the figure's, at its prior_df) when it is
    below POOL_CONFLICT_P, else 0. Only for a figure worth more than a guess (PRIOR_DF):
    CUDA's is fitted on our boards with our kernel, and a user's kernel that scatters
    significantly more than it is judged with the figure worth PRIOR_DF, so that its own saves
    outweigh it sooner. An entry whose saves scatter no more than the figure never trips it."""
    if not (math.isfinite(prior_df) and prior_df > PRIOR_DF):
        return 0.0
    return _scatters_more(ref, history_df, backend_prior_spread(ref), prior_df)


def pool_conflict(ref: BaselineRef, history_df: int) -> float:
    """The p-value of the entry's saves scattering MORE than the file's pool says (one-sided F
    test of their variance against the pooled one) when it is below POOL_CONFLICT_P, else 0.

    A kernel noisier than its neighbours must not be judged by their spread; its own saves
    are the evidence. An entry whose saves scatter no more than the pool never trips it."""
    if ref.pooled_entries == 0:
        return 0.0
    return _scatters_more(ref, history_df, ref.pooled_spread, ref.pooled_df)


def _scatters_more(ref: BaselineRef, history_df: int, spread: float, spread_df: float) -> float:
    """The one-sided F test both conflicts use: the p-value of the entry's saves (history_sd,
    history_df) scattering more than `spread` (a +-95% range worth `spread_df`) when it is below
    POOL_CONFLICT_P, else 0 (also when there is nothing to test)."""
    if history_df < 1 or spread <= 0:
        return 0.0
    ratio = (ref.history_sd * _z(RUN_SPREAD_CONFIDENCE) / spread) ** 2
    if ratio <= 1.0:
        return 0.0
    p_value = distributions.f_sf(ratio, history_df, spread_df)
    return p_value if p_value < POOL_CONFLICT_P else 0.0
