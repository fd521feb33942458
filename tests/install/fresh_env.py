"""A fresh virtual environment as a new user's machine has it, for the install tests: nothing
of this checkout on the path (no PYTHONPATH, none of the suite's PYTEST_ or GPUPERF_
variables), the environment's scripts first on PATH, and the plugin's caches and locks in
the test's own folder. tests/install/test_quickstart.py builds the same by hand."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def clean_environ(folder: Path, venv: Path | None = None) -> dict[str, str]:
    """This process's environment less what would let the checkout in, with `venv` first on
    PATH (and active, as `source venv/bin/activate` makes it), git's identity set, and the
    plugin's cache and lock folders under `folder`."""
    environ = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST_", "GPUPERF_", "VIRTUAL_ENV")) and key != "PYTHONPATH"
    }
    environ.update(
        GIT_IDENTITY,
        GPUPERF_CACHE_DIR=str(folder / "cache"),
        GPUPERF_LOCK_DIR=str(folder / "locks"),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        COLUMNS="100",
        # A CI container's checkout belongs to another user: git (run by pip) would refuse to
        # read it ("dubious ownership") without this, as for any repository URL one trusts
        GIT_CONFIG_COUNT="1",
        GIT_CONFIG_KEY_0="safe.directory",
        GIT_CONFIG_VALUE_0="*",
    )
    if venv is not None:
        environ.update(
            PATH=f"{venv / 'bin'}{os.pathsep}{environ.get('PATH', '')}", VIRTUAL_ENV=str(venv)
        )
    return environ


def make_venv(path: Path) -> Path:
    """A new virtual environment at `path`, with the pip it starts with."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=300)
    return path


def shell(
    command: str, cwd: Path, environ: dict[str, str], timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """`command` as bash runs a line of a README or a workflow's `run:`."""
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
