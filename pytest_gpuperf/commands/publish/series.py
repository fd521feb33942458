"""What the dashboard shows, gathered from baseline files and JSON reports: one `Series` per
measurement (device, test id, measurement name, cache mode) with its saves and runs, the band
the gate computes for its stored entry, the baselines it replaced and a drift, and its state.

The band and the drift are the gate's own (gate/noise.py `stored_band`, gate/drift.py
`drift_of`, through the store's `lookup` that lends an entry its file's pooled spread), at the
false-alarm rate and tolerance the latest run of the measurement recorded in its verdict (a
run's budget sets its own rate), else the defaults of one test alone, as
`gpuperf history` uses (one model, record/history_model.py; one band,
gate/entry_level.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

from pytest_gpuperf.baseline import BaselineEntry, BaselineStore
from pytest_gpuperf.baseline.ref import TrailPoint
from pytest_gpuperf.commands.publish.roofline import RooflinePoint, roofline_points
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.gate.entry_level import entry_level
from pytest_gpuperf.gate.policy import DEFAULT_TOLERANCE, FALSE_ALARM_RATE
from pytest_gpuperf.record.checks import Drift, NoiseBand
from pytest_gpuperf.record.history_model import Point, judged_level, run_point, save_point
from pytest_gpuperf.record.report_reader import ReadReport
from pytest_gpuperf.record.verdict import ACCEPTED, FAIL, Row

# The states of the summary grid, worst first (the grid sorts by them within a test file).
REGRESSED_STATE, DRIFT_STATE, ACCEPTED_STATE = "regressed", "drift", "accepted"
# the latest run fell below the band in its first round and its second round did not confirm
# it: shown as "ok" it contradicted its own plot (a point under the "fails below" line)
UNCONFIRMED_STATE = "not confirmed"
NO_BASELINE_STATE, OK_STATE = "no baseline", "ok"
STATES = (
    REGRESSED_STATE,
    DRIFT_STATE,
    ACCEPTED_STATE,
    UNCONFIRMED_STATE,
    NO_BASELINE_STATE,
    OK_STATE,
)


class Key(NamedTuple):
    """What the page keys a series by: one measurement of one test on one device."""

    device_key: str  # the baseline file's device key, with -sim for the simulated device
    test_id: str
    name: str  # the measurement's
    cache: str


@dataclass(frozen=True)
class Run:
    """One report: a pytest run or a merged shard report."""

    index: int
    path: str
    created: str  # when the report was written (ISO 8601 UTC)
    commit: str
    commit_time: str
    branch: str
    merged: bool  # written by gpuperf merge

    @property
    def name(self) -> str:
        return Path(self.path).name


@dataclass(frozen=True)
class Series:
    """One measurement's history and what the gate makes of it."""

    device_key: str  # as in Key
    test_id: str
    name: str  # the measurement's
    cache: str
    device_name: str
    simulated: bool
    points: tuple[Point, ...]  # oldest first
    expected: float | None = None  # the stored entry's level (None: no entry)
    allowance: float = 0.0  # the drop the gate allows below `expected`
    band: NoiseBand | None = None
    false_alarm_rate: float = FALSE_ALARM_RATE
    tolerance: float = DEFAULT_TOLERANCE
    trail: tuple[TrailPoint, ...] = ()  # the baselines the entry replaced, oldest first
    drift: Drift | None = None
    entry_since: str = ""  # the entry's first kept save (where its band starts)
    state: str = OK_STATE

    @property
    def key(self) -> Key:
        return Key(self.device_key, self.test_id, self.name, self.cache)

    @property
    def test_file(self) -> str:
        return self.test_id.split("::", 1)[0]

    @property
    def latest(self) -> Point | None:
        """The newest point (a run where any is newer than the newest save)."""
        return self.points[-1] if self.points else None

    @property
    def latest_run(self) -> Point | None:
        runs = [p for p in self.points if p.kind == "run"]
        return runs[-1] if runs else None


@dataclass(frozen=True)
class Dashboard:
    runs: tuple[Run, ...]
    series: tuple[Series, ...]
    baseline_files: tuple[str, ...]
    roofline: tuple[RooflinePoint, ...] = ()  # the runs' rows that declared work (roofline.py)


def device_key_of(row: Row) -> str:
    """The baseline file a row is judged against: `<key>-sim` for the simulated device."""
    return row.measurement.device_key + ("-sim" if row.measurement.simulated else "")


