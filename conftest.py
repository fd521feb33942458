"""Root conftest: load the gpuperf plugin when its entry point does not.

Installed (`pip install -e .`), the plugin arrives through the `pytest11` entry point. On the
GPU machine the package is not installed and the tests run as
`PYTHONPATH=. python3 -m pytest ...`: there is no entry point, so this conftest names the
plugin module itself. Naming it when the entry point has already loaded it would register it
twice, hence the check. The plugin's own tests use pytester (`-p pytester` in pyproject).
"""

from __future__ import annotations

import importlib.metadata
import os

PLUGIN_MODULE = "pytest_gpuperf.plugin"


def _entry_point_loads_plugin() -> bool:
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return False
    return any(
        entry.value.split(":")[0] == PLUGIN_MODULE
        for entry in importlib.metadata.entry_points(group="pytest11")
    )


pytest_plugins = [] if _entry_point_loads_plugin() else [PLUGIN_MODULE]
