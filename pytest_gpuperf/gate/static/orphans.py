"""Static orphans: entries of baselines/static/<arch>.toml that no test of this run produced,
found and pruned by the rule baselines use (baseline/orphans.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_gpuperf.baseline.orphans import named_reason, why_orphaned
from pytest_gpuperf.gate.static.store import StaticStore


@dataclass(frozen=True)
class StaticOrphan:
    """An entry of the static facts file of `arch` that no test of this run produced."""

    arch: str
    path: Path
    key: tuple[str, str]  # (test id, entry name)
    why: str  # "test" (not collected) | "kernel" (the test checked other kernel entries)


def find_static_orphans(
    store: StaticStore,
    archs: Iterable[str],
    *,
    collected: set[str],
    produced: Mapping[str, set[tuple[str, str]]],
    whole: bool = True,
) -> list[StaticOrphan]:
    """The same rule as `find_orphans`, for baselines/static/<arch>.toml: `produced` maps the
    tests the static gate checked to the (arch, entry name) pairs it checked."""
    files = {test_id.split("::", 1)[0] for test_id in collected}
    found = []
    for arch in sorted(set(archs)):
        loaded = store.load(arch)
        for key in sorted(loaded.entries):
            why = why_orphaned(key[0], (arch, key[1]), files, collected, produced, whole=whole)
            if why:
                found.append(StaticOrphan(arch, loaded.path, key, named_reason(why, "kernel")))
    return found


def prune_static(store: StaticStore, orphans: Iterable[StaticOrphan]) -> dict[Path, int]:
    """Remove static orphans from their files (one locked merge per file)."""
    by_arch: dict[str, list[tuple[str, str]]] = {}
    for orphan in orphans:
        by_arch.setdefault(orphan.arch, []).append(orphan.key)
    removed = {}
    for arch, keys in by_arch.items():
        removed[store.save(arch, [], remove=keys)] = len(keys)
    return removed
