"""Noise by level, saves outweighing a guess, and drift across saves (gate/noise.py,
baseline/model.py, gate/saving.py, gate/drift.py).

- Levels: a run on a board that made the entry's saves is judged with the run-to-run spread
  on one board; a run on another board (or against saves that do not record theirs) adds the
  between-board spread, the measured figure until saves on several boards teach it.
- The prior is worth prior_df_for(backend) degrees of freedom: an entry whose saves scatter by 0.1%
  reaches an allowance set by its own scatter and the tolerance.
- The property the docs promise, over seeded random histories that slide past the kept
  length (saves made through gate/saving.py's plan_save, as --gpuperf-save makes them): a
  save that does not raise the spread estimate of its board never loosens the band.
- Drift: the trail of replaced baselines, and a drop across it beyond the two levels' noise.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from pytest_gpuperf.baseline import BaselineStore
from pytest_gpuperf.baseline.model import between_spread, within_spread
from pytest_gpuperf.baseline.ref import TrailPoint
from pytest_gpuperf.engine.results import GpuIdentity, Measurement
from pytest_gpuperf.gate.drift import detect_drift
from pytest_gpuperf.gate.noise import board_added, stored_band
from pytest_gpuperf.gate.policy import (
    BETWEEN_BOARD_MODEL,
    DEFAULT_TOLERANCE,
    between_board_spread,
    prior_df_for,
    prior_run_spread,
)
from pytest_gpuperf.gate.saving import SaveContext, plan_save
from pytest_gpuperf.gate.stored import check_baseline
from pytest_gpuperf.record.checks import REGRESSED
from pytest_gpuperf.report.band_words import band_text
from tests import records
from tests.records import H100

PEAK_BPS = 3.352e12
BOARD_A, BOARD_B, BOARD_C = "GPU-aaaaaaaa-0000", "GPU-bbbbbbbb-0000", "GPU-cccccccc-0000"
Z95 = 1.959963984540054


def measurement(
    efficiency: float,
    *,
    time_s: float = 170e-6,
    board: str = BOARD_A,
    cache: str = "cold",
    fingerprint: str = "sha256:k",
) -> Measurement:
    return records.measurement(
        efficiency,
        time_s=time_s * 0.8 / efficiency,
        bytes_moved=int(0.8 * PEAK_BPS * time_s),
        rel_ci=0.0005,
        samples_s=(time_s,) * 50,
        cache=cache,
        backend="cuda",
        fingerprint=fingerprint,
        gpu=GpuIdentity(0, uuid=board),
        **H100,
    )


def save(previous, m: Measurement, *, commit: str = "c0", history_length: int = 10, when=""):
    context = SaveContext(
        test_id="t.py::test_k",
        path="h100-sxm.toml",
        device_key="h100-sxm",
        commit=commit,
        prior_spread=prior_run_spread("cuda", m.time_s, m.cache),
        history_length=history_length,
        when=when or "2026-11-25T00:00:00Z",
        board=m.gpu.uuid if m.gpu else "",
        host="runner-1",
    )
    _, entry = plan_save(m, previous, context)
    assert entry is not None
    return entry


def history(logs, *, board=BOARD_A, history_length=10, time_s=170e-6):
    entry = None
    for y in logs:
        entry = save(
            entry,
            measurement(0.8 * math.exp(y), board=board, time_s=time_s),
            history_length=history_length,
        )
    return entry


# -- levels ---------------------------------------------------------------------------------


def test_a_run_on_the_saving_board_is_judged_with_the_run_to_run_spread_alone():
    entry = history([0.0, 0.001, -0.0005])
    seen = stored_band(entry.to_ref("f", board=BOARD_A), 0.0)
    unseen = stored_band(entry.to_ref("f", board=BOARD_B), 0.0)
    assert seen.board_status == "seen" and seen.between_sigma == 0.0
    assert unseen.board_status == "unseen" and unseen.between_source == "figure"
    figure = between_board_spread("cuda", entry.time_s)
    assert board_added(unseen) == pytest.approx(figure, rel=1e-3)
    assert unseen.noise > seen.noise
    # the figure: relative part and an absolute jitter, so short kernels add more
    assert between_board_spread("cuda", 5e-6) > 3 * between_board_spread("cuda", 170e-6)
    assert BETWEEN_BOARD_MODEL["cuda"]["cold"][0] > 0
    # hot launches follow each other: a board's launch cost matters less
    assert between_board_spread("cuda", 5e-6, "hot") < between_board_spread("cuda", 5e-6)
    text = band_text(unseen)
    assert f"judged on a board the baseline has not seen: between-board +-{figure:.2%} added" in (
        text
    )
    assert "measured on H100 SXM boards against the committed baselines, 2026-11-24/25" in text
    assert "judged on a board that made the saves" in band_text(seen)


def test_old_saves_without_a_board_and_runs_without_a_uuid_add_the_between_board_spread():
    entry = history([0.0, 0.001, -0.0005], board="")
    assert stored_band(entry.to_ref("f", board=BOARD_A), 0.0).board_status == "unrecorded"
    known = history([0.0, 0.001], board=BOARD_A)
    unknown = stored_band(known.to_ref("f", board=""), 0.0)
    assert unknown.board_status == "unknown" and unknown.between_sigma > 0
    assert "whose UUID is unknown" in band_text(unknown)


def test_saves_on_several_boards_teach_the_between_board_spread():
    """Three boards whose levels differ by 2%: the file's estimate outweighs the figure's
    0.2% once it has two degrees of freedom; a run on one of them is centred on its own
    saves."""
    entry = None
    for board, level in ((BOARD_A, 0.0), (BOARD_B, 0.02), (BOARD_C, -0.02)):
        for y in (0.0, 0.0005, -0.0005):
            entry = save(entry, measurement(0.8 * math.exp(level + y), board=board))
    assert entry is not None
    spreads = entry.board_spreads()
    assert [s.board for s in spreads] == [BOARD_A, BOARD_B, BOARD_C]
    sd, df = between_spread(spreads)
    assert df == 2 and sd == pytest.approx(0.02, rel=0.05)
    within_sd, within_df = within_spread(spreads)
    assert within_df == 6 and within_sd == pytest.approx(0.0005, rel=0.01)
    unseen = stored_band(entry.to_ref("f", board="GPU-dddd"), 0.0)
    assert unseen.between_source == "file" and unseen.boards == 3
    assert unseen.between_sigma > between_board_spread("cuda", entry.time_s) / Z95
    on_b = entry.to_ref("f", board=BOARD_B)
    assert on_b.efficiency == pytest.approx(0.8 * math.exp(0.02), rel=1e-4)
    assert on_b.saves == 3 and on_b.board_status == "seen"


def test_board_fields_round_trip_and_old_files_keep_loading(tmp_path):
    entry = None
    for k in range(14):  # beyond the kept history: board_spread keeps what slid out
        entry = save(entry, measurement(0.8 * (1 + 0.001 * (k % 3 - 1))), history_length=4)
    entry = save(entry, measurement(0.79, fingerprint="sha256:other"), commit="c1")
    assert entry is not None and len(entry.replaced) == 1
    entry = save(entry, measurement(0.79), commit="c2")  # other code again
    store = BaselineStore(tmp_path)
    store.save("h100-sxm", [entry])
    loaded = BaselineStore(tmp_path).load("h100-sxm").get(*entry.key)
    assert loaded == entry
    text = (tmp_path / "h100-sxm.toml").read_text()
    assert "[[entry.replaced]]" in text and f'board = "{BOARD_A}"' in text
    assert 'host = "runner-1"' in text
    old = text.replace(f'board = "{BOARD_A}"\n', "").replace('host = "runner-1"\n', "")
    (tmp_path / "h100-sxm.toml").write_text(old)
    older = BaselineStore(tmp_path).load("h100-sxm").get(*entry.key)
    assert older is not None and all(s.board == "" for s in older.saves)


def test_a_board_spread_that_counts_fewer_saves_than_kept_is_refused(tmp_path):
    entry = history([0.0, 0.001, -0.001, 0.0005, 0.0], history_length=3)
    store = BaselineStore(tmp_path)
    store.save("h100-sxm", [entry])
    path = tmp_path / "h100-sxm.toml"
    text = path.read_text()
    assert "saves = 5" in text
    path.write_text(text.replace("saves = 5", "saves = 1"))
    with pytest.raises(Exception, match=r"board_spread #1: 'saves' must count at least the 3"):
        BaselineStore(tmp_path).load("h100-sxm")


# -- saves outweigh a guess -----------------------------------------------------------------


@pytest.mark.parametrize("time_s", [170e-6, 30e-6])
def test_saves_that_scatter_by_a_tenth_of_a_percent_set_their_own_allowance(time_s):
    """The CUDA prior is worth 8 df: after 10 saves that scatter by 0.1% the band is set by
    their own scatter (the prior holds under half of the weight) and the tolerance."""
    rng = np.random.default_rng(1)
    logs = list(rng.normal(0.0, 0.001, 10))
    entry = history(logs, time_s=time_s)
    band = stored_band(entry.to_ref("f", board=BOARD_A), 0.0)
    assert band.prior_df == prior_df_for("cuda") and band.history_df == 9
    assert band.prior_df / band.df <= 0.5
    assert max(DEFAULT_TOLERANCE, band.noise) == DEFAULT_TOLERANCE


def test_three_saves_of_a_long_kernel_allow_at_most_one_and_a_half_percent():
    entry = history([0.0, 0.001, -0.001])
    check = check_baseline(
        measurement(0.8 * 0.975), entry.to_ref("f", board=BOARD_A), tolerance=0.01
    )
    assert check.allowance <= 0.015 and check.outcome == REGRESSED


def _pulled_in(rng, logs, sigma_before, board_logs):
    """A new save drawn around the board's mean of every earlier save, pulled in until it
    does not raise the spread estimate (k/(k+1) d^2 <= sigma^2 before)."""
    k = len(board_logs)
    mean = float(np.mean(board_logs))
    step = float(rng.normal(0.0, sigma_before * rng.uniform(0.1, 1.5)))
    limit = sigma_before * math.sqrt((k + 1) / k)
    if abs(step) > limit:
        step = math.copysign(limit * rng.uniform(0.0, 1.0), step)
    return mean + step


@pytest.mark.parametrize("history_length", [3, 5, 10])
def test_more_saves_never_loosen_the_band_of_a_sliding_history(history_length):
    """Seeded random histories of up to 16 saves, kept to `history_length` (so most slide):
    each save that does not raise the board's spread estimate leaves the band no wider, at
    random kernel times, cache modes and measured intervals."""
    rng = np.random.default_rng(28 + history_length)
    checked = 0
    for _ in range(150):
        time_s = float(np.exp(rng.uniform(np.log(3e-6), np.log(500e-6))))
        cache = str(rng.choice(["cold", "hot"]))
        measured = float(rng.choice([0.0, rng.uniform(0.0, 0.002)]))
        prior_sigma = prior_run_spread("cuda", time_s, cache) / Z95
        logs = [float(rng.normal(0.0, prior_sigma))]
        entry = save(None, measurement(0.8 * math.exp(logs[0]), time_s=time_s, cache=cache))
        band = stored_band(entry.to_ref("f", board=BOARD_A), measured)
        for _ in range(int(rng.integers(4, 16))):
            y = _pulled_in(rng, logs, band.sigma, logs)
            logs.append(y)
            m = measurement(0.8 * math.exp(y), time_s=time_s, cache=cache)
            entry = save(entry, m, history_length=history_length)
            after = stored_band(entry.to_ref("f", board=BOARD_A), measured)
            # the backend's figure is taken at the entry's kernel time, which a save moves:
            # a faster save raises it (launch jitter / time), by as much as time fell
            moved = max(1.0, after.prior_sigma / band.prior_sigma)
            assert after.noise <= band.noise * moved * (1 + 1e-6), (len(logs), logs, band, after)
            assert len(entry.saves) <= history_length
            band = after
            checked += 1
    assert checked > 150 * 4


def test_without_the_pull_a_sliding_history_can_loosen():
    """The property is about the rule: a save far from the others does widen the band."""
    entry = history([0.0, 0.0005, -0.0005, 0.0], history_length=3)
    before = stored_band(entry.to_ref("f", board=BOARD_A), 0.0)
    entry = save(entry, measurement(0.8 * math.exp(0.02)), history_length=3)
    assert stored_band(entry.to_ref("f", board=BOARD_A), 0.0).noise > before.noise


def test_a_history_that_slides_keeps_every_save_of_its_board():
    entry = history([0.001 * (k % 3 - 1) for k in range(12)], history_length=4)
    assert len(entry.saves) == 4
    (spread,) = entry.board_spreads()
    assert spread.board == BOARD_A and spread.saves == 12
    assert entry.to_ref("f", board=BOARD_A).history_df == 11


# -- drift across saves ---------------------------------------------------------------------


def _level(efficiency: float, commit: str, saves: int = 3, spread: float = 0.003) -> TrailPoint:
    return TrailPoint(efficiency, spread, saves, commit, f"2026-11-2{commit[-1]}T00:00:00Z")


def test_a_drift_of_small_steps_is_found_with_its_commits():
    """-0.8% per re-save, each within its allowance: after five, -3.9% from the first."""
    trail = [_level(0.8 * 0.992**k, f"c{k}") for k in range(5)]
    current = _level(0.8 * 0.992**5, "c5")
    drift = detect_drift(trail, current, tolerance=0.01)
    assert drift is not None and drift.gradual
    assert drift.since_commit == "c0" and [s.commit for s in drift.steps][-1] == "c5"
    assert drift.change == pytest.approx(0.992**5 - 1)
    assert drift.largest_step == pytest.approx(-0.008)
    assert drift.change < -drift.allowance and drift.allowance >= 0.01


def test_a_steady_trail_and_a_noisy_one_report_nothing():
    steady = [_level(0.8 * (1 + 0.002 * (k % 2)), f"c{k}") for k in range(6)]
    assert detect_drift(steady, _level(0.8, "c6"), tolerance=0.01) is None
    noisy = [_level(0.8 * 0.992**k, f"c{k}", saves=1, spread=0.07) for k in range(5)]
    assert detect_drift(noisy, _level(0.8 * 0.992**5, "c5", 1, 0.07), tolerance=0.01) is None
    assert detect_drift([], _level(0.8, "c"), tolerance=0.01) is None


def test_one_accepted_step_is_not_gradual():
    trail = [_level(0.8, "c0"), _level(0.8, "c1")]
    drift = detect_drift(trail, _level(0.76, "c2"), tolerance=0.01)
    assert drift is not None and not drift.gradual and drift.largest_step == pytest.approx(-0.05)


def test_re_saves_of_changed_code_build_the_trail_and_the_check_reports_the_drift():
    entry = None
    for k in range(6):
        for y in (0.0, 0.0004, -0.0004):
            m = measurement(0.8 * 0.992**k * math.exp(y), fingerprint=f"sha256:v{k}")
            entry = save(entry, m, commit=f"commit{k}")
    assert entry is not None and [r.commit for r in entry.replaced] == [
        f"commit{k}" for k in range(5)
    ]
    ref = entry.to_ref("f", board=BOARD_A)
    check = check_baseline(measurement(ref.efficiency), ref, tolerance=0.01)
    assert check.outcome != REGRESSED and check.drift is not None
    assert check.drift.since_commit == "commit0" and check.drift.gradual
    strict = check_baseline(measurement(ref.efficiency), ref, tolerance=0.01, strict=True)
    from pytest_gpuperf.gate.decide import decide

    verdict = decide(baseline=strict)
    assert verdict.failed_checks == ("drift",)
    trail = replace(entry, replaced=entry.replaced[:1])
    assert check_baseline(measurement(ref.efficiency), trail.to_ref("f"), tolerance=0.01).drift


def test_the_trail_keeps_its_last_baselines():
    from pytest_gpuperf.gate.policy import TRAIL_LENGTH

    entry = None
    for k in range(TRAIL_LENGTH + 4):
        entry = save(entry, measurement(0.8, fingerprint=f"sha256:v{k}"), commit=f"c{k}")
    assert entry is not None and len(entry.replaced) == TRAIL_LENGTH
    assert entry.replaced[-1].commit == f"c{TRAIL_LENGTH + 2}"


def test_levels_saved_on_other_boards_differ_by_the_boards_too():
    """The same -3.9% across five re-saves: a drift when one board saved every level, noise
    when each level came from another board whose levels differ by +-2% (sigma 1%)."""
    one = [replace(_level(0.8 * 0.992**k, f"c{k}"), board=BOARD_A) for k in range(5)]
    now = replace(_level(0.8 * 0.992**5, "c5"), board=BOARD_A)
    assert detect_drift(one, now, tolerance=0.01, between_sigma=0.01) is not None
    boards = [replace(level, board=f"GPU-{k}") for k, level in enumerate(one)]
    assert detect_drift(boards, now, tolerance=0.01, between_sigma=0.01) is None
