"""The decision a measurement serves, told to the engine before it samples (`StopTarget`).

The gate decides once the measurement is taken, but where its verdict will change is known
before: a stored baseline's allowance (the band noise explains, or the tolerance) sets the
kernel times at which the efficiency reads REGRESSED or IMPROVED, and a floor sets one at
which it is met. `stop_target_for` turns those into the engine's `StopTarget`
(engine/sequential.py), so a measurement far inside its band stops as soon as its own level
is known well enough, and one near an edge samples on up to the horizon.

The edges are computed as the gate will judge, and never wider: the band at this run's
level for ONE measurement of the test (a test of several measurements is judged at a level
split among them, which only widens its band) and without this run's own interval (which
also only widens it). A narrower band puts the edge nearer the centre, so the rule samples
longer, never shorter, than the final verdict needs. The regressed edge may only be crossed
at the horizon (`Edge.slow_early` False): a REGRESSED verdict is reached as with a fixed
sampling time, and the promised false-alarm rate is held.
"""

from __future__ import annotations

from pytest_gpuperf.baseline.ref import BaselineRef
from pytest_gpuperf.engine.sequential import FLOOR, PRECISION, STORED, Edge, StopTarget
from pytest_gpuperf.gate.noise import stored_band

# The floor's confidence sequence: the floor check reads a 95% interval (gate/floor.py).
FLOOR_ALPHA = 0.05


def stored_edges(
    ref: BaselineRef,
    *,
    bytes_moved: int,
    peak_bps: float,
    tolerance: float,
    false_alarm_rate: float,
    simulated_board_spread: float = 0.0,
) -> tuple[Edge, ...]:
    """The kernel times (per launch) at which a measurement of `bytes_moved` reads REGRESSED
    (slower) and IMPROVED (faster) against `ref`: allowance = max(tolerance, the band),
    delta = efficiency / ref.efficiency - 1, as gate/stored.py judges. () when the band cannot
    be made (the judge then says why) or the allowance is not below 100%."""
    try:
        band = stored_band(
            ref,
            0.0,
            false_alarm_rate=false_alarm_rate,
            simulated_board_spread=simulated_board_spread,
        )
    except ValueError:
        return ()
    allowance = max(tolerance, band.noise)
    if not (0.0 < allowance < 1.0) or ref.efficiency <= 0 or peak_bps <= 0:
        return ()
    centre_s = bytes_moved / (peak_bps * ref.efficiency)
    return (
        Edge(centre_s / (1.0 - allowance), slow_early=False, what="regressed"),
        Edge(centre_s / (1.0 + allowance), slow_early=True, what="improved"),
    )


def floor_edge(floor: float, *, bytes_moved: int, peak_bps: float) -> Edge:
    """The kernel time at which the efficiency meets `floor` (a fraction of the peak)."""
    return Edge(bytes_moved / (peak_bps * floor), slow_early=True, what="floor")


def stop_target_for(
    ref: BaselineRef | None,
    *,
    bytes_moved: int,
    peak_bps: float,
    tolerance: float,
    false_alarm_rate: float,
    horizon_s: float,
    max_samples: int,
    floor: float | None = None,
    simulated_board_spread: float = 0.0,
    wander_s: float = 0.0,
    horizon_samples: int = 0,
) -> StopTarget:
    """The target of a measurement judged against `ref` (None: no stored baseline gates it)
    and `floor` (None: none): STORED with the baseline's edges (and the floor's) at the
    gate's `false_alarm_rate`, up to `horizon_s` and `max_samples`, allowing for a process's
    level to wander by `wander_s` (policy.process_wander_s) before the horizon, which stops
    it only with `horizon_samples` samples or more; FLOOR with
    the floor's edge alone, up to the budget; else PRECISION (the precision rule alone)."""
    edges: tuple[Edge, ...] = ()
    if ref is not None:
        edges = stored_edges(
            ref,
            bytes_moved=bytes_moved,
            peak_bps=peak_bps,
            tolerance=tolerance,
            false_alarm_rate=false_alarm_rate,
            simulated_board_spread=simulated_board_spread,
        )
    floors: tuple[Edge, ...] = ()
    if floor is not None and floor > 0 and peak_bps > 0:
        floors = (floor_edge(floor, bytes_moved=bytes_moved, peak_bps=peak_bps),)
    if edges:
        return StopTarget(
            STORED,
            edges + floors,
            alpha=min(false_alarm_rate, FLOOR_ALPHA),
            horizon_s=horizon_s,
            max_samples=max_samples,
            wander_s=wander_s,
            horizon_samples=horizon_samples,
        )
    if floors:
        return StopTarget(FLOOR, floors, alpha=FLOOR_ALPHA)
    return StopTarget(PRECISION)
