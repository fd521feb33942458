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
  sum of their degrees of freedom, reduced to limma's estimate of the prior's degrees of
  freedom when the entries scatter more than sampling alone explains (kernels that differ).

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
# own (2: at most a 4x conservative rescaling of a neighbour's variance).
POOL_TIME_FACTOR = 2.0
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
    floor: float  # what the saves' own intervals say each one was uncertain by (a variance)


class FilePool:
    """The entries of one file that can lend their spread, summarised once per loaded file."""

    def __init__(self, entries: Iterable[BaselineEntry]) -> None:
        rows = []
        for entry in entries:
            sd, df = log_spread(entry)
            if df < 1 or entry.time_s <= 0:
                continue
            floor = statistics.fmean((s.relative_ci / Z_95) ** 2 for s in entry.saves)
            rows.append(_Row(entry.key, entry.cache, entry.time_s, df, sd * sd, floor))
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
        scales = [max(1.0, (row.time_s / time_s) ** 2) for row in chosen]
        total_df = sum(row.df for row in chosen)
        variance = sum(row.df * row.variance * s for row, s in zip(chosen, scales)) / total_df
        df = float(total_df)
        if len(chosen) >= 3:
            floored = [max(row.variance, row.floor) * s for row, s in zip(chosen, scales)]
            df = min(df, prior_df_estimate(floored, [row.df for row in chosen]))
        return Pooled(Z_95 * math.sqrt(variance), df, len(chosen))


def prior_df_estimate(variances: list[float], dfs: list[int]) -> float:
    """limma's moment estimate of the prior's degrees of freedom d0 (Smyth 2004, section 6.2):
    the scatter of log sample variances beyond what chi-square sampling explains. Infinite
    when there is no excess scatter (the entries share one spread)."""
    from scipy.special import digamma, polygamma

    centred = [
        math.log(v) - float(digamma(d / 2.0)) + math.log(d / 2.0)
        for v, d in zip(variances, dfs)
        if v > 0
    ]
    if len(centred) < 3:
        return math.inf
    mean = statistics.fmean(centred)
    excess = sum((e - mean) ** 2 for e in centred) / (len(centred) - 1) - statistics.fmean(
        float(polygamma(1, d / 2.0)) for d in dfs
    )
    if excess <= 0:
        return math.inf
    return 2.0 * _trigamma_inverse(excess)


def _trigamma_inverse(x: float) -> float:
    """y with trigamma(y) = x (limma's Newton iteration)."""
    from scipy.special import polygamma

    if x > 1e7:
        return 1.0 / math.sqrt(x)
    if x < 1e-6:
        return 1.0 / x
    y = 0.5 + 1.0 / x
    for _ in range(50):
        tri = float(polygamma(1, y))
        step = tri * (1.0 - tri / x) / float(polygamma(2, y))
        y += step
        if -step / y < 1e-8:
            break
    return y
