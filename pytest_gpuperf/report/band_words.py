"""How a stored baseline's noise band was reached, in words: the same text in a failure's
message and in `gpuperf history`."""

from __future__ import annotations

from pytest_gpuperf.gate.policy import Z_95
from pytest_gpuperf.record.checks import NoiseBand


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
    words in failures and in `gpuperf history`)."""
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
    if band.prior_refused_p > 0:
        text += (
            f"; the backend's prior counts as a guess ({band.prior_df:.0f} df): this entry's "
            f"saves scatter more than it (F test, p = {band.prior_refused_p:.3f})"
        )
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
