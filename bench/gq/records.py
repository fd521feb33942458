"""What did one pytest process measure? Its trials read back from its --gpuperf-json report,
and the plain data a part's file keeps of them (so a merge can score them again)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lab.tables import finite_median


@dataclass
class Trial:
    """One measurement of one process: its A/B comparison and head's measurement."""

    name: str
    status: str  # the verdict's: pass | fail | marginal | unjudged
    test_outcome: str
    state: str  # the comparison's (pass, regressed, improved, inconclusive, ...) or ""
    ratio: float | None
    ratio_ci: tuple[float, float] | None
    pairs: int
    threshold: float
    time_s: float
    efficiency: float
    relative_ci: float
    base_efficiency: float | None
    drift: float | None = None  # the drift between loads the gate used (+-95% per side)
    drift_basis: str = ""
    median_ratio: float | None = None  # the median of the pair ratios (the old statistic)
    measurement: Any = field(repr=False, default=None)  # results.Measurement (head's)

    @property
    def valid(self) -> bool:
        """A timed comparison of a test whose output was right."""
        return (
            self.status != "unjudged"
            and self.ratio_ci is not None
            and self.state in ("pass", "regressed", "improved", "inconclusive")
        )

    def summary(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "measurement"}


def trials_from_rows(rows: Sequence[Any]) -> dict[str, Trial]:
    """The trials of one --gpuperf-json report's rows (read by the plugin's reader)."""
    trials = {}
    for row in rows:
        m, c = row.measurement, row.verdict.comparison  # c: None where nothing was compared
        trials[m.name] = Trial(
            name=m.name, status=row.verdict.status, test_outcome=row.test_outcome,
            state=getattr(c, "state", ""), ratio=getattr(c, "ratio", None),
            ratio_ci=tuple(c.ratio_ci) if c is not None and c.ratio_ci else None,
            pairs=getattr(c, "pairs", 0), threshold=getattr(c, "threshold", 0.0),
            time_s=m.time_s, efficiency=m.efficiency, relative_ci=m.relative_ci,
            base_efficiency=getattr(c, "base_efficiency", None), drift=getattr(c, "drift", None),
            drift_basis=getattr(c, "drift_basis", ""),
            median_ratio=getattr(c, "median_ratio", None), measurement=m,
        )  # fmt: skip
    return trials


@dataclass
class ProcessRecord:
    index: int
    seed: int
    wall_s: float
    returncode: int | None
    trials: dict[str, Trial]
    problem: str = ""
    device: str = ""

    def to_json(self) -> dict[str, Any]:
        trials = {name: trial.summary() for name, trial in self.trials.items()}
        for name in HISTORY_POINTS:  # what a merge needs to score the history again
            if name in self.trials and self.trials[name].measurement is not None:
                trials[name]["measurement"] = compact_measurement(self.trials[name].measurement)
        plain = ("index", "seed", "wall_s", "returncode", "problem", "device")
        return {**{name: getattr(self, name) for name in plain}, "trials": trials}


# The points the stored-baseline history is scored on (score_history).
HISTORY_POINTS = ("long_same", "long_slow3")


def compact_measurement(measurement: Any) -> dict[str, Any]:
    """A measurement as plain data without its samples (a save records only their count,
    kept as `sample_count`), so a part's file stays small and a merge can judge histories."""
    from pytest_gpuperf.engine.plain import to_plain

    data = dict(to_plain(measurement))
    data["sample_count"] = len(data.pop("samples_s", ()))
    return data


def measurement_from_compact(data: Mapping[str, Any]) -> Any:
    """compact_measurement's inverse; the samples are stand-ins (time_s, as many as there
    were): only their count is read by the gate's saving code."""
    from pytest_gpuperf.engine.plain import from_plain
    from pytest_gpuperf.engine.results import Measurement

    fields = {k: v for k, v in data.items() if k != "sample_count"}
    fields["samples_s"] = [data["time_s"]] * int(data.get("sample_count", 0))
    return from_plain(Measurement, fields)


def record_from_json(index: int, process: Mapping[str, Any]) -> ProcessRecord:
    """A process of a saved document (its history points keep their measurements)."""
    trials = {}
    for name, data in process.get("trials", {}).items():
        fields = {k: v for k, v in data.items() if k in Trial.__dataclass_fields__}
        if fields.get("ratio_ci") is not None:
            fields["ratio_ci"] = tuple(fields["ratio_ci"])
        if data.get("measurement"):
            fields["measurement"] = measurement_from_compact(data["measurement"])
        trials[name] = Trial(**fields)
    return ProcessRecord(
        index, process.get("seed", index), process.get("wall_s", math.nan),
        process.get("returncode"), trials, process.get("problem", ""), process.get("device", ""),
    )  # fmt: skip


def wall_summary(records: Sequence[ProcessRecord]) -> dict[str, float]:
    """The processes' wall times: median, max and the first's (which compiles)."""
    walls = [r.wall_s for r in records]
    return {
        "median": finite_median(walls),
        "max": max(walls) if walls else math.nan,
        "first": walls[0] if walls else math.nan,
    }
