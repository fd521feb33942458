"""Every shipped kernel compiles with clang-19 to gfx942 (MI300X) assembly.

Only that it compiles, and every GPUPERF_KERNEL is in the output; the instruction-level
checks (sc0 sc1 on the bypass kernel, nt, dwordx4) live in their own tests.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from pytest_gpuperf.gate.static.build import hip_flags
from pytest_gpuperf.runtime.compile import KERNELS_DIR
from pytest_gpuperf.runtime.signature import parse_signatures

pytestmark = pytest.mark.compile

KERNEL_FILES = sorted(KERNELS_DIR.glob("*.hip"))
WITHOUT = Path(__file__).resolve().parents[2] / ".ci" / "without"
# Device code only, optimised assembly, and the HIP device API the static gate provides
# (-nogpulib -nogpuinc and the plugin's own header): Debian's clang-19 emits real gfx942 code
# this way with no ROCm package installed, and the same way where one is.
FLAGS = ["-x", "hip", "--offload-arch=gfx942", "--cuda-device-only", "-O3", *hip_flags(), "-S"]


@pytest.mark.parametrize("path", KERNEL_FILES, ids=lambda p: p.name)
def test_kernel_file_compiles_to_gfx942_assembly(path, clang19, tmp_path):
    output = tmp_path / f"{path.stem}.s"
    command = [clang19, *FLAGS, f"-I{KERNELS_DIR}", str(path), "-o", str(output)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, f"{' '.join(command)}\n{result.stderr}"
    assembly = output.read_text()
    assert '.amdgcn_target "amdgcn-amd-amdhsa--gfx942' in assembly
    for kernel in parse_signatures(path.read_text()):
        assert f".amdhsa_kernel {kernel}\n" in assembly, f"{kernel} missing from {path.name}"


def test_the_flags_need_no_rocm_installation(clang19, tmp_path):
    """On a machine with clang-19 and no ROCm package the compile tests were red ("cannot find
    HIP runtime; provide its path via '--rocm-path', or pass '-nogpuinc'"). CI's `.ci/without
    rocm` makes such a machine of this one (a mount namespace without ROCm's headers, version
    file and libraries; ROCM_PATH at an empty folder is not enough: clang takes it unchecked
    and still finds /usr/include/hip). There the old flags fail (the control: ROCm is really
    gone) and the tests' flags compile every shipped kernel file."""
    if not WITHOUT.is_file():
        pytest.skip(f"{WITHOUT.name} is not here (an sdist ships no .ci/)")
    old_flags = ["-x", "hip", "--offload-arch=gfx942", "--cuda-device-only", "-nogpulib", "-O3"]
    vector_add = KERNELS_DIR / "vector_add.hip"
    old = [clang19, *old_flags, "-S", f"-I{KERNELS_DIR}", str(vector_add), "-o", os.devnull]
    lines = [shlex.join(old) + " 2>&1 && echo OLD-FLAGS-COMPILED"]
    for path in KERNEL_FILES:
        command = [clang19, *FLAGS, f"-I{KERNELS_DIR}", str(path), "-o", os.devnull]
        lines.append(shlex.join(command) + " || exit 1")
    script = "\n".join(lines)
    done = subprocess.run(
        [str(WITHOUT), "rocm", "bash", "-c", script],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if done.returncode == 3 and "no private mount namespace" in done.stderr:
        pytest.skip(f"cannot make a machine without ROCm here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cannot find HIP runtime" in done.stdout and "OLD-FLAGS-COMPILED" not in done.stdout
