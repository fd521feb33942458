"""Skip helpers for tests on a real GPU.

These tests need neither the plugin nor tomli-w: only the runtime layer, NumPy and the
vendor's Python bindings, so they run on a bare GPU machine as
`PYTHONPATH=. python3 -m pytest tests/gpu`. Without a GPU every test here skips with the
reason the backend gave (library missing, driver missing, no device), or fails where
GPUPERF_REQUIRE_TOOLCHAINS names "gpu" (tests/toolchains.py).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

from pytest_gpuperf.errors import DeviceUnavailable
from pytest_gpuperf.runtime import open_backend
from pytest_gpuperf.runtime.base import Backend
from tests.toolchains import GPU, skip_or_fail


def module_from_source(folder: Path, name: str, source: str) -> ModuleType:
    """`source` written to `folder`/`name`.py and imported: Triton and CuPy kernels in a module
    of its own file, as a user's are (Triton reads a kernel's source from its file)."""
    (folder / f"{name}.py").write_text(source)
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(folder))


def needs_cuda_torch_triton() -> None:
    """Skip unless torch and triton import and torch sees a CUDA GPU (the callable tests)."""
    for name in ("torch", "triton"):
        if importlib.util.find_spec(name) is None:
            pytest.skip(f"needs {name} (pip install {name})")
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU through torch (torch.cuda.is_available() is False)")


def open_backend_or_skip(name: str, device_index: int = 0) -> Backend:
    """The backend `name` on `device_index`, or a skip that says what was tried and why."""
    try:
        return open_backend(name, device_index)
    except DeviceUnavailable as unavailable:
        skip_or_fail(GPU, f"needs a GPU through the {name} backend: {unavailable}")


@pytest.fixture(scope="session", autouse=True)
def private_kernel_cache(tmp_path_factory):
    """Compile into a fresh cache: these tests must exercise the compiler, not old binaries."""
    previous = os.environ.get("GPUPERF_CACHE_DIR")
    os.environ["GPUPERF_CACHE_DIR"] = str(tmp_path_factory.mktemp("kernel-cache"))
    yield
    if previous is None:
        os.environ.pop("GPUPERF_CACHE_DIR", None)
    else:
        os.environ["GPUPERF_CACHE_DIR"] = previous


@pytest.fixture(scope="session")
def cuda_backend():
    backend = open_backend_or_skip("cuda")
    yield backend
    backend.close()
