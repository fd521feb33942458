"""Fixtures for the real-compiler tests: Debian's ROCm 5.2 hiprtc and clang-19.

The clang19 and nvrtc fixtures are tests/conftest.py's.

Debian 12 packages a real HIP runtime (libamdhip64-dev, hiprtc inside libamdhip64.so) and
the device libraries hiprtc links (rocm-device-libs). `rocm_path` builds a ROCM_PATH-shaped
folder whose lib/ links libamdhip64.so and libhiprtc.so to that library, which is how
hip-python and our backend find it; tests skip with the install command when it is absent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.toolchains import need, rocm_libraries


def make_rocm_path(root: Path) -> Path:
    """A ROCM_PATH folder whose lib/ points at the HIP runtime found (Debian's)."""
    found = rocm_libraries()
    assert not isinstance(found, Exception), found
    lib = root / "lib"
    lib.mkdir(parents=True, exist_ok=True)
    for name in ("libamdhip64.so", "libhiprtc.so"):
        (lib / name).symlink_to(Path(found.hip).resolve())
    return root


@pytest.fixture(scope="session")
def rocm_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    need("rocm", "rocm-device-libs", "hip-python")
    return make_rocm_path(tmp_path_factory.mktemp("rocm"))


@pytest.fixture(scope="session")
def kernel_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A kernel cache private to this session, so every test really compiles once."""
    return tmp_path_factory.mktemp("kernel-cache")


@pytest.fixture
def hiprtc_env(rocm_path: Path, kernel_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """ROCM_PATH at the test ROCm folder and GPUPERF_CACHE_DIR at the session's cache."""
    monkeypatch.setenv("ROCM_PATH", str(rocm_path))
    monkeypatch.setenv("GPUPERF_CACHE_DIR", str(kernel_cache))
    return rocm_path
