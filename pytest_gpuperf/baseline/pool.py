"""What a baseline file knows about run-to-run spread beyond one entry: its other entries'
histories, pooled.

Three saves say little about a spread on their own (Student's t with 2 degrees of freedom is
6.96 at 99%), but a file holds many entries saved by the same runs on the same device, and
kernels of similar length scatter alike between runs. Each entry's prior is therefore learned
from the file, an empirical-Bayes estimate in the manner of limma's moderated variances
(Smyth, "Linear models and empirical Bayes methods for assessing differential expression in
microarray experiments", Stat. Appl. Genet. Mol. Biol. 3(1), 2004):

- the pool of an entry: the file's OTHER measured entries whose noise is comparable: the
  same cache mode, saves on a board this entry's saves were made on (boards differ in their
  noise; entries that record no board pool with each other), >= 2 saves, and a kernel time
  within POOL_TIME_FACTOR of the entry's where the file's shape is learned (below), within
  UNSHAPED_TIME_FACTOR where it is not (short kernels scatter more: a launch's jitter is a
  larger share of them; on the project's H100 a 7.3 us cold kernel scattered by 1.3% between
  processes, a 38 us one by 0.26%, a 189 us one by 0.08%, 2026-11-27);
- each pooled variance is carried to the entry's time the conservative way: a longer kernel's
  variance is scaled by (its time / this time)^2, as if all of it were absolute jitter; a
  shorter kernel's is kept, as if all of it were relative (either way the result is never
  below the truth when the variance is relative noise plus absolute jitter);
- the pooled variance is the degrees-of-freedom-weighted mean of those variances, with the
  sum of their degrees of freedom. (limma also estimates how much the entries' true spreads
  differ, from the scatter of their log variances; with tens of entries of 2-4 degrees of
  freedom that estimate is mostly sampling noise, so an entry that scatters more than its
  neighbours is recognised from its own saves instead: gate/noise.py refuses the pool then.)

The entry's own saves are left out of its own prior (they enter once, in gate/noise.py), so a
prior never moves when only its entry is saved again. Kept free of the gate: this module
only summarises the file; what the gate makes of it is gate/noise.py's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from pytest_gpuperf.baseline.model import BaselineEntry, Pooled, log_spread

# An entry pools the histories of the entries whose kernel time is within this factor of its
# own. 4: wide enough that the project's perf suite (kernels of 4.5, 8, 22-37 and 129-145 us)
# gives every entry neighbours (with a factor of 2 its 8 us and 145 us entries found too few),
# narrow enough that an error in the carried shape stays small.
POOL_TIME_FACTOR = 4.0
# Without a learned shape a neighbour's variance is carried the conservative way, which for a
# shorter kernel keeps all of its jitter: within a factor of 2 that overstates it at most 4x
# in variance, and the gate still sets a pooled band aside when it is the wider one. 4 let a
# 7.8 us entry double the band of a 28 us one (issue: the 4th save of steady code).
UNSHAPED_TIME_FACTOR = 2.0
Z_95 = 1.959963984540054
Key = tuple[str, str, str]


class _Mode:
    """The poolable entries of one cache mode, as arrays, with the shape's sums over them."""

    def __init__(self, rows: list[tuple[Key, float, int, float, frozenset[str]]]) -> None:
        import numpy as np

        self.index = {row[0]: i for i, row in enumerate(rows)}
        self.time_s = np.array([r[1] for r in rows])
        self.df = np.array([r[2] for r in rows], dtype=float)
        self.variance = np.array([r[3] for r in rows])
        self.boards = [r[4] for r in rows]
        grid = np.array(_JITTER_GRID)[:, None]
        self.g = 1.0 + (grid / self.time_s[None, :]) ** 2  # (grid, entries)
        self.scaled = self.df * self.variance / self.g  # per-entry terms of the likelihood
        self.logs = self.df * np.log(self.g)
        self.scaled_total, self.logs_total = self.scaled.sum(axis=1), self.logs.sum(axis=1)
        self.ordered = np.sort(self.time_s)


