"""What a baseline file knows about run-to-run spread beyond one entry: its other entries'
histories, pooled.

Three saves say little about a spread on their own (Student's t with 2 degrees of freedom is
6.96 at 99%), but a file holds many entries saved by the same runs on the same device, and
kernels of similar length scatter alike between runs. Each entry's prior is therefore learned
from the file, an empirical-Bayes estimate in the manner of limma's moderated variances
(Smyth, "Linear models and empirical Bayes methods for assessing differential expression in
microarray experiments", Stat. Appl. Genet. Mol. Biol. 3(1), 2004):

- the pool of an entry: the file's OTHER measured entries of the same cache mode with >= 2
  saves, whose kernel time is within POOL_TIME_FACTOR of the entry's (short kernels scatter
  more: a launch's jitter is a larger share of them; on the project's H100 a 7.8 us cold
  kernel scattered by 0.9% between processes, a 145 us one by 0.16%);
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
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from pytest_gpuperf.baseline.model import BaselineEntry

# An entry pools the histories of the entries whose kernel time is within this factor of its
# own. 4: wide enough that the project's perf suite (kernels of 4.5, 8, 22-37 and 129-145 us)
# gives every entry neighbours (with a factor of 2 its 8 us and 145 us entries found too few),
# narrow enough that an error in the carried shape stays small.
POOL_TIME_FACTOR = 4.0
Z_95 = 1.959963984540054
Key = tuple[str, str, str]


@dataclass(frozen=True)
class Pooled:
    """The file's pooled spread at one kernel time: a +-95% range in log efficiency, its
    degrees of freedom, and how many entries it pools."""

    spread: float = 0.0
    df: float = 0.0
    entries: int = 0


def log_spread(entry: BaselineEntry) -> tuple[float, int]:
    """(sample standard deviation of the saves' log efficiencies, its degrees of freedom)."""
    if entry.source != "measured" or len(entry.saves) < 2:
        return 0.0, 0
    logs = [math.log(s.efficiency) for s in entry.saves]
    return statistics.stdev(logs), len(logs) - 1


@dataclass(frozen=True)
class _Row:
    key: Key
    cache: str
    time_s: float
    df: int
    variance: float


class FilePool:
    """The entries of one file that can lend their spread, summarised once per loaded file."""

    def __init__(self, entries: Iterable[BaselineEntry]) -> None:
        rows = []
        for entry in entries:
            sd, df = log_spread(entry)
            if df < 1 or entry.time_s <= 0:
                continue
            rows.append(_Row(entry.key, entry.cache, entry.time_s, df, sd * sd))
        self._rows = tuple(rows)

    def __len__(self) -> int:
        return len(self._rows)

    def for_entry(self, key: Key, cache: str, time_s: float) -> Pooled:
        """The prior the file lends to the entry `key` (its own history left out)."""
        if time_s <= 0:
            return Pooled()
        chosen = [
            row
            for row in self._rows
            if row.cache == cache
            and row.key != key
            and time_s / POOL_TIME_FACTOR <= row.time_s <= time_s * POOL_TIME_FACTOR
        ]
        if not chosen:
            return Pooled()
        jitter_s = self.shape(key, cache)
        if jitter_s is None:  # no shape to learn: the conservative bound
            scales = [max(1.0, (row.time_s / time_s) ** 2) for row in chosen]
        else:
            scales = [_g(time_s, jitter_s) / _g(row.time_s, jitter_s) for row in chosen]
        total_df = sum(row.df for row in chosen)
        variance = sum(row.df * row.variance * s for row, s in zip(chosen, scales, strict=True))
        variance /= total_df
        return Pooled(Z_95 * math.sqrt(variance), float(total_df), len(chosen))

    def shape(self, key: Key, cache: str) -> float | None:
        """The file's jitter time r of sigma(t)^2 = s^2 (1 + (r / t)^2), by maximum likelihood
        over the other entries of the cache mode (each sample variance a scaled chi-square),
        on a grid from pure relative noise (r = 0) to pure launch jitter; None when they do not
        span a factor of 2 in time (3 entries at least), where no shape can be learned."""
        rows = [row for row in self._rows if row.cache == cache and row.key != key]
        if len(rows) < 3 or max(r.time_s for r in rows) < 2 * min(r.time_s for r in rows):
            return None
        total_df = sum(row.df for row in rows)
        best, best_r = -math.inf, 0.0
        for jitter_s in _JITTER_GRID:
            scaled = sum(row.df * row.variance / _g(row.time_s, jitter_s) for row in rows)
            if scaled <= 0:
                return None
            logs = sum(row.df * math.log(_g(row.time_s, jitter_s)) for row in rows)
            likelihood = -0.5 * total_df * math.log(scaled / total_df) - 0.5 * logs
            if likelihood > best:
                best, best_r = likelihood, jitter_s
        return best_r


# Jitter times for the shape's grid: 0 (all relative), then 10 ns to 10 ms, 8 per decade.
_JITTER_GRID = (0.0, *(10.0 ** (-8 + i / 8) for i in range(49)))


def _g(time_s: float, jitter_s: float) -> float:
    return 1.0 + (jitter_s / time_s) ** 2
