"""Loading the plugin is cheap: every pytest process (each xdist worker, every suite that
never uses gpu_bench) imports it through the entry point. NumPy, SciPy, the GPU runtimes and
the file libraries load on first use of gpu_bench or --gpuperf, not at import (it once cost
0.5-1.6 s a process, SciPy at import)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

HEAVY = {"scipy", "numpy", "cuda", "hip", "matplotlib", "filelock", "tomli_w", "msgpack"}


def loaded_after(statement: str) -> set[str]:
    names = "sorted({m.split('.')[0] for m in sys.modules})"
    probe = f"import sys, json; {statement}; print(json.dumps({names}))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout))


def test_importing_the_plugin_loads_nothing_heavy():
    assert not loaded_after("import pytest_gpuperf.plugin") & HEAVY


def test_a_pytest_run_without_gpuperf_loads_nothing_heavy(tmp_path):
    (tmp_path / "test_plain.py").write_text(
        "import sys\n\ndef test_plain():\n"
        "    print('LOADED', sorted({m.split('.')[0] for m in sys.modules}))\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-s",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:benchmark",
            "-p",
            "no:hypothesispytest",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("LOADED"))
    loaded = set(ast.literal_eval(line.removeprefix("LOADED ")))  # a printed list of names
    assert "pytest_gpuperf" in loaded  # the plugin was loaded (entry point or -p)...
    assert not loaded & HEAVY  # ...and cheaply


def test_every_lazy_name_resolves():
    """The lazy packages keep a name -> module table beside their type-checking imports: a
    name listed in __all__ must load from it."""
    import pytest_gpuperf
    from pytest_gpuperf import report

    for package in (pytest_gpuperf, report):
        for name in package.__all__:
            assert getattr(package, name) is not None, f"{package.__name__}.{name}"


def test_no_submodule_shadows_a_lazy_name():
    """A submodule named like a lazily exported name replaces it once something imports the
    submodule: pytest_gpuperf.open_device was the session's module inside every pytest run,
    and `gp.open_device("sim")` there said "'module' object is not callable"."""
    import pkgutil

    import pytest_gpuperf
    from pytest_gpuperf import report

    for package in (pytest_gpuperf, report):
        submodules = {info.name for info in pkgutil.iter_modules(package.__path__)}
        assert not submodules & set(package.__all__), package.__name__