class FilePool:
    """The entries of one file that can lend their spread, summarised once per loaded file
    (arrays per cache mode, so a lookup costs one pass over them, not a Python loop)."""

    def __init__(self, entries: Iterable[BaselineEntry]) -> None:
        by_mode: dict[str, list[tuple[Key, float, int, float, frozenset[str]]]] = {}
        for entry in entries:
            sd, df = log_spread(entry)
            if df < 1 or entry.time_s <= 0:
                continue
            row = (entry.key, entry.time_s, df, sd * sd, boards_of(entry))
            by_mode.setdefault(entry.cache, []).append(row)
        self._modes = {cache: _Mode(rows) for cache, rows in by_mode.items()}

    def __len__(self) -> int:
        return sum(len(mode.index) for mode in self._modes.values())

    def for_entry(
        self, key: Key, cache: str, time_s: float, boards: frozenset[str] | None = None
    ) -> Pooled:
        """The prior the file lends to the entry `key` (its own history left out) from the
        entries of comparable noise: the cache mode, the kernel time (module docstring) and
        a board in common with `boards` (the boards of the entry's saves; None: those the
        file records for `key`, or any board where it has no history yet)."""
        import numpy as np

        mode = self._modes.get(cache)
        if mode is None or time_s <= 0:
            return Pooled()
        own = mode.index.get(key)
        if boards is None:
            boards = mode.boards[own] if own is not None else None
        jitter_s = self.shape(key, cache)
        factor = POOL_TIME_FACTOR if jitter_s is not None else UNSHAPED_TIME_FACTOR
        chosen = (mode.time_s >= time_s / factor) & (mode.time_s <= time_s * factor)
        if boards is not None:
            chosen &= np.array([_same_boards(boards, theirs) for theirs in mode.boards])
        if own is not None:
            chosen[own] = False
        if not chosen.any():
            return Pooled()
        times = mode.time_s[chosen]
        if jitter_s is None:  # no shape to learn: the conservative bound
            scales = np.maximum(1.0, (times / time_s) ** 2)
        else:
            scales = (1.0 + (jitter_s / time_s) ** 2) / (1.0 + (jitter_s / times) ** 2)
        df = mode.df[chosen]
        variance = float(np.sum(df * mode.variance[chosen] * scales) / np.sum(df))
        return Pooled(Z_95 * math.sqrt(variance), float(np.sum(df)), int(chosen.sum()))

    def shape(self, key: Key, cache: str) -> float | None:
        """The file's jitter time r of sigma(t)^2 = s^2 (1 + (r / t)^2), by maximum likelihood
        over the other entries of the cache mode (each sample variance a scaled chi-square),
        on a grid from pure relative noise (r = 0) to pure launch jitter; None when they are
        fewer than 3 or do not span a factor of 2 in time, where no shape can be learned."""
        import numpy as np

        mode = self._modes.get(cache)
        if mode is None:
            return None
        own = mode.index.get(key)
        times = mode.ordered
        if own is not None:
            times = np.delete(times, int(np.searchsorted(times, mode.time_s[own])))
        if len(times) < 3 or times[-1] < 2 * times[0]:
            return None
        scaled, logs, total_df = mode.scaled_total, mode.logs_total, mode.df.sum()
        if own is not None:
            scaled = scaled - mode.scaled[:, own]
            logs = logs - mode.logs[:, own]
            total_df -= mode.df[own]
        if np.any(scaled <= 0):
            return None
        likelihood = -0.5 * total_df * np.log(scaled / total_df) - 0.5 * logs
        return float(_JITTER_GRID[int(np.argmax(likelihood))])


def boards_of(entry: BaselineEntry) -> frozenset[str]:
    """The boards an entry's saves of its code were made on ("" for saves that record none)."""
    return frozenset(spread.board for spread in entry.board_spreads())


def _same_boards(mine: frozenset[str], theirs: frozenset[str]) -> bool:
    """Comparable noise by board: a board in common, or neither side recording one."""
    return bool(mine & theirs) or (mine <= {""} and theirs <= {""})


# Jitter times for the shape's grid: 0 (all relative), then 10 ns to 10 ms, 8 per decade.
_JITTER_GRID = (0.0, *(10.0 ** (-8 + i / 8) for i in range(49)))
