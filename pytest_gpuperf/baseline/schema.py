"""The TOML layout of a baseline file: parse and validate (schema 2, and schema 1 migrated on
load), and render.

The files are meant to be read in review and edited by hand, so loading checks everything
(schema version, keys, types, ranges, duplicates) and names the line of the first problem.
docs/baselines.md documents the layout.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from pytest_gpuperf.baseline.model import (
    SOURCES,
    SPREAD_BASES,
    BaselineEntry,
    BoardSpread,
    Replaced,
    SaveRecord,
    significant,
    spreads_of,
)
from pytest_gpuperf.baseline.toml_check import (
    Checker,
    Invalid,
    Lines,
    at_entry,
    file_entries,
    file_text,
    first_at,
    tomllib,
)
from pytest_gpuperf.engine.results import CACHE_MODES

SCHEMA_VERSION = 2
READABLE_SCHEMAS = (1, 2)
# Above 1.5 of the HBM peak a cold or rotating measurement has declared the wrong bytes;
# hot runs may legitimately stream from L2 / Infinity Cache at several times the HBM peak.
MAX_EFFICIENCY = {"cold": 1.5, "rotate": 1.5, "hot": 100.0}


def parse(text: str, device_key: str) -> tuple[int, dict[tuple[str, str, str], BaselineEntry]]:
    """(the file's schema version, its entries by key); raises TOMLDecodeError or Invalid."""
    schema, tables = file_entries(
        tomllib.loads(text),
        "device",
        device_key,
        schema_problem=_schema_problem,
        owner_problem=lambda device: (
            f'device = "{device}" but the file is for device "{device_key}" (its name); '
            "baselines of one device must not be copied to another's file"
        ),
    )
    read = _entry_v1 if schema == 1 else _entry_v2
    entries: dict[tuple[str, str, str], BaselineEntry] = {}
    first_seen: dict[tuple[str, str, str], int] = {}
    for index, table in enumerate(tables):
        entry = read(table, index)
        if entry.key in entries:
            first = first_seen[entry.key]
            raise Invalid(
                f"duplicate entry for test {entry.test_id!r} measurement {entry.name!r} "
                f"cache {entry.cache!r} (entry #{index + 1} repeats entry #{first + 1}); "
                "delete one of them",
                at_entry(index, "id"),
                also=first_at(first),
            )
        entries[entry.key] = entry
        first_seen[entry.key] = index
    return schema, entries


def _schema_problem(schema: int) -> str | None:
    if schema in READABLE_SCHEMAS:
        return None
    newer = " (written by a newer pytest-gpuperf: upgrade it)" if schema > SCHEMA_VERSION else ""
    return (
        f"schema = {schema} is not supported; this pytest-gpuperf reads schemas "
        f"{', '.join(map(str, READABLE_SCHEMAS))}{newer}"
    )


def render(device_key: str, entries: Iterable[BaselineEntry]) -> str:
    """The file text: a short header, then entries sorted by (test id, name, cache)."""
    header = (
        f'# pytest-gpuperf baselines for device "{device_key}" (schema {SCHEMA_VERSION}, '
        "docs/baselines.md).\n"
        "# Written by `pytest --gpuperf --gpuperf-save`; hand edits are validated on load.\n"
        "# The gate compares with efficiency; its band pools run_spread's saves with the\n"
        "# file's other entries. Each [[entry.save]] is one save of the same code, newest\n"
        "# last. Saving rewrites the file: comments other than this header are not kept.\n\n"
    )
    tables = [_entry_table(e) for e in sorted(entries, key=lambda e: e.key)]
    text = file_text(header, "device", device_key, SCHEMA_VERSION, tables)
    return _NUMBER_ARRAY.sub(_one_line_array, text)


# tomli-w puts every array item on its own line; [x, y, z] reads better for the short numeric
# arrays here (grid, block, efficiency_ci). Only arrays of plain numbers are joined.
_NUMBER_ARRAY = re.compile(r"\[\n((?:[ ]+[-+0-9.eE]+,\n)+)\]")


def _one_line_array(match: re.Match[str]) -> str:
    items = [item.strip().rstrip(",") for item in match.group(1).splitlines()]
    return "[" + ", ".join(items) + "]"


def _entry_table(entry: BaselineEntry) -> dict[str, Any]:
    table: dict[str, Any] = {"id": entry.test_id, "name": entry.name, "cache": entry.cache}
    if entry.kernel:
        table["kernel"] = entry.kernel
    for name in _ENTRY_ALWAYS:
        table[name] = _toml_value(getattr(entry, name))
    for name in _ENTRY_OPTIONAL:
        value = getattr(entry, name)
        if value:  # TOML has no null; defaults are left out
            table[name] = _toml_value(value)
    if entry.saves:
        table["save"] = [_save_table(save) for save in entry.saves]
    boards = entry.boards
    if boards and boards != spreads_of(entry.saves):  # only what the saves do not say
        table["board_spread"] = [
            {
                "board": b.board,
                "saves": b.saves,
                "mean_log": significant(b.mean_log, 12),
                "squares": significant(b.squares, 8),
            }
            for b in boards
        ]
    if entry.replaced:
        table["replaced"] = [_replaced_table(r) for r in entry.replaced]
    return table


# The BaselineEntry fields an entry table holds under their own names, in the file's order:
# always, then only where they are not their default.
_ENTRY_ALWAYS = (
    "source",
    "efficiency",
    "efficiency_ci",
    "run_spread",
    "spread_basis",
    "bandwidth_bps",
    "time_s",
    "bytes_moved",
)
_ENTRY_OPTIONAL = ("prior_spread", "grid", "block", "reported_in", "note")


def _toml_value(value: Any) -> Any:
    """A field's value as TOML writes it: a tuple (an interval, a grid) as an array."""
    return list(value) if isinstance(value, tuple) else value


def _replaced_table(replaced: Replaced) -> dict[str, Any]:
    table: dict[str, Any] = {
        "efficiency": replaced.efficiency,
        "run_spread": replaced.run_spread,
        "saves": replaced.saves,
    }
    for name in ("commit", "when", "board"):
        if getattr(replaced, name):
            table[name] = getattr(replaced, name)
    return table


def _save_table(save: SaveRecord) -> dict[str, Any]:
    table: dict[str, Any] = {
        "efficiency": save.efficiency,
        "efficiency_ci": list(save.efficiency_ci),
        "time_s": save.time_s,
    }
    for name in _SAVE_OPTIONAL:
        value = getattr(save, name)
        if value not in ("", 0, False):  # TOML has no null; defaults are left out
            table[name] = value
    return table


_SAVE_OPTIONAL = (
    "when",
    "commit",
    "fingerprint",
    "samples",
    "device_name",
    "backend",
    "simulated",
    "runtime_version",
    "driver_version",
    "plugin_version",
    "note",
    "board",
    "host",
)


# -- schema 2 ---------------------------------------------------------------------------------

_ENTRY_KEYS_V2 = {
    "id",
    "name",
    "cache",
    "kernel",
    "source",
    "efficiency",
    "efficiency_ci",
    "run_spread",
    "spread_basis",
    "prior_spread",
    "bandwidth_bps",
    "time_s",
    "bytes_moved",
    "grid",
    "block",
    "reported_in",
    "note",
    "save",
    "board_spread",
    "replaced",
}


def _entry_v2(table: dict[str, Any], index: int) -> BaselineEntry:
    check = _entry_checker(table, index)
    check.reject_unknown(_ENTRY_KEYS_V2)
    common = _common_fields(check)
    spread_basis = check.optional("spread_basis", str, "prior")
    if spread_basis not in SPREAD_BASES:
        raise check.invalid(
            "spread_basis", f"must be one of {', '.join(SPREAD_BASES)}, not {spread_basis!r}"
        )
    saves_raw = check.optional("save", list, [])
    if not all(isinstance(s, dict) for s in saves_raw):
        raise check.invalid("save", "must be an array of tables ([[entry.save]])")
    saves = tuple(
        _save_from_table(save, index, number, common["cache"])
        for number, save in enumerate(saves_raw)
    )
    reported_in = check.optional("reported_in", str, "")
    if common["source"] == "reported" and not reported_in:
        raise check.invalid(
            "source",
            'is "reported" but the entry has no reported_in naming the document and figure '
            "the number comes from",
        )
    if common["source"] == "measured" and spread_basis == "history" and len(saves) < 2:
        raise check.invalid(
            "spread_basis", '"history" needs at least two [[entry.save]] tables to learn from'
        )
    prior_spread = (
        check.number("prior_spread", low=0.0, high=1.0, low_inclusive=True)
        if "prior_spread" in table
        else 0.0
    )
    return BaselineEntry(
        **common,
        spread_basis=spread_basis,
        prior_spread=prior_spread,
        saves=saves,
        reported_in=reported_in,
        note=check.optional("note", str, ""),
        boards=_board_spreads(check, index, saves),
        replaced=_replaced(check, index, common["cache"]),
    )


def _sub_checkers(check: Checker, index: int, key: str) -> list[Checker]:
    """A checker per [[entry.<key>]] table of entry `index`, labelled with its number and
    locating its keys in the file (board_spread and replaced are read the same way)."""
    raw = check.optional(key, list, [])
    if not all(isinstance(item, dict) for item in raw):
        raise check.invalid(key, f"must be an array of tables ([[entry.{key}]])")
    return [
        Checker(table, f"{check.label} {key} #{number + 1}", _table_locator(index, key, number))
        for number, table in enumerate(raw)
    ]


def _table_locator(
    index: int, name: str, number: int
) -> Callable[[Lines], Callable[[str], int | None]]:
    """Where a key of the `number`-th [[entry.<name>]] of entry `index` is."""
    return lambda lines: lambda key: lines.table_key(index, name, number, key)


def _board_spreads(
    check: Checker, index: int, saves: tuple[SaveRecord, ...]
) -> tuple[BoardSpread, ...]:
    """[[entry.board_spread]]: every save of the code per board (older saves that slid out of
    the history included); each must count at least the kept saves of its board."""
    spreads = []
    for item in _sub_checkers(check, index, "board_spread"):
        item.reject_unknown({"board", "saves", "mean_log", "squares"})
        board = item.optional("board", str, "")
        count = item.required("saves", int)
        kept = sum(1 for save in saves if save.board == board)
        if count < max(kept, 1):
            raise item.invalid(
                "saves", f"must count at least the {max(kept, 1)} kept saves of its board"
            )
        spreads.append(
            BoardSpread(
                board,
                count,
                float(item.required("mean_log", float)),
                item.number("squares", low=0.0, low_inclusive=True),
            )
        )
    return tuple(spreads)


def _replaced(check: Checker, index: int, cache: str) -> tuple[Replaced, ...]:
    """[[entry.replaced]]: the baselines this entry replaced, oldest first."""
    trail = []
    for item in _sub_checkers(check, index, "replaced"):
        item.reject_unknown({"efficiency", "run_spread", "saves", "commit", "when", "board"})
        limit = MAX_EFFICIENCY[cache]
        saves = item.required("saves", int)
        if saves < 1:
            raise item.invalid("saves", f"must be >= 1, got {saves}")
        trail.append(
            Replaced(
                efficiency=item.number("efficiency", low=0.0, high=limit),
                run_spread=item.number("run_spread", low=0.0, high=1.0, low_inclusive=True),
                saves=saves,
                commit=item.optional("commit", str, ""),
                when=item.optional("when", str, ""),
                board=item.optional("board", str, ""),
            )
        )
    return tuple(trail)


def _save_from_table(table: dict[str, Any], index: int, number: int, cache: str) -> SaveRecord:
    check = Checker(
        table,
        f"entry #{index + 1} save #{number + 1}",
        lambda lines: lambda key: lines.save_key(index, number, key),
    )
    known = {"efficiency", "efficiency_ci", "time_s", *_SAVE_OPTIONAL}
    check.reject_unknown(known)
    limit = MAX_EFFICIENCY[cache]
    efficiency = check.number("efficiency", low=0.0, high=limit, why=f"for cache={cache!r}")
    ci = check.interval("efficiency_ci", high=limit)
    values: dict[str, Any] = {}
    for name in _SAVE_OPTIONAL:
        kind = {"samples": int, "simulated": bool}.get(name, str)
        values[name] = check.optional(name, kind, False if kind is bool else kind())
    if values["samples"] < 0:
        raise check.invalid("samples", f"must be >= 0, got {values['samples']}")
    return SaveRecord(
        efficiency=efficiency,
        efficiency_ci=ci,
        time_s=check.number("time_s", low=0.0),
        **values,
    )


# -- schema 1 (read and migrated: each measured entry becomes a history of one save) ----------

_ENTRY_KEYS_V1 = {
    "id",
    "name",
    "kernel",
    "efficiency",
    "efficiency_ci",
    "run_spread",
    "bandwidth_bps",
    "time_s",
    "bytes_moved",
    "cache",
    "grid",
    "block",
    "source",
    "provenance",
}
_PROVENANCE_V1 = {
    "when": str,
    "commit": str,
    "device_name": str,
    "backend": str,
    "simulated": bool,
    "runtime_version": str,
    "driver_version": str,
    "plugin_version": str,
    "samples": int,
    "reported_in": str,
    "note": str,
}


def _entry_v1(table: dict[str, Any], index: int) -> BaselineEntry:
    check = _entry_checker(table, index)
    check.reject_unknown(_ENTRY_KEYS_V1)
    common = _common_fields(check)
    provenance = table.get("provenance", {})
    label = check.label
    if not isinstance(provenance, dict):
        raise Invalid(f"{label}: provenance must be a table", at_entry(index, "provenance"))
    facts = Checker(
        provenance,
        f"{label} provenance",
        lambda lines: lambda key: lines.provenance_key(index, key),
    )
    facts.reject_unknown(set(_PROVENANCE_V1))
    values = {
        name: facts.optional(name, kind, False if kind is bool else kind())
        for name, kind in _PROVENANCE_V1.items()
    }
    if values["samples"] < 0:
        raise facts.invalid("samples", f"must be >= 0, got {values['samples']}")
    reported_in = values.pop("reported_in")
    if common["source"] == "reported":
        if not reported_in:
            raise check.invalid(
                "source",
                'is "reported" but [entry.provenance] has no reported_in naming the document '
                "and figure the number comes from",
            )
        return BaselineEntry(**common, reported_in=reported_in, note=values["note"])
    save = SaveRecord(
        efficiency=common["efficiency"],
        efficiency_ci=common["efficiency_ci"],
        time_s=common["time_s"],
        **values,
    )
    return BaselineEntry(**common, saves=(save,))


# -- shared checks -------------------------------------------------------------------------


def _entry_checker(table: dict[str, Any], index: int) -> Checker:
    label = f"entry #{index + 1}"
    if isinstance(table.get("id"), str) and isinstance(table.get("name"), str):
        label += f" (test {table['id']!r}, measurement {table['name']!r})"
    return Checker(table, label, lambda lines: lambda key: lines.entry_key(index, key))


def _common_fields(check: Checker) -> dict[str, Any]:
    test_id = check.required("id", str, nonempty=True)
    name = check.required("name", str, nonempty=True)
    cache = check.required("cache", str)
    if cache not in CACHE_MODES:
        raise check.invalid("cache", f"must be one of {', '.join(CACHE_MODES)}, not {cache!r}")
    limit = MAX_EFFICIENCY[cache]
    efficiency = check.number("efficiency", low=0.0, high=limit, why=f"for cache={cache!r}")
    ci = check.interval("efficiency_ci", high=limit)
    run_spread = check.number("run_spread", low=0.0, high=1.0, low_inclusive=True)
    bytes_moved = check.required("bytes_moved", int)
    if bytes_moved <= 0:
        raise check.invalid("bytes_moved", f"must be a positive integer, got {bytes_moved}")
    source = check.optional("source", str, "measured")
    if source not in SOURCES:
        raise check.invalid("source", f"must be one of {', '.join(SOURCES)}, not {source!r}")
    return {
        "test_id": test_id,
        "name": name,
        "cache": cache,
        "efficiency": efficiency,
        "efficiency_ci": ci,
        "run_spread": run_spread,
        "bandwidth_bps": check.number("bandwidth_bps", low=0.0),
        "time_s": check.number("time_s", low=0.0),
        "bytes_moved": bytes_moved,
        "source": source,
        "kernel": check.optional("kernel", str, ""),
        "grid": check.dim3("grid"),
        "block": check.dim3("block"),
    }
