"""Fixtures for the real-compiler tests: Debian's ROCm 5.2 hiprtc and clang-19.

Debian 12 packages a real HIP runtime (libamdhip64-dev, hiprtc inside libamdhip64.so) and
the device libraries hiprtc links (rocm-device-libs). `rocm_path` builds a ROCM_PATH-shaped
folder whose lib/ links libamdhip64.so and libhiprtc.so to that library, which is how
hip-python and our backend find it; tests skip with the install command when it is absent.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

DEBIAN_LIBAMDHIP64 = Path("/usr/lib/x86_64-linux-gnu/libamdhip64.so.5")
DEBIAN_DEVICE_LIBS = Path("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode/ockl.bc")
ROCM_PACKAGES = "apt-get install libamdhip64-dev rocm-device-libs"
CLANG = "clang-19"


def make_rocm_path(root: Path) -> Path:
    """A ROCM_PATH folder whose lib/ points at Debian's HIP runtime."""
    lib = root / "lib"
    lib.mkdir(parents=True, exist_ok=True)
    for name in ("libamdhip64.so", "libhiprtc.so"):
        (lib / name).symlink_to(DEBIAN_LIBAMDHIP64)
    return root


@pytest.fixture(scope="session")
def rocm_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for needed in (DEBIAN_LIBAMDHIP64, DEBIAN_DEVICE_LIBS):
        if not needed.exists():
            pytest.skip(
                f"Debian's ROCm 5.2 packages are not installed ({needed} is missing): "
                f"{ROCM_PACKAGES}"
            )
    pytest.importorskip("hip", reason="hip-python is not installed: pip install -e '.[hip]'")
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


@pytest.fixture(scope="session")
def clang19() -> str:
    path = shutil.which(CLANG)
    if path is None:
        pytest.skip(f"{CLANG} is not installed: apt-get install {CLANG}")
    return path
