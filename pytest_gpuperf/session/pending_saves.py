"""The saves one pytest process keeps until its session ends, and their writing.

A judged measurement with an entry to save (`--gpuperf-save`) is kept here, once per entry,
with the plan that makes the same save on the entry as it is in the file when written
(gate/judge.py's `Judged.rebase`: a save by another process in between is kept). At the end
of the session each baseline file gets one locked merge (baseline/store.py); a file that
cannot be written is left as it was and named, and Ctrl-C stops at once. An entry that would
not load back is refused when it is kept, with its row saying why, so one impossible
measurement does not cost the other entries of its file. Split from bench_session.py, whose
`BenchSession.judge` keeps and `flush_saves` writes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_gpuperf.errors import GpuPerfError, SaveInterrupted, stop_words

if TYPE_CHECKING:
    from pytest_gpuperf.baseline import BaselineEntry, BaselineStore
    from pytest_gpuperf.gate.judge import Judged

EntryKey = tuple[str, str, str]
Rebase = Callable[["BaselineEntry | None"], "BaselineEntry"]


@dataclass
class SaveOutcome:
    """What `flush_saves` did: a line per file written, a line per problem, the files not
    saved with a short reason each (for the rows), and whether Ctrl-C stopped it."""

    written: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    unsaved: dict[str, str] = field(default_factory=dict)
    interrupted: bool = False


class PendingSaves:
    """The entries to save, per baseline file, until the session writes them."""

    def __init__(self) -> None:
        self._pending: dict[str, dict[EntryKey, BaselineEntry]] = {}
        # the same saves, to be re-planned on each entry as it is on disk when written
        self._rebase: dict[str, dict[EntryKey, Rebase]] = {}

    def keep(self, test_id: str, judged: Sequence[Judged]) -> list[Judged]:
        """Keep the entries of one test's judged measurements; each returned as kept (one
        whose entry would not load back without it, its verdict saying so). GpuPerfError for
        an entry another test of the same id already saved in this session."""
        judged = [_valid_entry(item) for item in judged]
        for item in judged:
            if item.entry is None:
                continue
            pending = self._pending.setdefault(item.save_key, {})
            if item.entry.key in pending:
                raise GpuPerfError(
                    f"{test_id}: measurement {item.entry.name!r} (cache {item.entry.cache}) was "
                    "already saved in this session by another test with the same id; give "
                    "each measurement its own name"
                )
            pending[item.entry.key] = item.entry
            if item.rebase is not None:
                self._rebase.setdefault(item.save_key, {})[item.entry.key] = item.rebase
        return judged

    def flush(
        self,
        store_of: Callable[[], BaselineStore],
        shown: Callable[[Path], str],
        *,
        interrupted: bool = False,
    ) -> SaveOutcome:
        """Write the kept saves, one locked merge per baseline file of `store_of()` (asked
        only when there is something to save); `shown` names a file in the lines.
        `interrupted`: the run was stopped before this, so nothing is written."""
        outcome = SaveOutcome()
        pending = sorted(self._pending.items())
        rebase, self._rebase = self._rebase, {}
        self._pending.clear()
        if not pending:
            return outcome
        store = store_of()
        for position, (key, entries) in enumerate(pending):
            where = str(store.path_for(key))
            if interrupted:
                outcome.unsaved[where] = f"interrupted ({stop_words()}) before the save"
                continue
            try:
                path = store.save(key, entries.values(), rebase=rebase.get(key, {}))
            except GpuPerfError as problem:
                outcome.problems.append(str(problem))
                outcome.unsaved[where] = _short_reason(problem)
                continue
            except SaveInterrupted as stopped:
                outcome.interrupted = True
                if stopped.saved:
                    outcome.written.append(_saved_line(len(entries), shown(Path(where))))
                else:
                    outcome.unsaved[where] = f"interrupted ({stop_words()}) while {stopped.phase}"
                    outcome.problems.append(f"{stopped}: not saved; the file was left as it was")
                for later_key, _ in pending[position + 1 :]:
                    outcome.unsaved[str(store.path_for(later_key))] = (
                        f"interrupted ({stop_words()})"
                    )
                break
            outcome.written.append(_saved_line(len(entries), shown(path)))
        return outcome


def _valid_entry(item: Judged) -> Judged:
    """`item` without its entry when the entry would not load back (its row then says
    "not saved" and why): one impossible measurement must not cost the other entries
    of its file, which the merge validates as a whole."""
    if item.entry is None:
        return item
    from pytest_gpuperf.baseline.schema import parse, render
    from pytest_gpuperf.baseline.toml_check import Invalid
    from pytest_gpuperf.gate.saving import not_written

    try:
        parse(render(item.save_key, [item.entry]), item.save_key)
    except ModuleNotFoundError:  # no tomli-w: the save itself says so, once
        return item
    except Invalid as problem:
        reason = f"the entry is invalid: {problem.message}"
        return replace(
            item, verdict=not_written(item.verdict, reason, "invalid"), save_key="", entry=None
        )
    return item


def _saved_line(count: int, shown: str) -> str:
    return f"saved {count} measurement{'s' if count != 1 else ''} to {shown}"


def _short_reason(problem: GpuPerfError) -> str:
    """A row's "not saved" reason: the error's text after its path (the row names the file)."""
    if getattr(problem, "short", ""):
        return f"{problem.short}, see the error below"  # type: ignore[attr-defined]
    text = str(problem)
    path = getattr(problem, "path", "")
    if path and text.startswith(f"{path}: "):
        text = text[len(path) + 2 :]
    return text.removeprefix("not saved: ")


__all__ = ["PendingSaves", "SaveOutcome"]
