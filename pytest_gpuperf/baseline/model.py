"""What a baseline file holds: entries, each with the history of saves it was learned from.

An entry is one measurement (test id, measurement name, cache mode) on one device. A measured
entry keeps its last saves of the same code (`SaveRecord`s, newest last); its expected
efficiency is their median and its run-to-run spread is learned from them once there are
enough (gate/saving.py decides both). A reported entry holds a published figure instead
(`reported_in` names the document).
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from pytest_gpuperf.baseline.ref import BaselineRef, TrailPoint

SOURCES = ("measured", "reported")
SPREAD_BASES = ("prior", "history")
# Numbers are stored to this many significant digits: relative precision, so a kernel moving
# a few bytes keeps its efficiency (5 decimals once turned 1.2e-6 into 0.0).
SIGNIFICANT_DIGITS = 6


@dataclass(frozen=True)
class SaveRecord:
    """One `--gpuperf-save` of an entry: what it measured, when, on what, from which code.

    `fingerprint` identifies the kernel's code object; a save of different code starts a new
    history rather than widening the spread of the old one.
    """

    efficiency: float
    efficiency_ci: tuple[float, float]
    time_s: float
    when: str = ""  # ISO 8601, UTC
    commit: str = ""  # '<sha>' or '<sha>-dirty'
    fingerprint: str = ""
    samples: int = 0
    device_name: str = ""
    backend: str = ""
    simulated: bool = False
    runtime_version: str = ""
    driver_version: str = ""
    plugin_version: str = ""
    note: str = ""
    board: str = ""  # the GPU's UUID ("" in files written before boards were recorded)
    host: str = ""

    @property
    def relative_ci(self) -> float:
        low, high = self.efficiency_ci
        return (high - low) / 2.0 / self.efficiency

    def describe(self) -> str:
        """One line for messages: who measured it, when, on what."""
        head = "simulated" if self.simulated else "measured"
        if self.when:
            head += f" {self.when}"
        if self.device_name:
            head += f" on {self.device_name}"
        if self.board:
            head += f" {self.board}"
        if self.host:
            head += f" at {self.host}"
        versions = [
            self.backend,
            self.runtime_version and f"runtime {self.runtime_version}",
            self.driver_version and f"driver {self.driver_version}",
        ]
        if any(versions):
            head += f" ({', '.join(v for v in versions if v)})"
        parts = [
            head,
            self.commit and f"commit {self.commit[:12]}",
            self.samples and f"{self.samples} samples",
            self.plugin_version and f"pytest-gpuperf {self.plugin_version}",
            self.note,
        ]
        return ", ".join(str(p) for p in parts if p)


@dataclass(frozen=True)
class BaselineEntry:
    """One stored baseline: the expected efficiency of a measurement on one device."""

    test_id: str
    name: str
    cache: str
    efficiency: float
    efficiency_ci: tuple[float, float]
    run_spread: float  # relative run-to-run spread (+-95%): 0.07 is +-7% between runs
    bandwidth_bps: float
    time_s: float
    bytes_moved: int
    source: str = "measured"
    spread_basis: str = "prior"  # "history": learned from `saves`; "prior": a default
    kernel: str = ""
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    saves: tuple[SaveRecord, ...] = ()
    prior_spread: float = 0.0  # what a first save would record here (0: unknown)
    reported_in: str = ""  # the document and figure of a reported entry
    note: str = ""
    # Every save of this code per board, including those that slid out of `saves` (so a
    # sliding history keeps its spread); empty in older files: derived from `saves` then.
    boards: tuple[BoardSpread, ...] = ()
    # The baselines this entry replaced when a save of other code started a new history,
    # oldest first (gate/drift.py reads a drift across code versions from them).
    replaced: tuple[Replaced, ...] = ()

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.test_id, self.name, self.cache)

    @property
    def latest(self) -> SaveRecord | None:
        return self.saves[-1] if self.saves else None

    def describe(self) -> str:
        """Where the number comes from, in one line."""
        if self.source == "reported":
            text = f"reported in {self.reported_in}"
            return f"{text} ({self.note})" if self.note else text
        latest = self.latest
        text = latest.describe() if latest else "measured"
        if len(self.saves) > 1:
            text += f"; median of {len(self.saves)} saves of this code"
        return text

    def board_spreads(self) -> tuple[BoardSpread, ...]:
        """Every save of this code per board: as stored, or (older files) from `saves`."""
        if self.source != "measured":
            return ()
        return self.boards or spreads_of(self.saves)

    def to_ref(
        self,
        path: str | os.PathLike[str],
        device_key: str = "",
        pooled: Pooled | None = None,
        *,
        board: str | None = None,
    ) -> BaselineRef:
        """The view the gate works with; `pooled` is what the rest of its file lends it
        (baseline/pool.py). `board` is the GPU UUID of the run to judge ("" unknown; None: a
        view of the entry alone, as on the board that made its latest save)."""
        latest = self.latest
        pooled = pooled or Pooled()
        spreads = self.board_spreads()
        within_sd, within_df = within_spread(spreads)
        between_sd, between_df = between_spread(spreads)
        known = {s.board for s in spreads if s.board}
        efficiency, centre_saves = self.efficiency, max(len(self.saves), 1)
        if self.source != "measured" or board is None:
            status, board = "", board or ""
        elif not known:
            status = BOARD_UNRECORDED
        elif not board:
            status = BOARD_UNKNOWN
        elif board in known:
            status = BOARD_SEEN
            own = [s.efficiency for s in self.saves if s.board == board]
            if len(known) > 1 and own:
                efficiency, centre_saves = statistics.median(own), len(own)
        else:
            status = BOARD_UNSEEN
        return BaselineRef(
            efficiency=efficiency,
            efficiency_ci=self.efficiency_ci,
            run_spread=self.run_spread,
            bandwidth_bps=self.bandwidth_bps,
            time_s=self.time_s,
            cache=self.cache,
            source=self.source,
            provenance=self.describe(),
            path=str(path),
            device_key=device_key,
            saves=centre_saves,
            spread_basis=self.spread_basis,
            fingerprint=latest.fingerprint if latest else "",
            prior_spread=self.prior_spread,
            history_sd=within_sd,
            history_df=within_df,
            backend=latest.backend if latest else "",
            pooled_spread=pooled.spread,
            pooled_df=pooled.df,
            pooled_entries=pooled.entries,
            board=board,
            board_status=status,
            boards=len(known),
            between_sd=between_sd,
            between_df=between_df,
            trail=tuple(
                TrailPoint(r.efficiency, r.run_spread, r.saves, r.commit, r.when, r.board)
                for r in self.replaced
            ),
            commit=latest.commit if latest else "",
            when=latest.when if latest else "",
            latest_board=latest.board if latest else "",
        )


# How the run's board relates to the boards an entry's saves were made on (BaselineRef).
BOARD_SEEN = "seen"  # the run's board made saves of this entry: run-to-run spread only
BOARD_UNSEEN = "unseen"  # another board of the model: the between-board spread is added
BOARD_UNRECORDED = "unrecorded"  # the saves do not say their board (older files): added
BOARD_UNKNOWN = "unknown"  # the run's board is unknown (no UUID): added


@dataclass(frozen=True)
class BoardSpread:
    """Every save of an entry's current code on one board, summarised: how many, the mean of
    their log efficiencies and the sum of squared deviations from it (Welford's terms, so a
    save that slides out of the kept history still counts towards the spread)."""

    board: str
    saves: int
    mean_log: float
    squares: float = 0.0

    def add(self, log_efficiency: float) -> BoardSpread:
        n = self.saves + 1
        delta = log_efficiency - self.mean_log
        mean = self.mean_log + delta / n
        return BoardSpread(self.board, n, mean, self.squares + delta * (log_efficiency - mean))


@dataclass(frozen=True)
class Replaced:
    """A baseline an entry replaced: its efficiency (the centre of its saves), their spread
    (+-95%), how many saves, and the commit and time of its latest save."""

    efficiency: float
    run_spread: float
    saves: int
    commit: str = ""
    when: str = ""
    board: str = ""


def spreads_of(saves: Sequence[SaveRecord]) -> tuple[BoardSpread, ...]:
    """`saves` summarised per board ("" for saves that do not say), in order of appearance."""
    by_board: dict[str, BoardSpread] = {}
    for save in saves:
        current = by_board.get(save.board, BoardSpread(save.board, 0, 0.0))
        by_board[save.board] = current.add(math.log(save.efficiency))
    return tuple(by_board.values())


def within_spread(spreads: Sequence[BoardSpread]) -> tuple[float, int]:
    """(the pooled standard deviation of log efficiency between saves on one board, its
    degrees of freedom): sum of squares over sum of (saves - 1) over the boards."""
    df = sum(s.saves - 1 for s in spreads if s.saves > 0)
    if df < 1:
        return 0.0, 0
    return math.sqrt(max(sum(s.squares for s in spreads), 0.0) / df), df


def between_spread(spreads: Sequence[BoardSpread]) -> tuple[float, int]:
    """(the standard deviation of the boards' levels, its degrees of freedom) from saves on
    two or more recorded boards: the one-way random-effects estimate
    max(0, (MS_between - MS_within) / n0) (n0 the effective saves per board), or (0, 0)."""
    boards = [s for s in spreads if s.board and s.saves > 0]
    if len(boards) < 2:
        return 0.0, 0
    total = sum(s.saves for s in boards)
    grand = sum(s.saves * s.mean_log for s in boards) / total
    ms_between = sum(s.saves * (s.mean_log - grand) ** 2 for s in boards) / (len(boards) - 1)
    within_sd, within_df = within_spread(boards)
    n0 = (total - sum(s.saves**2 for s in boards) / total) / (len(boards) - 1)
    variance = (ms_between - (within_sd**2 if within_df else 0.0)) / n0
    return math.sqrt(max(variance, 0.0)), len(boards) - 1


@dataclass(frozen=True)
class Pooled:
    """The file's pooled spread at one kernel time: a +-95% range in log efficiency, its
    degrees of freedom, and how many entries it pools (baseline/pool.py pools it; an entry
    turns it into its `BaselineRef`, so it lives beside the entry)."""

    spread: float = 0.0
    df: float = 0.0
    entries: int = 0


def log_spread(entry: BaselineEntry) -> tuple[float, int]:
    """(the standard deviation of the saves' log efficiencies between saves on one board,
    its degrees of freedom): every save of the code, per board (BoardSpread)."""
    return within_spread(entry.board_spreads())


def utc_now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def significant(value: float, digits: int = SIGNIFICANT_DIGITS) -> float:
    """`value` to `digits` significant digits (relative precision at any magnitude)."""
    return float(f"{value:.{digits}g}")
