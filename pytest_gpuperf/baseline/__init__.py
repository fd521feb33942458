"""Baseline files: `baselines/<device-key>.toml`, one entry per (test id, measurement, cache).

- model.py: entries and the history of saves each keeps;
- pool.py: the spread the file's other entries lend an entry;
- schema.py: the TOML layout, validated on load (schema 1 files migrate to schema 2);
- toml_check.py: the checks both stores' hand-edited TOML files share;
- store.py: the directory, locked atomic merges.

No pytest here, so scripts can read and write baselines too. docs/baselines.md documents it.
"""

from pytest_gpuperf.baseline.model import (
    SOURCES,
    BaselineEntry,
    SaveRecord,
    significant,
    utc_now,
)
from pytest_gpuperf.baseline.schema import MAX_EFFICIENCY, SCHEMA_VERSION, parse, render
from pytest_gpuperf.baseline.store import LOCK_TIMEOUT_S, BaselineFile, BaselineStore, Key

__all__ = [
    "LOCK_TIMEOUT_S",
    "MAX_EFFICIENCY",
    "SCHEMA_VERSION",
    "SOURCES",
    "BaselineEntry",
    "BaselineFile",
    "BaselineStore",
    "Key",
    "SaveRecord",
    "parse",
    "render",
    "significant",
    "utc_now",
]
