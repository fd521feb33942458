"""Load a script of bench/ as a module, for the tests that pin its logic.

bench/ is not a package: each script runs as `python bench/NAME.py`, with its own folder first
on sys.path, so that `from lab import ...` (the harness) and `from gq import ...` resolve. A
test loads it the same way: bench/ goes on sys.path (and stays, as the scripts themselves leave
it), and the module is registered in sys.modules under a name of its own before it runs,
because dataclasses look their module up by name. Where the script is not there (a source
distribution ships the package and its tests, not bench/), the test that needs it skips.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"


def load_script(name: str, path: Path | None = None) -> ModuleType:
    """bench/NAME.py (or the file at `path`) as a module named gpuperf_bench_NAME; loaded once
    per test process, so every test of a script sees the same module."""
    module_name = f"gpuperf_bench_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    script = path if path is not None else BENCH / f"{name}.py"
    if not script.is_file():  # the sdist ships the package and its tests, not bench/
        pytest.skip(f"{script.relative_to(REPO)} is not here", allow_module_level=True)
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(module_name, script)
    if spec is None or spec.loader is None:
        raise ImportError(f"{script}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module
