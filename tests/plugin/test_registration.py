"""The plugin loads exactly once, with or without its pytest11 entry point.

On the GPU machine the package is not installed and tests run as
`PYTHONPATH=. python3 -m pytest`; the root conftest then registers the plugin itself.
PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 reproduces "no entry point" on a machine where it is
installed.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def pytest_env(*, autoload: bool) -> dict[str, str]:
    """This tree on the path, with or without pytest's entry-point autoload."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PYTEST_ADDOPTS", None)
    # under -n, this test's worker's variables would make the child pytest an xdist worker
    # too: pytest-benchmark then warns that it disables itself, and the test wants no warning
    for name in [name for name in env if name.startswith("PYTEST_XDIST_")]:
        del env[name]
    if autoload:
        env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    else:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


def run_pytest(*args: str, autoload: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:hypothesispytest",
            *args,
        ],
        cwd=REPO,
        env=pytest_env(autoload=autoload),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("autoload", [True, False], ids=["entry-point", "root-conftest"])
def test_plugin_is_registered_once(autoload):
    # Registered twice, the second registration fails at start-up ("option names already
    # added"); not registered, the fixture is missing.
    done = run_pytest("--fixtures", "tests/plugin/test_registration.py", autoload=autoload)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("gpu_bench -- ") == 1


@pytest.mark.parametrize("autoload", [True, False], ids=["entry-point", "dash-p"])
def test_loading_the_plugin_warns_nothing(tmp_path, autoload):
    # The plugin registers its hook modules as plugins; one imported before pytest registers
    # it cannot be assertion-rewritten, and every run of a user without the package installed
    # (`-p pytest_gpuperf.plugin`) printed a PytestAssertRewriteWarning.
    if autoload and not _installed():
        pytest.skip("pytest-gpuperf is not installed here: no entry point to load it")
    (tmp_path / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    load = () if autoload else ("-p", "pytest_gpuperf.plugin")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *load, "test_nothing.py"],
        cwd=tmp_path,
        env=pytest_env(autoload=autoload),
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "1 passed" in output and "gpuperf" in output, output
    assert "Warning" not in output, output


def _installed() -> bool:
    return any(
        entry.value.split(":")[0] == "pytest_gpuperf.plugin"
        for entry in importlib.metadata.entry_points(group="pytest11")
    )
