"""What `--gpuperf-save` records: an entry that keeps a short history of saves of the same code.

Each save appends a `SaveRecord` to the entry's history (the last `history_length` are kept).
The expected efficiency is the median of the history and, once it holds MIN_HISTORY saves, the
run-to-run spread is learned from them, so it can shrink as well as grow; before that the
backend's prior stands (policy.prior_run_spread). The simulated device's spread is its own
setting, known exactly: its entries keep it, as the gate does. A save of DIFFERENT code
(another code-object fingerprint, other declared bytes or launch shape) starts a new history:
repeated saves of an edited kernel must not widen the spread of the old one (that once let a
26% drop pass).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from pytest_gpuperf.baseline.model import (
    BaselineEntry,
    BoardSpread,
    Replaced,
    SaveRecord,
    significant,
    spreads_of,
    utc_now,
    within_spread,
)
from pytest_gpuperf.engine.distributions import norm_ppf
from pytest_gpuperf.engine.results import Measurement
from pytest_gpuperf.gate.policy import (
    HISTORY_LENGTH,
    MIN_HISTORY,
    TRAIL_LENGTH,
    Z_95,
    prior_df_for,
)
from pytest_gpuperf.record.checks import FloorCheck
from pytest_gpuperf.record.verdict import FAIL, SaveAction, Verdict


@dataclass(frozen=True)
class SaveContext:
    """What a save records besides the measurement: where, from which commit, with what."""

    test_id: str
    path: str
    device_key: str
    commit: str = ""  # '<sha>' or '<sha>-dirty'
    runtime_version: str = ""
    driver_version: str = ""
    prior_spread: float = 0.07
    history_length: int = HISTORY_LENGTH
    when: str = ""
    board: str = ""  # the GPU's UUID
    host: str = ""


def plan_save(
    measurement: Measurement,
    previous: BaselineEntry | None,
    context: SaveContext,
    *,
    floor: FloorCheck | None = None,
    unjudged: bool = False,
    beyond_peak: bool = False,
) -> tuple[SaveAction, BaselineEntry | None]:
    """The save action for `measurement` and the entry to write (None when not saved).

    Nothing is saved when the floor check failed, the test itself failed (`unjudged`) or the
    efficiency is beyond what the device can do (`beyond_peak`, gate/peak.py): a baseline
    must never record a kernel that misses its floor, gives wrong results or declares bytes
    it does not move.
    """
    where: dict[str, Any] = {"path": context.path, "device_key": context.device_key}
    if unjudged:
        return SaveAction(saved=False, why_not="unjudged", **where), None
    if beyond_peak:
        return SaveAction(saved=False, why_not="beyond-peak", **where), None
    if floor is not None and floor.status == FAIL:
        return SaveAction(saved=False, why_not="floor", **where), None
    from pytest_gpuperf.record.meta import VERSION as __version__

    low, high = measurement.efficiency_ci
    record = SaveRecord(
        efficiency=significant(measurement.efficiency),
        efficiency_ci=(significant(low), significant(high)),
        time_s=significant(measurement.time_s),
        when=context.when or utc_now(),
        commit=context.commit,
        fingerprint=measurement.fingerprint,
        samples=len(measurement.samples_s),
        device_name=measurement.device_name,
        backend=measurement.backend,
        simulated=measurement.simulated,
        runtime_version=context.runtime_version,
        driver_version=context.driver_version,
        plugin_version=__version__,
        board=context.board,
        host=context.host,
    )
    continues = previous is not None and same_code(previous, measurement, record)
    kept = previous.saves if continues and previous is not None else ()
    history = (*kept, record)[-max(context.history_length, 1) :]
    boards = _add_to_boards(previous.board_spreads() if continues and previous else (), record)
    trail = replaced_trail(previous, continues)
    entry = entry_from_history(
        measurement, context.test_id, history, context.prior_spread, boards=boards, trail=trail
    )
    action = SaveAction(
        saved=True,
        previous_efficiency=previous.efficiency if previous is not None else None,
        history_saves=len(history),
        new_history=previous is not None and not continues,
        run_spread=entry.run_spread,
        spread_basis=entry.spread_basis,
        when=record.when,
        **where,
    )
    return action, entry


def not_written(verdict: Verdict, reason: str, why_not: str = "") -> Verdict:
    """The verdict of a measurement whose planned save did not reach the disk: it must say
    "not saved" and why (a row that still says "saved" after a refused write is a lie a
    reviewer would trust). A reason starting with "interrupted" is Ctrl-C's (or SIGTERM's);
    `why_not` names another cause ("invalid": the entry would not load back, "crashed": the
    xdist worker that held it died, "missing": not in the file when read back)."""
    action = verdict.save
    if action is None or not action.saved:
        return verdict
    why = why_not or ("interrupted" if reason.startswith("interrupted") else "write")
    return replace(verdict, save=replace(action, saved=False, why_not=why, error=reason))


def found_in(entry: BaselineEntry | None, action: SaveAction, measurement: Measurement) -> bool:
    """Whether the save `action` planned for `measurement` is in `entry` as read back from
    the file: a record of its history with the same time stamp and efficiency."""
    if entry is None or not action.when:
        return False
    efficiency = significant(measurement.efficiency)
    return any(s.when == action.when and s.efficiency == efficiency for s in entry.saves)


def same_code(previous: BaselineEntry, measurement: Measurement, record: SaveRecord) -> bool:
    """Whether a new save continues `previous`'s history: the same code measured the same way.

    The code is the same when the fingerprints match; without fingerprints (a callable) when
    both saves come from the same clean commit. A reported entry never continues.
    """
    last = previous.latest
    if previous.source != "measured" or last is None:
        return False
    if (previous.bytes_moved, previous.grid, previous.block) != (
        measurement.bytes_moved,
        measurement.grid,
        measurement.block,
    ):
        return False
    if last.fingerprint or record.fingerprint:
        return last.fingerprint == record.fingerprint
    clean = record.commit and not record.commit.endswith("-dirty")
    return bool(clean) and last.commit == record.commit


def _add_to_boards(boards: Sequence[BoardSpread], record: SaveRecord) -> tuple[BoardSpread, ...]:
    """The per-board summaries with `record` added to its board's."""
    updated = list(boards)
    for position, spread in enumerate(updated):
        if spread.board == record.board:
            updated[position] = spread.add(math.log(record.efficiency))
            return tuple(updated)
    return (*updated, BoardSpread(record.board, 0, 0.0).add(math.log(record.efficiency)))


