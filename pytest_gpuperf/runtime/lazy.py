"""Names a package loads on first use (PEP 562), so importing it stays cheap.

The package's front door (`pytest_gpuperf`), the renderers (`pytest_gpuperf.report`) and the
runtime's interface types (`pytest_gpuperf.runtime`) each list where their names live; one
`__getattr__` made here imports that module when a name is first asked for. It sits in the
runtime layer, the lowest that every package using it may import.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A `__getattr__` for `package` that imports `package.<homes[name]>` when `name` is
    first asked for, and says which module lacks any other name."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{home}"), name)

    return __getattr__
