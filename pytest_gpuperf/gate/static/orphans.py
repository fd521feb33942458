"""Static orphans: entries of baselines/static/<arch>.toml that no test of this run produced,
found and pruned by the rule baselines use (baseline/orphans.py)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pytest_gpuperf.baseline.orphans import RunTests, keys_by_owner, orphaned_entries
from pytest_gpuperf.gate.static.store import StaticStore


@dataclass(frozen=True)
class StaticOrphan:
    """An entry of the static facts file of `arch` that no test of this run produced."""

    arch: str
    path: Path
    key: tuple[str, str]  # (test id, entry name)
    why: str  # "test" (not collected) | "kernel" (the test checked other kernel entries)


def find_static_orphans(
    store: StaticStore, archs: Iterable[str], run: RunTests
) -> list[StaticOrphan]:
    """The same rule as `find_orphans`, for baselines/static/<arch>.toml: `run.produced` maps
    the tests the static gate checked to the (arch, entry name) pairs it checked."""
    rows = orphaned_entries(store.load, archs, lambda arch, key: (arch, key[1]), "kernel", run)
    return [StaticOrphan(*row) for row in rows]


def prune_static(store: StaticStore, orphans: Iterable[StaticOrphan]) -> dict[Path, int]:
    """Remove static orphans from their files (one locked merge per file)."""
    removed = {}
    for arch, keys in keys_by_owner((o.arch, o.key) for o in orphans).items():
        removed[store.save(arch, [], remove=keys)] = len(keys)
    return removed
