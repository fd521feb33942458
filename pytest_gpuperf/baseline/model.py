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
from dataclasses import dataclass
from datetime import datetime, timezone

from pytest_gpuperf.results import BaselineRef

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

    def to_ref(
        self, path: str | os.PathLike[str], device_key: str = "", pooled: Pooled | None = None
    ) -> BaselineRef:
        """The view the gate works with; `pooled` is what the rest of its file lends it
        (baseline/pool.py)."""
        latest = self.latest
        pooled = pooled or Pooled()
        return BaselineRef(
            efficiency=self.efficiency,
            efficiency_ci=self.efficiency_ci,
            run_spread=self.run_spread,
            bandwidth_bps=self.bandwidth_bps,
            time_s=self.time_s,
            cache=self.cache,
            source=self.source,
            provenance=self.describe(),
            path=str(path),
            device_key=device_key,
            saves=max(len(self.saves), 1),
            spread_basis=self.spread_basis,
            fingerprint=latest.fingerprint if latest else "",
            prior_spread=self.prior_spread,
            history_sd=log_spread(self)[0],
            backend=latest.backend if latest else "",
            pooled_spread=pooled.spread,
            pooled_df=pooled.df,
            pooled_entries=pooled.entries,
        )


@dataclass(frozen=True)
class Pooled:
    """The file's pooled spread at one kernel time: a +-95% range in log efficiency, its
    degrees of freedom, and how many entries it pools (baseline/pool.py pools it; an entry
    turns it into its `BaselineRef`, so it lives beside the entry)."""

    spread: float = 0.0
    df: float = 0.0
    entries: int = 0


def log_spread(entry: BaselineEntry) -> tuple[float, int]:
    """(sample standard deviation of the saves' log efficiencies, its degrees of freedom)."""
    if entry.source != "measured" or len(entry.saves) < 2:
        return 0.0, 0
    logs = [math.log(s.efficiency) for s in entry.saves]
    return statistics.stdev(logs), len(logs) - 1


def utc_now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def significant(value: float, digits: int = SIGNIFICANT_DIGITS) -> float:
    """`value` to `digits` significant digits (relative precision at any magnitude)."""
    return float(f"{value:.{digits}g}")
