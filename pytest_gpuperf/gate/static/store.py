"""Stored static facts: `baselines/static/<arch>.toml`, one entry per (test id, kernel entry).

The static gate keeps its facts out of the timing baselines: a subfolder, so the timing
store's `baselines/*.toml` never sees these files, and one file per architecture, as the
timing store keeps one per device. An entry is flat - the test, the entry's name, the
source it was compiled from, where the facts come from (`origin`: "clang" for the static
gate's own offline build, "loaded" for the code object a GPU run actually loaded), when and
at which commit, then every `StaticFacts` field - so a review diff shows "vgprs = 24" ->
"vgprs = 40" on one line.

Loading validates everything and names file:line (the timing store's checker and line
finder); saving merges under `<file>.lock`, re-reads inside the lock, writes through a
temporary file and `os.replace`, and never follows a symbolic link (the timing store's
helpers). No pytest here.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The timing store's file-safety and schema helpers, shared so both stores behave alike.
from pytest_gpuperf.baseline.store import (
    LOCK_TIMEOUT_S,
    StatCache,
    _refuse_link,
    read_checked,
    require_tomli_w,
    write_merged,
)
from pytest_gpuperf.baseline.toml_check import (
    Checker,
    Invalid,
    Lines,
    at_entry,
    file_entries,
    file_text,
    tomllib,
)
from pytest_gpuperf.errors import BaselineError, ConfigError
from pytest_gpuperf.gate.static.errors import StaticFactsError
from pytest_gpuperf.gate.static.facts import StaticFacts

STATIC_SCHEMA = 1
STATIC_DIR = "static"
ORIGINS = ("clang", "loaded")  # the gate's offline build | the code object a GPU run loaded
_ARCH_FILE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(?::[A-Za-z0-9_]+[+-])*$")
_ENTRY_KEYS = {"id", "name", "source", "origin", "when", "commit"}
_FACT_KEYS = {f.name for f in dataclasses.fields(StaticFacts)}
Key = tuple[str, str]  # (test id, entry name)


@dataclass(frozen=True)
class StaticEntry:
    """The stored facts of one kernel entry of one test."""

    test_id: str
    name: str
    facts: StaticFacts
    source: str = ""  # the kernel's file, relative to the rootdir where it can be
    origin: str = "clang"
    when: str = ""
    commit: str = ""

    @property
    def key(self) -> Key:
        return (self.test_id, self.name)


@dataclass(frozen=True)
class StaticFile:
    """The validated contents of one arch's file (empty when it does not exist)."""

    path: Path
    arch: str
    entries: Mapping[Key, StaticEntry] = field(default_factory=dict)

    def get(self, test_id: str, name: str) -> StaticEntry | None:
        return self.entries.get((test_id, name))


class StaticStore:
    """`<baseline dir>/static/`: loads cached per file (revalidated when it changes)."""

    def __init__(
        self, baseline_dir: str | os.PathLike[str], *, lock_timeout_s: float = LOCK_TIMEOUT_S
    ) -> None:
        self.directory = Path(baseline_dir) / STATIC_DIR
        self.lock_timeout_s = lock_timeout_s
        self._cache: StatCache[StaticFile] = StatCache()

    def path_for(self, arch: str) -> Path:
        if not _ARCH_FILE.match(arch):
            raise ConfigError(f"architecture {arch!r} cannot name a static facts file")
        return self.directory / f"{arch}.toml"

    def load(self, arch: str) -> StaticFile:
        """The arch's stored facts; BaselineError (file:line) when the file is broken."""
        path = self.path_for(arch)
        return self._cache.load(
            path, read=lambda: _read(path, arch), missing=lambda: StaticFile(path, arch)
        )

    def save(
        self, arch: str, entries: Iterable[StaticEntry], *, remove: Iterable[Key] = ()
    ) -> Path:
        """Merge `entries` into the arch's file (same keys replaced, the keys in `remove`
        dropped (orphans pruned), every other entry kept), atomically under `<file>.lock`; a
        broken file on disk is left byte-identical."""
        path = self.path_for(arch)
        new: dict[Key, StaticEntry] = {}
        for entry in entries:
            if entry.facts.arch != arch:
                raise BaselineError(
                    str(path), f"not saved: facts for {entry.facts.arch} in the {arch} file"
                )
            new[entry.key] = entry
        dropped = set(remove)
        require_tomli_w(path, "static facts")
        for folder in (path.parent.parent, path.parent):
            _refuse_link(folder)

        def merged_entries() -> Iterable[StaticEntry]:
            merged = dict(_read(path, arch).entries) if path.exists() else {}
            for key in dropped:
                merged.pop(key, None)
            merged.update(new)
            return merged.values()

        write_merged(
            path,
            arch,
            merged_entries,
            render,
            parse,
            what="static facts",
            lock_timeout_s=self.lock_timeout_s,
            invalid=(Invalid, StaticFactsError),
        )
        self._cache.forget(path)
        return path


