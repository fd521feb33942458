"""Baseline entries no test produced: renamed kernels and tests leave their old entries behind,
and the new name then has "no baseline" while the old number sits unused.

An entry is an orphan when its test file was collected in this run and either its test id
was not collected at all (the test was renamed or removed), or its test ran and measured, but
not that (measurement name, cache mode) (the kernel or measurement was renamed). Tests that were
deselected, skipped or failed before measuring say nothing about their entries.

"Not collected" means something only when the run collected its files whole: a run given node
ids (the `update:` line of a failure names one parametrized case), `-k`, `-m`, `--deselect`,
`--lf` or a shard leaves the other tests out without their being gone, and listing them as
orphans made the `--gpuperf-prune` the same output recommends delete their entries. Such a run
(`whole=False`) finds only entries its tests ran and did not measure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from pytest_gpuperf.baseline import BaselineStore, Key

K = TypeVar("K", bound=tuple)


@dataclass(frozen=True)
class RunTests:
    """What a run says about the stored entries of its tests: every test id it collected
    (deselected ones too); what each test that measured produced, by test id (the
    (name, cache) or (arch, entry name) pairs its entries are keyed by); `whole`: the run
    collected its files whole (no node ids, -k, -m, shard...: `narrowed_by`)."""

    collected: set[str]
    produced: Mapping[str, set[tuple[str, str]]]
    whole: bool = True


@dataclass(frozen=True)
class Orphan:
    """An entry of `device_key`'s file that no test of this run produced."""

    device_key: str
    path: Path
    key: Key  # (test id, measurement name, cache mode)
    why: str  # "test" (not collected) | "measurement" (the test measured other things)


def find_orphans(store: BaselineStore, device_keys: Iterable[str], run: RunTests) -> list[Orphan]:
    """The orphans among the entries of `device_keys`' files (`run.produced` holds the
    (name, cache) pairs each test measured)."""
    rows = orphaned_entries(
        store.load, device_keys, lambda _device_key, key: (key[1], key[2]), "measurement", run
    )
    return [Orphan(*row) for row in rows]


class _Loaded(Protocol[K]):
    """What a store's load gives: the file's path and its entries by key."""

    @property
    def path(self) -> Path: ...

    @property
    def entries(self) -> Mapping[K, object]: ...


def orphaned_entries(
    load: Callable[[str], _Loaded[K]],
    owners: Iterable[str],
    made: Callable[[str, K], tuple[str, str]],
    other: str,
    run: RunTests,
) -> list[tuple[str, Path, K, str]]:
    """(owner, file, key, why) for each orphaned entry of the files of `owners` (device keys,
    or the static gate's archs): the one walk both kinds of baseline share. A key starts with
    its test id; `made(owner, key)` is what `run.produced` lists for that entry, `other` the
    word for an entry whose test produced other things."""
    files = {test_id.split("::", 1)[0] for test_id in run.collected}
    found = []
    for owner in sorted(set(owners)):
        loaded = load(owner)
        for key in sorted(loaded.entries):
            why = why_orphaned(
                key[0], made(owner, key), files, run.collected, run.produced, whole=run.whole
            )
            if why:
                found.append((owner, loaded.path, key, named_reason(why, other)))
    return found


def keys_by_owner(owned: Iterable[tuple[str, K]]) -> dict[str, list[K]]:
    """The keys to remove, grouped by the file (its owner) they are removed from."""
    grouped: dict[str, list[K]] = {}
    for owner, key in owned:
        grouped.setdefault(owner, []).append(key)
    return grouped


def why_orphaned(
    test_id: str,
    made: tuple[str, str],
    files: set[str],
    collected: set[str],
    produced: Mapping[str, set[tuple[str, str]]],
    *,
    whole: bool = True,
) -> str:
    """Why an entry is an orphan: "test" (its test was not collected, in a run that collected
    its file whole), "other" (its test produced other entries) or "" (not an orphan, or this
    run did not collect its file, or left tests of it out)."""
    if test_id.split("::", 1)[0] not in files:
        return ""
    if test_id not in collected:
        return "test" if whole else ""
    return "other" if test_id in produced and made not in produced[test_id] else ""


def prune(store: BaselineStore, orphans: Iterable[Orphan]) -> dict[Path, int]:
    """Remove the orphans from their files (one locked merge per file); entries removed per
    file."""
    removed = {}
    for device_key, keys in keys_by_owner((o.device_key, o.key) for o in orphans).items():
        path = store.update(device_key, [], remove=keys)
        removed[path] = len(keys)
    return removed


def narrowed_by(
    args: Sequence[str],
    *,
    keyword: str = "",
    markers: str = "",
    deselected: Sequence[str] = (),
    last_failed: bool = False,
    shard: object = None,
) -> str:
    """What selected tests within the run's files ("" when nothing did: its files were
    collected whole): node ids among the arguments, -k, -m, --deselect, --lf, a shard."""
    ways = [
        ("node ids", any("::" in str(arg) for arg in args)),
        ("-k", bool(keyword)),
        ("-m", bool(markers)),
        ("--deselect", bool(deselected)),
        ("--lf", last_failed),
        ("--gpuperf-shard", shard is not None),
    ]
    return ", ".join(name for name, used in ways if used)


def named_reason(why: str, other: str) -> str:
    return other if why == "other" else why
