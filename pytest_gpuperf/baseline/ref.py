"""What a check sees of one stored baseline entry: its level, spread and saves, the boards
they were made on, and the trail of baselines it replaced.

`baseline/model.py` makes a `BaselineRef` from an entry of a TOML file; the gate's stored check
and drift (gate/stored.py, gate/drift.py) judge against it, and the verdict carries it
(record/checks.py's `BaselineCheck.baseline`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TrailPoint:
    """One level in an entry's trail: a baseline it replaced (or, last, the entry itself):
    the centre of its saves, their spread (+-95%), how many, and its latest save's commit."""

    efficiency: float
    run_spread: float
    saves: int
    commit: str = ""
    when: str = ""
    board: str = ""  # the board of its latest save ("" unrecorded)


@dataclass(frozen=True)
class BaselineRef:
    """The stored baseline a measurement was compared with (a view of one TOML entry).

    `saves` is how many measured saves of the same code its expected value and spread come
    from; `spread_basis` says whether `run_spread` was learned from them ("history") or is the
    backend's prior for a first save ("prior").
    """

    efficiency: float
    efficiency_ci: tuple[float, float]
    run_spread: float  # relative run-to-run spread, a +-range at ~95% (0.07 is +-7%)
    bandwidth_bps: float
    time_s: float
    cache: str
    source: str  # "measured" | "reported"
    provenance: str  # one line: when, commit, device, or the document it was reported in
    path: str
    device_key: str = ""
    saves: int = 1
    spread_basis: str = "prior"
    fingerprint: str = ""
    prior_spread: float = 0.0  # the backend's prior for this entry (0: unknown)
    # The spread of the saves' log efficiencies (a sample standard deviation, 0 below 2 saves)
    # and the backend that measured them (it sets how much the backend's prior is worth).
    history_sd: float = 0.0
    backend: str = ""
    # The file's pooled spread at this entry's kernel time: the other entries of the same file
    # and cache mode whose histories hold >= 2 saves (baseline/pool.py); a +-95% range, its
    # degrees of freedom and how many entries it pools (0: nothing to pool).
    pooled_spread: float = 0.0
    pooled_df: float = 0.0
    pooled_entries: int = 0
    # The degrees of freedom of history_sd (None: saves - 1, as before boards were recorded;
    # with boards it is the sum over boards of their saves - 1).
    history_df: int | None = None
    # The run's board (GPU UUID, "" unknown) and how it relates to the boards the saves were
    # made on (baseline.model.BOARD_*: "seen", "unseen", "unrecorded", "unknown"; "" for a
    # reported entry); how many boards made saves; and the spread between their levels
    # learned from them (a standard deviation of log efficiency, with its degrees of freedom;
    # 0 below two boards).
    board: str = ""
    board_status: str = ""
    boards: int = 0
    between_sd: float = 0.0
    between_df: int = 0
    # The baselines the entry replaced, oldest first (its trail; the entry itself not in it),
    # and the commit and time of the entry's latest save.
    trail: tuple[TrailPoint, ...] = ()
    commit: str = ""
    when: str = ""
    latest_board: str = ""
