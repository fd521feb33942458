"""NVRTC compiles every shipped kernel for sm_90 (no GPU needed: the wheel's NVRTC)."""

from __future__ import annotations

import pytest

from pytest_gpuperf.errors import CompileError
from pytest_gpuperf.runtime import cuda_compiler
from pytest_gpuperf.runtime.compile import (
    KERNELS_DIR,
    CompileRequest,
    compile_source,
    portability_headers,
)
from pytest_gpuperf.runtime.signature import parse_signatures

pytestmark = pytest.mark.compile

KERNEL_FILES = sorted(KERNELS_DIR.glob("*.hip"))


@pytest.fixture(scope="module", autouse=True)
def nvrtc_version(nvrtc):
    return cuda_compiler.version()


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPERF_CACHE_DIR", str(tmp_path / "cache"))


def nvrtc(source: str, name: str = "test.hip", arch: str = "sm_90", options=()) -> bytes:
    request = CompileRequest("nvrtc", source, name, arch, tuple(options), portability_headers())
    return compile_source(request, use_cache=False).binary


@pytest.mark.parametrize("path", KERNEL_FILES, ids=lambda p: p.name)
def test_every_kernel_file_compiles_to_a_cubin_for_sm_90(path):
    # hipcc-style options are translated away, as the backends pass them for either vendor
    cubin = nvrtc(path.read_text(), str(path), options=("-O3", "--offload-arch=gfx942"))
    assert cubin[:4] == b"\x7fELF"
    for kernel in parse_signatures(path.read_text()):
        assert kernel.encode() + b"\0" in cubin, f'{kernel} (extern "C") missing from the CUBIN'


def test_version_names_nvrtc(nvrtc_version):
    assert nvrtc_version.startswith("nvrtc ") and nvrtc_version[6:].replace(".", "").isdigit()


def test_hip_options_are_translated():
    options = ["-O3", "--offload-arch=gfx942", "-ffast-math", "-DBLOCK=128", "-std=c++17"]
    assert cuda_compiler.nvrtc_options(options, "sm_90") == [
        "--gpu-architecture=sm_90",
        "--use_fast_math",
        "-DBLOCK=128",
        "-std=c++17",
    ]


def test_defines_reach_the_source():
    source = '#include "gpuperf.h"\n#if GPUPERF_TEST_VALUE != 7\n#error wrong value\n#endif\n'
    source += "GPUPERF_KERNEL void k(float* x) { x[0] = GPUPERF_TEST_VALUE; }\n"
    assert nvrtc(source, options=("-DGPUPERF_TEST_VALUE=7",))[:4] == b"\x7fELF"
    with pytest.raises(CompileError, match="wrong value"):
        nvrtc(source, options=("-DGPUPERF_TEST_VALUE=6",))


def test_a_plain_hip_source_finds_hip_runtime_h():
    source = (
        "#include <hip/hip_runtime.h>\n"
        'extern "C" __global__ void k(float* x) {\n'
        "#ifndef __HIP_PLATFORM_NVIDIA__\n#error the shim marks the platform\n#endif\n"
        "  x[threadIdx.x] = 2.0f;\n}\n"
    )
    assert b"k\0" in nvrtc(source)


def test_a_syntax_error_names_file_line_and_keeps_the_log():
    source = '#include "gpuperf.h"\n\nGPUPERF_KERNEL void k(float* x) {\n  x[0] = 1.0f\n}\n'
    with pytest.raises(CompileError) as failure:
        nvrtc(source, name="kernels/broken.hip")
    error = failure.value
    assert (error.source_path, error.line) == ("kernels/broken.hip", 5)
    assert 'kernels/broken.hip(5): error: expected a ";"' in error.log
    assert str(error).startswith("kernels/broken.hip:5: NVRTC could not compile")


@pytest.mark.parametrize(
    "name", ["my kernels/broken.hip", "kernels (v2)/broken.hip", "C:/work/broken.hip"]
)
def test_a_path_with_spaces_parentheses_or_colons_keeps_its_line(name):
    """NVRTC's `file(line): error` reads ambiguously when the path has such characters: the
    source's own name is matched literally, so the line number is not lost."""
    source = '#include "gpuperf.h"\n\nGPUPERF_KERNEL void k(float* x) {\n  x[0] = 1.0f\n}\n'
    with pytest.raises(CompileError) as failure:
        nvrtc(source, name=name)
    assert (failure.value.source_path, failure.value.line) == (name, 5)
    assert str(failure.value).startswith(f"{name}:5: NVRTC could not compile")


def test_an_amd_arch_is_refused_with_a_clear_message():
    with pytest.raises(CompileError, match=r"NVIDIA architectures \(sm_XX\), not 'gfx942'"):
        nvrtc('#include "gpuperf.h"\n', arch="gfx942")
