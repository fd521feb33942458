"""Loading the plugin is cheap: every pytest process (each xdist worker, every suite that
never uses gpu_bench) imports it through the entry point. NumPy, SciPy, the GPU runtimes and
the file libraries load on first use of gpu_bench or --gpuperf, not at import (it once cost
0.5-1.6 s a process, SciPy at import)."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

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
    from pytest_gpuperf import report, runtime

    for package in (pytest_gpuperf, report, runtime):
        for name in package.__all__:
            assert getattr(package, name) is not None, f"{package.__name__}.{name}"


def test_a_name_no_lazy_package_has_is_an_attribute_error_naming_it():
    """One __getattr__ (runtime/lazy.py) serves the three lazy packages: a name none of them
    lists is the AttributeError Python gives for any module, naming the package."""
    import pytest_gpuperf
    from pytest_gpuperf import report, runtime

    for package in (pytest_gpuperf, report, runtime):
        wanted = f"module {package.__name__!r} has no attribute 'measure_everything'"
        with pytest.raises(AttributeError, match=re.escape(wanted)):
            package.measure_everything  # noqa: B018


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


SMOKE_KERNEL = """\
#include "gpuperf.h"
GPUPERF_KERNEL void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""
SMOKE_CONFTEST = """\
from pytest_gpuperf import simulate


@simulate.model("vadd.hip", "vector_add")
def vector_add(args, launch):
    a, b, c, n = args
    c[:n] = a[:n] + b[:n]
"""
SMOKE_TEST = """\
import sys

import numpy as np


def test_add(gpu_bench):
    n = 4096
    a = np.ones(n, np.float32)
    kernel = gpu_bench.kernel("vadd.hip", "vector_add")
    da, dc = gpu_bench.to_device(a), gpu_bench.empty(n)
    gpu_bench(kernel, grid=n // 256, block=256, args=(da, da, dc, n), reads=(a, a), writes=(a,))
    assert (gpu_bench.from_device(dc, np.float32, n) == 2).all()
    print("LOADED", sorted({m.split('.')[0] for m in sys.modules}))
"""


def test_a_smoke_run_of_gpu_bench_loads_no_scipy(tmp_path):
    """Without --gpuperf a test launches its kernel once and checks it: nothing is timed or
    judged, so the statistics' SciPy (0.5-2.7 s a process on the H100 machine) stays out."""
    (tmp_path / "vadd.hip").write_text(SMOKE_KERNEL)
    (tmp_path / "conftest.py").write_text(SMOKE_CONFTEST)
    (tmp_path / "test_smoke.py").write_text(SMOKE_TEST)
    root = str(Path(__file__).resolve().parents[2])
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-s", "-q", "-p", "pytest_gpuperf.plugin",
         "-p", "no:cacheprovider", "--gpuperf-backend=sim", str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path,
        env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
             "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("LOADED"))
    loaded = set(ast.literal_eval(line.removeprefix("LOADED ")))
    assert "numpy" in loaded and "pytest_gpuperf" in loaded
    assert not loaded & {"scipy", "matplotlib"}
