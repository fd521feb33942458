"""A save is claimed only when it is in the file: each "saved" row is checked against its
baseline file, read back under the file's lock once every process of the run has saved.

Under pytest-xdist each worker writes its own saves when its session ends, and its rows reach
the controller before that, planned as "saved". A worker that dies (SIGKILL, the OOM killer, a
driver's segfault) never writes them: the controller printed "saved 18 measurements" and the
file held 14. Reading back is the only evidence a controller has; every row not found says
why: its worker crashed, the run was stopped before the worker saved, or it is missing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from pytest_gpuperf.baseline import BaselineStore
from pytest_gpuperf.errors import GpuPerfError, stop_words
from pytest_gpuperf.gate.saving import found_in, not_written
from pytest_gpuperf.record.verdict import Row


@dataclass
class Checked:
    """The rows, each "saved" only where its save was found, and a line per file that could
    not be read back."""

    rows: dict[str, list[Row]]
    problems: list[str] = field(default_factory=list)


def confirm_saves(
    rows: Mapping[str, Sequence[Row]],
    store: BaselineStore,
    *,
    workers: Mapping[str, str],
    crashed: Mapping[str, str],
    stopped: bool,
    where: Callable[[Path], str],
    locked: bool = True,
) -> Checked:
    """`rows` by test id with every planned save checked against its file. `workers` maps a
    test id to the xdist worker that ran it, `crashed` the workers that died to xdist's words;
    `stopped`: Ctrl-C or SIGTERM stopped the run; `where` shortens a path. `locked` False
    reads the files without their lock (after a stop while waiting for it: a save replaces a
    file whole, so the file read is one save's, and no save of this run is still to come)."""
    planned = {
        row.verdict.save.path: row.verdict.save.device_key
        for test_rows in rows.values()
        for row in test_rows
        if row.verdict.save is not None and row.verdict.save.saved
    }
    checked = Checked({test_id: list(test_rows) for test_id, test_rows in rows.items()})
    if not planned:
        return checked
    contents = {}
    for path, device_key in sorted(planned.items()):
        try:
            contents[path] = store.read_back(device_key) if locked else store.read_now(device_key)
        except GpuPerfError as problem:
            checked.problems.append(f"{problem}; its saves are not confirmed")
    lost: dict[str, int] = {}  # a line of the summary's errors -> measurements it covers
    for test_id, test_rows in checked.rows.items():
        worker = workers.get(test_id, "")
        marked = []
        for row in test_rows:
            save = row.verdict.save
            if save is not None and save.saved:
                if save.path not in contents:
                    reason = "not confirmed: the file could not be read back (the error below)"
                    row = replace(row, verdict=not_written(row.verdict, reason, "missing"))
                else:
                    m = row.measurement
                    entry = contents[save.path].get(row.test_id, m.name, m.cache)
                    if not found_in(entry, save, m):
                        why = not_found(worker, crashed, where(Path(save.path)), stopped=stopped)
                        row = replace(row, verdict=not_written(row.verdict, *why))
                        if why[1] != "interrupted":  # Ctrl-C's own line says that
                            lost[why[0]] = lost.get(why[0], 0) + 1
            marked.append(row)
        checked.rows[test_id] = marked
    for reason, count in lost.items():
        measurements = f"{count} measurement{'s' if count != 1 else ''}"
        checked.problems.append(f"{measurements} not saved: {reason} (listed above)")
    return checked


def unconfirmed(rows: Mapping[str, Sequence[Row]]) -> Checked:
    """Every row still saying "saved" says "not saved" instead: the run was stopped (Ctrl-C,
    SIGTERM) while its files were being read back, so no save can be claimed."""
    reason = f"interrupted ({stop_words()}) before the save was confirmed in the file"
    marked = {
        test_id: [
            replace(row, verdict=not_written(row.verdict, reason, "interrupted"))
            for row in test_rows
        ]
        for test_id, test_rows in rows.items()
    }
    return Checked(marked, [f"{reason}: the rows say not saved; check the baseline files"])


def not_found(
    worker: str, crashed: Mapping[str, str], where: str, *, stopped: bool
) -> tuple[str, str]:
    """(the reason, the why_not) of a planned save that is not in its file `where`."""
    if worker in crashed:
        return f"worker crashed ({worker}: {crashed[worker]}) before saving", "crashed"
    if stopped:
        return f"interrupted ({stop_words()}) before {worker or 'the run'} saved", "interrupted"
    return f"not in {where} when read back after the save", "missing"


__all__ = ["Checked", "confirm_saves", "not_found", "unconfirmed"]
