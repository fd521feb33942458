"""Baselines saved by the shards of one run, merged into one directory (`gpuperf merge
--baselines SHARD_DIR... --out baselines/`).

Each CI runner saves into its own checkout, which started from the same committed files: a
shard's file holds the entries it saved, changed, and every other entry as the checkout had
it. The merge is three-way, as git merges a file: the base is what `--out` holds now (the
merge job's checkout of the same commit). For each entry, the shards whose version differs
from the base changed it; one change (or several identical ones) is taken, a removal
(`--gpuperf-prune`) too. Two different changes are resolved only when one is the other's
history continued (its saves extend the other's, as a later `--gpuperf-save` of the same code
writes); otherwise the entry conflicts, and the merge names each version's file:line and
writes nothing. Every entry keeps its whole history of saves; the writing is the baseline
store's own locked, atomic merge (store.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_gpuperf.baseline.model import BaselineEntry
from pytest_gpuperf.baseline.store import BaselineFile, BaselineStore, Key
from pytest_gpuperf.baseline.toml_check import Lines
from pytest_gpuperf.errors import BaselineError, ConfigError


@dataclass(frozen=True)
class DeviceMerge:
    """What the merge makes of one device's file."""

    device_key: str
    path: Path  # the file in --out
    write: Mapping[Key, BaselineEntry] = field(default_factory=dict)  # changed entries
    based_on: Mapping[Key, BaselineEntry] = field(default_factory=dict)  # their base versions
    remove: tuple[Key, ...] = ()
    taken_from: Mapping[str, int] = field(default_factory=dict)  # shard dir -> entries taken
    unchanged: int = 0
    conflicts: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.write or self.remove)

    def line(self) -> str:
        """'mi300x-sim.toml: 19 entries written (6 from a/, 6 from b/, 7 from c/), 0 unchanged,
        0 removed'."""
        origin = ", ".join(f"{n} from {where}" for where, n in self.taken_from.items() if n)
        return (
            f"{self.path}: {len(self.write)} entr{'ies' if len(self.write) != 1 else 'y'} "
            f"written{f' ({origin})' if origin else ''}, {self.unchanged} unchanged, "
            f"{len(self.remove)} removed"
        )


def plan_merge(shard_dirs: Sequence[str | Path], out: str | Path) -> list[DeviceMerge]:
    """The merge of every device file found in `shard_dirs` into `out`, decided but not
    written. ConfigError for a directory that is not a shard's baselines; BaselineError
    (file:line) for a broken file."""
    if not shard_dirs:
        raise ConfigError("--baselines needs at least one shard's baseline directory")
    stores = []
    for directory in shard_dirs:
        path = Path(directory)
        if not path.is_dir():
            what = "does not exist" if not path.exists() else "is not a directory"
            raise ConfigError(f"--baselines {directory}: {what}")
        store = BaselineStore(path)
        if not store.device_keys():
            raise ConfigError(
                f"--baselines {directory}: no baseline files (<device>.toml) in it; name each "
                "shard's baseline directory (its --gpuperf-baseline-dir, 'baselines' by default)"
            )
        stores.append(store)
    target = BaselineStore(out)
    target.check_directory()
    keys = sorted({key for store in stores for key in store.device_keys()})
    return [_merge_device(key, stores, target) for key in keys]


def write_merge(merges: Sequence[DeviceMerge], out: str | Path) -> list[Path]:
    """Write the planned merges into `out` through the store's lock; each entry written must
    still be as the plan found it (a save or merge in between is refused, file untouched)."""
    target = BaselineStore(out)
    written = []
    for merge in merges:
        if not merge.changed:
            continue
        rebase = {
            key: _unchanged_since_plan(merge.path, key, merge.based_on.get(key), entry)
            for key, entry in merge.write.items()
        }
        target.update(merge.device_key, merge.write.values(), remove=merge.remove, rebase=rebase)
        written.append(merge.path)
    return written


def _unchanged_since_plan(
    path: Path, key: Key, planned: BaselineEntry | None, entry: BaselineEntry
) -> Callable[[BaselineEntry | None], BaselineEntry]:
    def check(current: BaselineEntry | None) -> BaselineEntry:
        if current != planned:
            raise BaselineError(
                str(path),
                f"not merged: the entry of {key[0]!r} changed in the file while the merge ran "
                "(another save?); the file was left as it was: run the merge again",
            )
        return entry

    return check


