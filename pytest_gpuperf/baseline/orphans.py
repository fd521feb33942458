"""Baseline entries no test produced: renamed kernels and tests leave their old entries behind,
and the new name then has "no baseline" while the old number sits unused.

An entry is an orphan when its test file was collected in this run and either its test id
was not collected at all (the test was renamed or removed), or its test ran and measured, but
not that (measurement name, cache mode) (the kernel or measurement was renamed). Tests that were
deselected, skipped or failed before measuring say nothing about their entries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_gpuperf.baseline import BaselineStore, Key


@dataclass(frozen=True)
class Orphan:
    """An entry of `device_key`'s file that no test of this run produced."""

    device_key: str
    path: Path
    key: Key  # (test id, measurement name, cache mode)
    why: str  # "test" (not collected) | "measurement" (the test measured other things)


def find_orphans(
    store: BaselineStore,
    device_keys: Iterable[str],
    *,
    collected: set[str],
    produced: Mapping[str, set[tuple[str, str]]],
) -> list[Orphan]:
    """The orphans among the entries of `device_keys`' files.

    `collected` holds every test id collected (deselected ones too); `produced` maps the tests
    that measured something to the (name, cache) pairs they measured."""
    files = {test_id.split("::", 1)[0] for test_id in collected}
    found = []
    for device_key in sorted(set(device_keys)):
        loaded = store.load(device_key)
        for key in sorted(loaded.entries):
            test_id, name, cache = key
            why = why_orphaned(test_id, (name, cache), files, collected, produced)
            if why:
                found.append(Orphan(device_key, loaded.path, key, named_reason(why, "measurement")))
    return found


def why_orphaned(
    test_id: str,
    made: tuple[str, str],
    files: set[str],
    collected: set[str],
    produced: Mapping[str, set[tuple[str, str]]],
) -> str:
    """Why an entry is an orphan: "test" (its test was not collected), "other" (its test
    produced other entries) or "" (not an orphan, or this run did not collect its file)."""
    if test_id.split("::", 1)[0] not in files:
        return ""
    if test_id not in collected:
        return "test"
    return "other" if test_id in produced and made not in produced[test_id] else ""


def prune(store: BaselineStore, orphans: Iterable[Orphan]) -> dict[Path, int]:
    """Remove the orphans from their files (one locked merge per file); entries removed per
    file."""
    by_device: dict[str, list[Key]] = {}
    for orphan in orphans:
        by_device.setdefault(orphan.device_key, []).append(orphan.key)
    removed = {}
    for device_key, keys in by_device.items():
        path = store.update(device_key, [], remove=keys)
        removed[path] = len(keys)
    return removed


def named_reason(why: str, other: str) -> str:
    return other if why == "other" else why