def gather(
    baseline_paths: Sequence[Path],
    reports: Iterable[ReadReport],
    *,
    false_alarm_rate: float = FALSE_ALARM_RATE,
    tolerance: float = DEFAULT_TOLERANCE,
) -> Dashboard:
    """Every measurement of the baseline files and the reports, as series. ConfigError when a
    baseline file is of a device none of the reports measured (reports given): the page would
    set runs of one device beside saves of another. `reports` is read once, in order: a
    generator that reads each file as it is asked for keeps one report in memory at a time
    (100 reports of 1,000 rows held at once were most of a 1.44 GB publish)."""
    run_list: list[Run] = []
    run_points: dict[Key, list[Point]] = {}
    seen: dict[Key, tuple[str, bool]] = {}
    measured_devices: set[str] = set()
    roofline: list[RooflinePoint] = []
    for index, report in enumerate(reports):
        run = _run(index, report)
        run_list.append(run)
        for row in report.rows:
            key = Key(device_key_of(row), row.test_id, row.measurement.name, row.measurement.cache)
            measured_devices.add(key.device_key)
            point = run_point(
                row, when=run.created or run.commit_time, commit=run.commit, run=run.index
            )
            run_points.setdefault(key, []).append(point)
            seen[key] = (row.measurement.device_name, row.measurement.simulated)
            roofline += roofline_points(key, row, run.index)
    entries: dict[Key, tuple[BaselineStore, BaselineEntry]] = {}
    for path in baseline_paths:
        store = BaselineStore(path.parent)
        loaded = store.load(path.stem)
        if run_list and path.stem not in measured_devices:
            measured = ", ".join(sorted(measured_devices)) or "nothing"
            raise ConfigError(
                f"{path}: the baselines of device {path.stem!r}, but the reports measured "
                f"{measured}; give the baseline file of the reports' device "
                f"(baselines/<device>.toml)"
            )
        for entry in loaded.entries.values():
            entries[Key(path.stem, *entry.key)] = (store, entry)
    series = []
    for key in sorted(run_points.keys() | entries.keys()):
        found = entries.get(key)
        points = list(run_points.get(key, ()))
        name, simulated = seen.get(key, ("", key.device_key.endswith("-sim")))
        if found is not None:
            store, entry = found
            points += [
                save_point(s.when, s.efficiency, s.efficiency_ci, s.commit, s.board)
                for s in entry.saves
            ]
            name = name or (entry.latest.device_name if entry.latest else "")
        points.sort(key=lambda p: (p.when, p.kind != "save"))
        series.append(_series(key, name, simulated, points, found, false_alarm_rate, tolerance))
    paths = tuple(str(p) for p in baseline_paths)
    return Dashboard(tuple(run_list), tuple(series), paths, tuple(roofline))


def _series(
    key: Key,
    device_name: str,
    simulated: bool,
    points: list[Point],
    found: tuple[BaselineStore, BaselineEntry] | None,
    false_alarm_rate: float,
    tolerance: float,
) -> Series:
    latest_run = next((p for p in reversed(points) if p.kind == "run"), None)
    series = Series(*key, device_name, simulated, tuple(points))
    if found is None:
        return _with_state(series, latest_run)
    store, entry = found
    # the level the newest run judged against the entry was judged at (one rule with the
    # history command's: record/history_model.py)
    rate, tolerance = judged_level(points, false_alarm_rate, tolerance)
    # the entry as the gate judged the latest run: on its board (one the saves were made on,
    # or another, whose spread between boards the band adds); without runs, on the board of
    # the latest save
    board = latest_run.board if latest_run is not None else None
    ref = store.lookup(key.device_key, *entry.key, board=board)
    assert ref is not None  # the entry was just read from this store
    level = entry_level(ref, false_alarm_rate=rate, tolerance=tolerance)
    series = Series(
        *key,
        device_name,
        simulated,
        tuple(points),
        expected=level.expected,
        allowance=level.allowance,
        band=level.band,
        false_alarm_rate=rate,
        tolerance=tolerance,
        trail=level.trail,
        drift=level.drift,
        entry_since=entry.saves[0].when if entry.saves else "",
    )
    return _with_state(series, latest_run)


def _with_state(series: Series, latest_run: Point | None) -> Series:
    state = OK_STATE
    if latest_run is not None and latest_run.status == FAIL:
        state = REGRESSED_STATE
    elif latest_run is not None and latest_run.status == ACCEPTED:
        state = ACCEPTED_STATE
    elif series.drift is not None:
        state = DRIFT_STATE
    elif latest_run is not None and latest_run.unconfirmed:
        state = UNCONFIRMED_STATE
    elif series.expected is None:
        state = NO_BASELINE_STATE
    return replace(series, state=state)


def _run(index: int, report: ReadReport) -> Run:
    document = report.document
    commit = document.get("commit") or {}
    return Run(
        index=index,
        path=report.path,
        created=str(document.get("created", "")),
        commit=str(commit.get("id", "")),
        commit_time=str(commit.get("time", "")),
        branch=str(commit.get("branch", "")),
        merged=bool(document.get("merge")),
    )


@dataclass(frozen=True)
class Episode:
    """One line of the regressions view: a series' latest streak of failed (or accepted) runs,
    `first` to `last` over `runs` runs in a row, or (`last` None) the entry's drift."""

    series: Series
    state: str  # REGRESSED_STATE | ACCEPTED_STATE | DRIFT_STATE
    last: Point | None = None
    first: Point | None = None
    runs: int = 0

    @property
    def when(self) -> str:
        if self.last is not None:
            return self.last.when
        drift = self.series.drift
        return drift.steps[-1].when if drift is not None and drift.steps else ""


def regressions(dashboard: Dashboard) -> list[Episode]:
    """What failed, was accepted or drifted, newest first: per series its latest streak of
    failed runs and of accepted ones (runs in a row of that state, ended by a run of another
    or by the newest run), and its drift."""
    found: list[Episode] = []
    for series in dashboard.series:
        runs = [p for p in series.points if p.kind == "run"]
        for state, wanted in ((REGRESSED_STATE, FAIL), (ACCEPTED_STATE, ACCEPTED)):
            marks = [i for i, p in enumerate(runs) if p.status == wanted]
            if not marks:
                continue
            end = marks[-1]
            start = end
            while start > 0 and runs[start - 1].status == wanted:
                start -= 1
            found.append(Episode(series, state, runs[end], runs[start], end - start + 1))
        if series.drift is not None:
            found.append(Episode(series, DRIFT_STATE))
    found.sort(key=lambda episode: episode.when, reverse=True)
    return found
