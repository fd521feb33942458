"""Every shipped kernel compiles with clang-19 to gfx942 (MI300X) assembly.

Only that it compiles, and every GPUPERF_KERNEL is in the output; the instruction-level
checks (sc0 sc1 on the bypass kernel, nt, dwordx4) live in their own tests.
"""

from __future__ import annotations

import subprocess

import pytest

from pytest_gpuperf.runtime.compile import KERNELS_DIR
from pytest_gpuperf.runtime.signature import parse_signatures
from pytest_gpuperf.static.build import hip_flags

pytestmark = pytest.mark.compile

KERNEL_FILES = sorted(KERNELS_DIR.glob("*.hip"))
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
