"""Finding clang for the static gate, with stand-in compilers (no real clang needed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.gate.static import StaticUnavailable, UnknownArch, compile_static, find_clang
from pytest_gpuperf.gate.static import clang as clang_module

FAKE = """#!{python}
import sys
args = sys.argv[1:]
if args == ["--version"]:
    print({version!r})
    sys.exit(0)
if "--print-supported-cpus" in args:
    print("Available CPUs for this target:\\n\\n\\tgfx90a\\n\\tgfx1100\\n\\tgfx942\\n")
    sys.exit(0)
arch = next(a.split("=", 1)[1] for a in args if a.startswith("--offload-arch="))
if arch not in {known!r}:
    sys.stderr.write({error!r}.format(arch=arch))
    sys.exit(1)
sys.exit(0)
"""
ARCH_ERROR = "clang: error: invalid target ID '{arch}'; format is a processor name\n"
NO_AMDGPU = "clang: error: unable to create target: 'No available targets are compatible'\n"


def fake_clang(folder: Path, name: str, *, version="Debian clang version 19.1.7 (3~deb12u1)",
               known=("gfx942", "gfx90a"), error=ARCH_ERROR) -> Path:  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(FAKE.format(python=sys.executable, version=version, known=list(known),
                                error=error))  # fmt: skip
    path.chmod(0o755)
    return path


@pytest.fixture
def path_dir(tmp_path, monkeypatch) -> Path:
    """PATH holds only this folder, and no absolute candidate is tried."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))
    monkeypatch.setattr(
        clang_module, "CANDIDATES", tuple(c for c in clang_module.CANDIDATES if "/" not in c)
    )
    return folder


def test_no_clang_on_path_says_what_was_tried_and_how_to_install(path_dir):
    with pytest.raises(StaticUnavailable) as failure:
        find_clang(arch="gfx942")
    message = str(failure.value)
    assert message.startswith("no clang on PATH cannot compile HIP for gfx942")
    assert "apt-get install clang-19" in message and "--gpuperf-clang=PATH" in message
    assert "tried clang-19: not found; clang-22: not found" in message
    assert ("clang", "not found") in failure.value.tried


def test_a_named_clang_that_does_not_exist_is_named(path_dir):
    with pytest.raises(StaticUnavailable, match=r"the clang given \(/no/such/clang\)"):
        find_clang("/no/such/clang")


def test_the_first_usable_candidate_wins_and_reports_its_version(path_dir):
    fake_clang(path_dir, "clang-19", error=NO_AMDGPU, known=())
    fake_clang(path_dir, "clang-18", version="clang version 18.1.8")
    found = find_clang(arch="gfx942")
    assert (Path(found.path).name, found.version, found.label) == (
        "clang-18",
        "18.1.8",
        "clang 18.1.8",
    )


def test_an_explicit_clang_is_used_even_off_path(tmp_path, path_dir):
    path = fake_clang(tmp_path / "elsewhere", "my-clang")
    found = find_clang(str(path), arch="gfx90a")
    assert found.path == str(path) and found.arch == "gfx90a"
    assert found.version_line == "Debian clang version 19.1.7 (3~deb12u1)"


def test_an_arch_every_clang_rejects_is_a_config_error_listing_the_known_ones(path_dir):
    fake_clang(path_dir, "clang-19")
    with pytest.raises(UnknownArch) as failure:
        find_clang(arch="gfx999")
    assert isinstance(failure.value, ConfigError)
    message = str(failure.value)
    assert "does not know the GPU architecture 'gfx999'" in message
    assert "It knows: gfx90a, gfx942, gfx1100." in message
    assert "--print-supported-cpus" in message


def test_a_program_that_is_not_clang_is_refused_with_what_it_said(tmp_path, path_dir):
    path = fake_clang(tmp_path, "gcc", version="gcc (Debian 12.2.0-14) 12.2.0")
    with pytest.raises(StaticUnavailable, match=r"`--version` did not name a clang version"):
        find_clang(str(path))


def test_an_unknown_hip_runtime_is_named_before_any_compiler_runs():
    with pytest.raises(ConfigError, match=r"hip_runtime 'hipcc' is not one of gpuperf, rocm"):
        compile_static("kernels/vector_add.hip", hip_runtime="hipcc")