def replaced_trail(previous: BaselineEntry | None, continues: bool) -> tuple[Replaced, ...]:
    """The trail of replaced baselines after this save: the previous entry's, plus the
    previous entry itself when this save starts a new history (the last TRAIL_LENGTH)."""
    if previous is None:
        return ()
    if continues or previous.source != "measured" or previous.latest is None:
        return previous.replaced
    latest = previous.latest
    gone = Replaced(
        efficiency=previous.efficiency,
        run_spread=previous.run_spread,
        saves=len(previous.saves),
        commit=latest.commit,
        when=latest.when,
        board=latest.board,
    )
    return (*previous.replaced, gone)[-TRAIL_LENGTH:]


def entry_from_history(
    measurement: Measurement,
    test_id: str,
    saves: Sequence[SaveRecord],
    prior_spread: float,
    *,
    boards: Sequence[BoardSpread] = (),
    trail: Sequence[Replaced] = (),
) -> BaselineEntry:
    """The entry for a history of saves: median efficiency, spread learned or prior."""
    centre = statistics.median(s.efficiency for s in saves)
    boards = tuple(boards) or spreads_of(saves)
    if math.isinf(prior_df_for(measurement.backend)):
        # the simulated device's spread is its own setting, known exactly: the gate judges by
        # it whatever the saves say, so the file says the same (one story: the table's
        # "prior", the file's spread_basis and the history CLI agree)
        run_spread, basis = round(prior_spread, 6), "prior"
    else:
        run_spread, basis = learned_spread(saves, prior_spread, boards=boards)
    lows = [s.efficiency_ci[0] for s in saves]
    highs = [s.efficiency_ci[1] for s in saves]
    bandwidth_bps = centre * measurement.peak_bps
    return BaselineEntry(
        test_id=test_id,
        name=measurement.name,
        cache=measurement.cache,
        efficiency=significant(centre),
        efficiency_ci=(significant(min(lows)), significant(max(highs))),
        run_spread=run_spread,
        bandwidth_bps=significant(bandwidth_bps),
        time_s=significant(measurement.bytes_moved / bandwidth_bps),
        bytes_moved=measurement.bytes_moved,
        source="measured",
        spread_basis=basis,
        prior_spread=significant(prior_spread, 4),
        kernel=measurement.kernel,
        grid=measurement.grid,
        block=measurement.block,
        saves=tuple(saves),
        boards=() if boards == spreads_of(saves) else boards,  # the saves say it all
        replaced=tuple(trail),
    )


def learned_spread(
    saves: Sequence[SaveRecord],
    prior_spread: float,
    *,
    confidence: float = 0.95,
    boards: Sequence[BoardSpread] = (),
) -> tuple[float, str]:
    """(run_spread as a +-95% range, "history" or "prior").

    With MIN_HISTORY saves or more on one board (every save of the code, `boards`): 1.96 x
    the standard deviation of their log efficiencies between saves on one board, but never
    less than their own intervals say each median was uncertain by (a history of
    near-identical numbers must not claim more precision than each run had).
    """
    scatter, df = within_spread(tuple(boards) or spreads_of(saves))
    if df + 1 < MIN_HISTORY:
        return round(prior_spread, 6), "prior"
    z_ci = Z_95 if confidence == 0.95 else _z(confidence)
    within = math.sqrt(statistics.fmean((s.relative_ci / z_ci) ** 2 for s in saves))
    return significant(Z_95 * max(scatter, within), 4), "history"


def _z(confidence: float) -> float:
    return norm_ppf(0.5 + confidence / 2.0)
