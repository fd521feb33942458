"""The level the gate holds a stored entry to, as the history command and the dashboard show
it (record/history_model.py `EntryLevel`): the gate's own band (gate/noise.py `stored_band`)
and drift (gate/drift.py `drift_of`), computed here once for both views."""

from __future__ import annotations

from dataclasses import replace

from pytest_gpuperf.baseline.model import BOARD_UNSEEN
from pytest_gpuperf.baseline.ref import BaselineRef
from pytest_gpuperf.gate.drift import drift_of
from pytest_gpuperf.gate.noise import stored_band
from pytest_gpuperf.record.history_model import EntryLevel


def entry_level(ref: BaselineRef, *, false_alarm_rate: float, tolerance: float) -> EntryLevel:
    """`ref` (the entry as BaselineStore.lookup lends it its file's spread) with the band of a
    run whose own interval is narrower than the spread, as a run that sampled to its target
    is; the simulated boards' spread where the entry is the simulated device's."""
    from pytest_gpuperf.simulate.device_model import DEFAULT_GPU_SPREAD

    band = stored_band(
        ref, 0.0, false_alarm_rate=false_alarm_rate, simulated_board_spread=DEFAULT_GPU_SPREAD
    )
    unseen_band = None
    drift = None
    if ref.source == "measured":
        unseen = replace(ref, board_status=BOARD_UNSEEN, boards=max(ref.boards, 1))
        unseen_band = stored_band(
            unseen,
            0.0,
            false_alarm_rate=false_alarm_rate,
            simulated_board_spread=DEFAULT_GPU_SPREAD,
        )
        drift = drift_of(
            ref,
            tolerance=tolerance,
            false_alarm_rate=false_alarm_rate,
            simulated_board_spread=DEFAULT_GPU_SPREAD,
        )
    return EntryLevel(
        expected=ref.efficiency,
        allowance=max(tolerance, band.noise),
        band=band,
        false_alarm_rate=false_alarm_rate,
        tolerance=tolerance,
        drift=drift,
        trail=ref.trail,
        unseen_band=unseen_band,
        unseen_allowance=max(tolerance, unseen_band.noise) if unseen_band else 0.0,
    )
