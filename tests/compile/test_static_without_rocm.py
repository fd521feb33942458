"""The static gate needs clang alone, no ROCm package: proven on a clang that cannot see one.

The machine that runs this may have ROCm installed (Debian's libamdhip64-dev puts the HIP
headers in /usr/include/hip and the device libraries under /usr/lib/*/amdgcn; CI installs
them for the hiprtc tests). `rocmless` is clang-19 behind a script that gives it an empty
--sysroot and no ROCm environment: every system folder clang would search for ROCm (/usr,
/usr/local, /opt/rocm) and for headers (/usr/include) is then looked up under an empty
folder, and only clang's own resource folder remains. The first test shows that this clang
really has no ROCm (its HIP mode stops with "cannot find HIP runtime", the error a user with
only `apt-get install clang-19` met) and prints the search list the gate compiles with.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pytest_gpuperf.gate.static import (
    StaticUnavailable,
    compile_static,
    find_clang,
    kernel_asm,
    kernel_names,
)
from pytest_gpuperf.gate.static.build import SHIM_DIR
from pytest_gpuperf.runtime.compile import KERNELS_DIR
from tests.half_precision import HALF_KERNELS

pytestmark = pytest.mark.compile

KERNEL_FILES = sorted(KERNELS_DIR.glob("*.hip"))
ROCM_VARIABLES = ("ROCM_PATH", "HIP_PATH", "HIP_DEVICE_LIB_PATH", "HIP_PLATFORM")


@pytest.fixture
def rocmless(clang19: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """clang-19 with an empty sysroot and no ROCm variables: no ROCm exists for it."""
    empty = tmp_path / "empty-sysroot"
    empty.mkdir()
    script = tmp_path / "clang-19-without-rocm"
    unset = " ".join(ROCM_VARIABLES)
    script.write_text(f'#!/bin/sh\nunset {unset}\nexec {clang19} --sysroot={empty} "$@"\n')
    script.chmod(0o755)
    monkeypatch.setenv("GPUPERF_CACHE_DIR", str(tmp_path / "cache"))  # really compile
    return str(script)


def resource_dir(clang: str) -> str:
    done = subprocess.run([clang, "-print-resource-dir"], capture_output=True, text=True)
    return str(Path(done.stdout.strip()).resolve())


def test_the_clang_without_rocm_really_has_none_and_the_gate_searches_only_its_own(
    rocmless, tmp_path
):
    source = tmp_path / "probe.hip"
    source.write_text("#include <hip/hip_runtime.h>\n__global__ void k(float* a) { a[0] = 1; }\n")
    # what a user with clang-19 alone met: clang's HIP mode looks for ROCm and finds none
    default = subprocess.run(
        [rocmless, "-x", "hip", "--offload-arch=gfx942", "--cuda-device-only", "-nogpulib",
         "-S", str(source), "-o", os.devnull],
        capture_output=True, text=True, env={"PATH": os.environ["PATH"]},
    )  # fmt: skip
    assert default.returncode != 0
    assert "cannot find HIP runtime" in default.stderr
    # the gate's own command: the search list holds our header, kernels/ and clang's own
    build = compile_static(source, clang=rocmless, options=["-v"], use_cache=False)
    assert kernel_names(build.asm) == ["_Z1kPf"]
    listing = build.log.split("#include <...> search starts here:")[1].split("End of search")[0]
    folders = [Path(line.strip()).resolve() for line in listing.strip().splitlines()]
    ours = {SHIM_DIR.resolve(), KERNELS_DIR.resolve(), source.parent.resolve()}
    resources = resource_dir(rocmless)
    for folder in folders:
        assert folder in ours or str(folder).startswith(resources), folder
    others = [f for f in folders if f not in ours]
    assert not any("rocm" in str(f).lower() or str(f).startswith("/usr/include") for f in others)


@pytest.mark.parametrize("path", KERNEL_FILES, ids=lambda p: p.name)
def test_every_shipped_kernel_builds_without_rocm_as_it_does_with_it(path, rocmless, clang19):
    """The same code as the default clang's build on this machine (with whatever it finds):
    the header changes nothing when ROCm is absent."""
    without = compile_static(path, "gfx942", clang=find_clang(rocmless), use_cache=False)
    default = compile_static(path, "gfx942", clang=find_clang(clang19), use_cache=False)
    names = kernel_names(default.asm)
    assert names and kernel_names(without.asm) == names
    for name in names:
        assert kernel_asm(without.asm, name).info == kernel_asm(default.asm, name).info, name


def test_the_header_gives_the_device_api_and_math_without_rocm(rocmless, tmp_path):
    """What clang's HIP wrapper defines (the qualifiers, sqrtf and friends) and what ours
    maps (launch coordinates, barriers, shuffles, atomics), with nothing of ROCm."""
    source = tmp_path / "api.hip"
    source.write_text(
        '#include "gpuperf.h"\n'
        "__constant__ float scale = 2.0f;\n"
        "GPUPERF_KERNEL void api(float* a, int* counter) {\n"
        "    __shared__ float tile[256];\n"
        "    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    tile[threadIdx.x] = sqrtf(a[i]) + expf(a[i]) * scale;\n"
        "    __syncthreads();\n"
        "    a[i] = __shfl_xor(tile[255 - threadIdx.x], 1) + (float)gridDim.x;\n"
        "    atomicAdd(counter, 1);\n"
        "}\n"
    )
    build = compile_static(source, clang=rocmless, use_cache=False)
    asm = kernel_asm(build.asm, "api")
    code = "\n".join(asm.instructions())
    assert "s_barrier" in code and "ds_bpermute_b32" in code and "global_atomic_add" in code
    assert "__ockl_get" not in code  # launch coordinates need no device library


def test_a_bf16_and_fp16_kernel_builds_without_rocm_as_it_does_with_it(rocmless, clang19, tmp_path):
    """hip_bf16.h and hip_fp16.h are the plugin's own: the clang that has no ROCm builds the
    bf16 RMSNorm, and to the same code as the default clang on a machine whose
    /usr/include/hip holds ROCm's headers (Debian's ROCm 5.2 has a hip_fp16.h there)."""
    source = tmp_path / "half_kernels.hip"
    source.write_text(HALF_KERNELS)
    without = compile_static(source, "gfx942", clang=find_clang(rocmless), use_cache=False)
    default = compile_static(source, "gfx942", clang=find_clang(clang19), use_cache=False)
    for name in ("rmsnorm_bf16", "silu_and_mul_bf16x2", "axpy_half2"):
        assert kernel_asm(without.asm, name).info == kernel_asm(default.asm, name).info, name
        assert kernel_asm(without.asm, name).instructions(), name


def test_rocm_mode_without_rocm_names_the_debian_packages(rocmless):
    with pytest.raises(StaticUnavailable) as raised:
        compile_static(KERNEL_FILES[0], clang=rocmless, hip_runtime="rocm", use_cache=False)
    message = str(raised.value)
    assert "found no ROCm" in message and "(hip_runtime='rocm')" in message
    assert "(Debian/Ubuntu: apt-get install libamdhip64-dev rocm-device-libs)" in message
    assert "hip_runtime='gpuperf', which needs only clang" in message