# -- the TOML layout ---------------------------------------------------------------------------


def render(arch: str, entries: Iterable[StaticEntry]) -> str:
    """The file text: a header, then entries sorted by (test id, name)."""
    header = (
        f"# pytest-gpuperf static facts for {arch} (schema {STATIC_SCHEMA}, "
        "docs/static-gate.md).\n"
        f'# Written by `pytest --gpuperf-static={arch} --gpuperf-save` (origin = "clang") or by\n'
        '# a --gpuperf-save on a GPU of this arch (origin = "loaded": the code object the\n'
        "# HIP runtime loaded). Hand edits are validated on load; saving rewrites the file.\n\n"
    )
    tables = [_entry_table(e) for e in sorted(entries, key=lambda e: e.key)]
    return file_text(header, "arch", arch, STATIC_SCHEMA, tables)


def _entry_table(entry: StaticEntry) -> dict[str, Any]:
    table: dict[str, Any] = {"id": entry.test_id, "name": entry.name}
    for key in ("source", "origin", "when", "commit"):
        value = getattr(entry, key)
        if value:
            table[key] = value
    table.update(entry.facts.to_dict())
    return table


def _schema_problem(schema: int) -> str | None:
    if schema == STATIC_SCHEMA:
        return None
    return (
        f"schema = {schema} is not supported; this pytest-gpuperf reads static facts of "
        f"schema {STATIC_SCHEMA}" + (" (upgrade it)" if schema > STATIC_SCHEMA else "")
    )


def parse(text: str, arch: str) -> dict[Key, StaticEntry]:
    """The entries of a file's text; raises TOMLDecodeError, Invalid or StaticFactsError."""
    _, tables = file_entries(
        tomllib.loads(text),
        "arch",
        arch,
        schema_problem=_schema_problem,
        owner_problem=lambda named: (
            f'arch = "{named}" but the file is for "{arch}" (its name); facts of one '
            "architecture must not be copied to another's file"
        ),
    )
    entries: dict[Key, StaticEntry] = {}
    for index, table in enumerate(tables):
        entry = _entry(table, index, arch)
        if entry.key in entries:
            raise Invalid(
                f"duplicate entry for test {entry.test_id!r} kernel entry {entry.name!r} "
                f"(entry #{index + 1}); delete one of them",
                at_entry(index, "id"),
            )
        entries[entry.key] = entry
    return entries


def _entry(table: dict[str, Any], index: int, arch: str) -> StaticEntry:
    label = f"entry #{index + 1}"
    if isinstance(table.get("id"), str) and isinstance(table.get("name"), str):
        label += f" (test {table['id']!r}, kernel entry {table['name']!r})"
    check = Checker(table, label, lambda lines: lambda key: lines.entry_key(index, key))
    check.reject_unknown(_ENTRY_KEYS | _FACT_KEYS)
    test_id = check.required("id", str, nonempty=True)
    name = check.required("name", str, nonempty=True)
    origin = check.optional("origin", str, "clang")
    if origin not in ORIGINS:
        raise check.invalid("origin", f"must be one of {', '.join(ORIGINS)}, not {origin!r}")
    try:
        facts = StaticFacts.from_dict({k: v for k, v in table.items() if k in _FACT_KEYS})
    except StaticFactsError as problem:
        key = problem.field if problem.field in table else ""

        def locate(lines: Lines) -> int | None:
            return lines.entry_key(index, key or "")

        raise Invalid(f"{label}: {problem}", locate) from None
    if facts.arch != arch:
        raise check.invalid("arch", f'is "{facts.arch}" in the file for "{arch}"')
    for quantity in ("block_threads", "max_block_threads"):
        if getattr(facts, quantity) < 1:
            raise check.invalid(quantity, "must be at least 1")
    return StaticEntry(
        test_id=test_id,
        name=name,
        facts=facts,
        source=check.optional("source", str, ""),
        origin=origin,
        when=check.optional("when", str, ""),
        commit=check.optional("commit", str, ""),
    )


def _read(path: Path, arch: str) -> StaticFile:
    entries = read_checked(path, "a static facts file", lambda text: parse(text, arch))
    return StaticFile(path, arch, entries)


__all__ = [
    "ORIGINS",
    "STATIC_SCHEMA",
    "StaticEntry",
    "StaticFile",
    "StaticStore",
    "parse",
    "render",
]