def extends(newer: BaselineEntry, older: BaselineEntry) -> bool:
    """Whether `newer` is `older` saved again: its saves continue older's (the oldest perhaps
    dropped by --gpuperf-history), with at least one more; or older is a reported figure that
    a first measured save replaced."""
    if newer.source != "measured" or not newer.saves:
        return False
    if older.source == "reported":
        return True
    old, new = older.saves, newer.saves
    for dropped in range(len(old)):
        kept = old[dropped:]
        if len(new) > len(kept) and new[: len(kept)] == kept:
            return True
    return False


def _merge_device(key: str, stores: Sequence[BaselineStore], target: BaselineStore) -> DeviceMerge:
    base = target.load(key)
    files = {store: store.load(key) for store in stores if key in store.device_keys()}
    names = {store: _shown(store.directory) for store in stores}
    write: dict[Key, BaselineEntry] = {}
    remove: list[Key] = []
    taken = {names[store]: 0 for store in files}
    conflicts: list[str] = []
    unchanged = 0
    every_key = set(base.entries)
    for loaded in files.values():
        every_key |= set(loaded.entries)
    for entry_key in sorted(every_key):
        ancestor = base.entries.get(entry_key)
        changes = [
            (store, loaded.entries.get(entry_key))
            for store, loaded in files.items()
            if loaded.entries.get(entry_key) != ancestor
        ]
        if not changes:
            unchanged += ancestor is not None
            continue
        resolved, chosen = _resolve([entry for _, entry in changes])
        if not resolved:
            conflicts.append(_conflict_line(entry_key, changes, files, base))
            continue
        if chosen is None:
            remove.append(entry_key)
            continue
        write[entry_key] = chosen
        source = next(store for store, entry in changes if entry == chosen)
        taken[names[source]] += 1
    return DeviceMerge(
        device_key=key,
        path=target.path_for(key),
        write=write,
        based_on={k: base.entries[k] for k in write if k in base.entries},
        remove=tuple(remove),
        taken_from=taken,
        unchanged=unchanged,
        conflicts=tuple(conflicts),
    )


def _resolve(versions: Sequence[BaselineEntry | None]) -> tuple[bool, BaselineEntry | None]:
    """(resolved, the version to keep): the one version the changes agree on, or the one
    whose history continues every other's; (False, None) for a conflict. None is a removal."""
    distinct: list[BaselineEntry | None] = []
    for version in versions:
        if version not in distinct:
            distinct.append(version)
    if len(distinct) == 1:
        return True, distinct[0]
    if None in distinct:  # removed by one shard, changed by another
        return False, None
    entries = [entry for entry in distinct if entry is not None]
    latest = [e for e in entries if all(e is o or extends(e, o) for o in entries)]
    return (True, latest[0]) if len(latest) == 1 else (False, None)


def _conflict_line(
    key: Key,
    changes: Sequence[tuple[BaselineStore, BaselineEntry | None]],
    files: Mapping[BaselineStore, BaselineFile],
    base: BaselineFile,
) -> str:
    test_id, name, cache = key
    places = []
    for store, entry in changes:
        loaded = files[store]
        if entry is None:
            places.append(f"{_shown(loaded.path)} (removed it)")
            continue
        saves = len(entry.saves)
        places.append(
            f"{_shown(loaded.path)}:{_line_of(loaded, key) or '?'} "
            f"({saves} save{'s' if saves != 1 else ''}"
            + (f", last {entry.latest.when}" if entry.latest and entry.latest.when else "")
            + ")"
        )
    against = _shown(base.path)
    if not base.path.exists():
        against += " (no such file: --out should hold the files the shards started from)"
    return (
        f"conflicting entries for test {test_id!r} measurement {name!r} (cache {cache}): "
        f"{' and '.join(places)} changed it differently since {against}, and neither "
        "continues the other's history; keep one by hand (or merge shards of one run only)"
    )


def _line_of(loaded: BaselineFile, key: Key) -> int | None:
    try:
        text = loaded.path.read_text(encoding="utf-8-sig")
    except OSError:
        return None
    index = list(loaded.entries).index(key)
    return Lines(text).entry_key(index, "id")


def _shown(path: Path) -> str:
    return str(path)
