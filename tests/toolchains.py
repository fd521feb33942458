"""The optional toolchains the plugin's own tests use, and how a test asks for one.

The README's test command must be green on a machine that has only Python and git: a test
that needs clang-19, Debian's ROCm 5.2 HIP runtime (hiprtc), the ROCm device libraries,
hip-python, NVRTC or headless Chromium with selenium skips when it is missing, with one
reason per toolchain (the same words for every test, so the summary shows one line per
missing toolchain) that names what is missing and the command that installs it. CI installs
them all and sets GPUPERF_REQUIRE_TOOLCHAINS=1 (docs/ci.md): there such a skip is a failure, so the
real-compiler coverage cannot be lost silently. The variable also takes a comma list of the
keys below ("clang-19,nvrtc"), and "gpu" there makes the GPU tests' skip a failure too (for
a run on the GPU machine).

Each toolchain is probed once per process, from the environment the session started with
(tests change ROCM_PATH and PATH for themselves later): clang-19 on PATH, the HIP runtime
where the plugin itself looks for it (ROCM_PATH/lib when ROCM_PATH is set, else /opt/rocm/lib
and the loader's directories), the device libraries beside it, the Python packages by import.
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

REQUIRE_VARIABLE = "GPUPERF_REQUIRE_TOOLCHAINS"
ROCM_PACKAGES = "apt-get install libamdhip64-dev rocm-device-libs"


@dataclass(frozen=True)
class Toolchain:
    """One optional toolchain: `key` as GPUPERF_REQUIRE_TOOLCHAINS names it, what it is, the
    command that installs it, and a probe returning what was not found (None: usable)."""

    key: str
    what: str
    install: str
    probe: Callable[[], str | None]


def _clang19() -> str | None:
    return None if shutil.which("clang-19") else "clang-19 is not on PATH"


@functools.cache
def rocm_libraries():
    """The HIP runtime (with hiprtc) as the plugin finds it, or the plugin's RocmUnavailable."""
    from pytest_gpuperf.runtime.hip_compiler import RocmUnavailable, find_rocm

    try:
        return find_rocm()
    except RocmUnavailable as missing:
        return missing


def _rocm() -> str | None:
    found = rocm_libraries()
    return None if not isinstance(found, Exception) else "libamdhip64.so was not found"


def device_libs_dir() -> Path | None:
    """The folder of the ROCm device libraries (ockl.bc, oclc_*.bc) next to the HIP runtime:
    <libdir>/amdgcn/bitcode on Debian, <ROCM_PATH>/amdgcn/bitcode in a ROCm install."""
    found = rocm_libraries()
    if isinstance(found, Exception):
        return None
    library_dir = Path(found.hip).parent
    for candidate in (
        library_dir / "amdgcn" / "bitcode",
        library_dir.parent / "amdgcn" / "bitcode",
    ):
        if (candidate / "ockl.bc").exists():
            return candidate
    return None


def _device_libs() -> str | None:
    if isinstance(rocm_libraries(), Exception):
        return "no HIP runtime to find them beside"
    return None if device_libs_dir() else "ockl.bc was not found beside libamdhip64.so"


def _hip_python() -> str | None:
    try:
        import hip  # noqa: F401
    except ImportError:
        return "the hip package does not import"
    return None


def _nvrtc() -> str | None:
    from pytest_gpuperf.errors import CompileError
    from pytest_gpuperf.runtime import cuda_compiler

    try:
        cuda_compiler.version()
    except CompileError:
        return "cuda-bindings or libnvrtc could not be loaded"
    return None


def _cuda_headers() -> str | None:
    from pytest_gpuperf.runtime import cuda_compiler

    found = cuda_compiler.cuda_headers_dir()
    return None if found else "cuda-pathfinder found no cuda_bf16.h, cuda_fp16.h"


def _chromium() -> str | None:
    from tests.chromium import missing as browser_missing

    return browser_missing()


TOOLCHAINS = {
    t.key: t
    for t in (
        Toolchain("clang-19", "clang-19 (gfx942 assembly)", "apt-get install clang-19", _clang19),
        Toolchain("rocm", "ROCm 5.2's HIP runtime with hiprtc", ROCM_PACKAGES, _rocm),
        Toolchain("rocm-device-libs", "the ROCm device libraries", ROCM_PACKAGES, _device_libs),
        Toolchain("hip-python", "hip-python", "pip install -e '.[hip]'", _hip_python),
        Toolchain("nvrtc", "NVRTC", "pip install -e '.[cuda]'", _nvrtc),
        Toolchain(
            "cuda-headers",
            "CUDA's runtime headers for NVRTC (nvidia-cuda-runtime)",
            "pip install -e '.[cuda]'",
            _cuda_headers,
        ),
        Toolchain(
            "chromium",
            "headless Chromium driven by selenium (the dashboard's browser tests)",
            "apt-get install chromium chromium-driver; pip install -e '.[test]'",
            _chromium,
        ),
    )
}
GPU = "gpu"  # not a toolchain: only an explicit GPUPERF_REQUIRE_TOOLCHAINS=gpu requires it


@functools.cache
def missing(key: str) -> str | None:
    """Why toolchain `key` cannot be used here (one sentence, the same for every test), or
    None when it can."""
    toolchain = TOOLCHAINS[key]
    why = toolchain.probe()
    if why is None:
        return None
    return f"needs {toolchain.what}: {why}; install: {toolchain.install}"


def required(key: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether GPUPERF_REQUIRE_TOOLCHAINS makes a missing `key` a failure."""
    value = (os.environ if environ is None else environ).get(REQUIRE_VARIABLE, "").strip()
    if value in ("", "0"):
        return False
    keys = {k.strip() for k in value.split(",")}
    return key in keys or (value in ("1", "all") and key != GPU)


def skip_or_fail(key: str, reason: str) -> NoReturn:
    """Skip with `reason`, or fail with it where GPUPERF_REQUIRE_TOOLCHAINS requires `key`."""
    if required(key):
        value = os.environ[REQUIRE_VARIABLE]
        pytest.fail(f"{reason} [{REQUIRE_VARIABLE}={value}: required here]", pytrace=False)
    pytest.skip(reason)


def need(*keys: str) -> None:
    """Skip (or fail, see above) the calling test unless every toolchain in `keys` is usable."""
    for key in keys:
        why = missing(key)
        if why is not None:
            skip_or_fail(key, why)


def probe_system() -> None:
    """Probe clang-19 and the ROCm libraries now, before any test changes PATH or ROCM_PATH
    for itself (the root conftest calls it as the session starts)."""
    for key in ("clang-19", "rocm", "rocm-device-libs"):
        missing(key)
