"""Without a usable AMD GPU, `open_backend("hip")` says exactly what was missing.

The no-device case uses Debian's real ROCm 5.2 runtime (libamdhip64-dev) on this GPU-less
machine; the others need no ROCm at all.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_gpuperf.errors import DeviceUnavailable, GpuPerfError
from pytest_gpuperf.runtime import hip_compiler, open_backend
from tests.toolchains import need, rocm_libraries


@pytest.fixture
def debian_rocm_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """ROCM_PATH at a folder whose lib/ links Debian's HIP runtime (as tests/compile does)."""
    need("rocm", "hip-python")
    if Path("/dev/kfd").exists():
        pytest.skip("this machine has an AMD GPU driver (/dev/kfd): 'no device' cannot be shown")
    (tmp_path / "lib").mkdir()
    for name in ("libamdhip64.so", "libhiprtc.so"):
        (tmp_path / "lib" / name).symlink_to(Path(rocm_libraries().hip).resolve())
    monkeypatch.setenv("ROCM_PATH", str(tmp_path))
    return tmp_path


def test_hip_runtime_without_a_gpu_names_hipErrorNoDevice(debian_rocm_path):
    with pytest.raises(DeviceUnavailable) as unavailable:
        open_backend("hip")
    (attempt,) = unavailable.value.attempts
    assert attempt.backend == "hip"
    assert "hipErrorNoDevice" in str(unavailable.value)
    assert str(debian_rocm_path / "lib" / "libamdhip64.so") in attempt.reason


def test_empty_rocm_path_says_the_hip_library_was_not_found(tmp_path, monkeypatch):
    need("hip-python")
    # ROCM_PATH, once set, is the only place searched: the system's library is not a fallback
    monkeypatch.setenv("ROCM_PATH", str(tmp_path))
    with pytest.raises(DeviceUnavailable) as unavailable:
        open_backend("hip")
    message = str(unavailable.value)
    assert "HIP library was not found" in message
    assert f"{tmp_path / 'lib'} (ROCM_PATH={tmp_path})" in message


def test_without_rocm_path_every_searched_folder_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv("ROCM_PATH", raising=False)
    monkeypatch.setattr(hip_compiler, "DEFAULT_ROCM_PATH", str(tmp_path / "opt-rocm"))
    monkeypatch.setattr(hip_compiler, "_system_dirs", lambda environ: [tmp_path / "usr-lib"])
    with pytest.raises(hip_compiler.RocmUnavailable) as missing:
        hip_compiler.find_rocm()
    assert "ROCM_PATH is not set" in str(missing.value)
    assert f"{tmp_path / 'opt-rocm' / 'lib'}, {tmp_path / 'usr-lib'}" in str(missing.value)


def test_system_rocm_5_has_hiprtc_inside_libamdhip64(monkeypatch):
    need("rocm")
    monkeypatch.setattr(hip_compiler, "DEFAULT_ROCM_PATH", "/nonexistent/rocm")
    libraries = hip_compiler.find_rocm({})
    assert Path(libraries.hip).resolve() == Path(rocm_libraries().hip).resolve()
    assert libraries.hiprtc == libraries.hip  # Debian ships no libhiprtc.so


def test_versioned_library_is_found_when_the_dev_link_is_absent(tmp_path):
    (tmp_path / "lib").mkdir()
    for name in ("libamdhip64.so.5", "libamdhip64.so.6", "libhiprtc.so.6"):
        (tmp_path / "lib" / name).write_bytes(b"")
    libraries = hip_compiler.find_rocm({"ROCM_PATH": str(tmp_path)})
    assert libraries.hip == str(tmp_path / "lib" / "libamdhip64.so.6")
    assert libraries.hiprtc == str(tmp_path / "lib" / "libhiprtc.so.6")


def test_missing_hip_python_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setenv("ROCM_PATH", str(tmp_path))
    monkeypatch.setitem(sys.modules, "hip", None)  # makes `import hip` fail
    with pytest.raises(DeviceUnavailable, match=r"hip-python is not installed.*\[hip\]"):
        open_backend("hip")


def test_unknown_options_are_refused():
    with pytest.raises(GpuPerfError, match="takes no options"):
        open_backend("hip", flavour="strawberry")
