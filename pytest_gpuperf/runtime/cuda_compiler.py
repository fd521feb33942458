"""NVRTC: compiles the project's .hip sources to CUBIN for NVIDIA GPUs.

Runs inside the compile child (runtime/compile.py). We ask for CUBIN, never PTX: a PTX from
an NVRTC newer than the driver does not JIT there (the GPU machine's driver is CUDA 13.0,
the wheel's NVRTC newer), while a CUBIN for the device's sm_XX loads under minor-version
compatibility. The kernels' `#include <hip/hip_runtime.h>` resolves to an in-memory stand-in,
since gpuperf.h maps everything a kernel needs onto CUDA itself; `<hip/hip_bf16.h>` and
`<hip/hip_fp16.h>` resolve to stand-ins that include CUDA's own cuda_bf16.h and cuda_fp16.h,
which name the same functions (`__float2bfloat16`, `__hadd`, `__hfma2`, ...) and types under
CUDA's names (`__nv_bfloat16` for `__hip_bfloat16`). NVRTC does not carry those two headers:
they are found where cuda-pathfinder finds CUDA's runtime headers (the nvidia-cuda-runtime
wheel of the [cuda] extra, a conda environment, CUDA_HOME or /usr/local/cuda) and their
folder goes on NVRTC's include path.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pytest_gpuperf.errors import CompileError
from pytest_gpuperf.runtime.compile import (
    CompileRequest,
    CompilerFailed,
    program_log,
    program_output,
)

HIP_RUNTIME_SHIM = (
    "hip/hip_runtime.h",
    "// In-memory stand-in for HIP's runtime header under NVRTC (pytest-gpuperf): CUDA's\n"
    "// device built-ins are already there; gpuperf.h maps the HIP-only helpers.\n"
    "#pragma once\n"
    "#ifndef __HIP_PLATFORM_NVIDIA__\n"
    "#define __HIP_PLATFORM_NVIDIA__ 1\n"
    "#endif\n",
)
HIP_BF16_SHIM = (
    "hip/hip_bf16.h",
    "// In-memory stand-in for HIP's bfloat16 header under NVRTC (pytest-gpuperf): CUDA's\n"
    "// cuda_bf16.h declares the same functions; only the type names differ.\n"
    "#pragma once\n"
    "#include <cuda_bf16.h>\n"
    "typedef __nv_bfloat16 __hip_bfloat16;\n"
    "typedef __nv_bfloat162 __hip_bfloat162;\n"
    "typedef __nv_bfloat16_raw __hip_bfloat16_raw;\n"
    "typedef __nv_bfloat162_raw __hip_bfloat162_raw;\n"
    "#define HIPRT_ZERO_BF16 __ushort_as_bfloat16((unsigned short)0x0000U)\n"
    "#define HIPRT_ONE_BF16 __ushort_as_bfloat16((unsigned short)0x3F80U)\n"
    "#define HIPRT_INF_BF16 __ushort_as_bfloat16((unsigned short)0x7F80U)\n"
    "#define HIPRT_NAN_BF16 __ushort_as_bfloat16((unsigned short)0x7FFFU)\n",
)
HIP_FP16_SHIM = (
    "hip/hip_fp16.h",
    "// In-memory stand-in for HIP's half-precision header under NVRTC (pytest-gpuperf):\n"
    "// CUDA's cuda_fp16.h declares __half, __half2 and the same functions.\n"
    "#pragma once\n"
    "#include <cuda_fp16.h>\n",
)
STAND_INS = (HIP_RUNTIME_SHIM, HIP_BF16_SHIM, HIP_FP16_SHIM)
# A source that includes one of these needs CUDA's runtime headers on the include path.
_NEEDS_CUDA_HEADERS = re.compile(
    r"^\s*#\s*include\s*[<\"](?:hip/hip_bf16\.h|hip/hip_fp16\.h|cuda_bf16\.h|cuda_fp16\.h)[>\"]",
    re.M,
)
CUDA_HEADERS_HINT = (
    "CUDA's cuda_bf16.h and cuda_fp16.h were not found (NVRTC does not carry them): "
    "pip install nvidia-cuda-runtime (in pytest-gpuperf's [cuda] extra), or set CUDA_HOME "
    "to a CUDA toolkit"
)

# hipcc/hiprtc options NVRTC rejects or spells differently.
_DROPPED = {"-O0", "-O1", "-O2", "-O3", "-Os"}
_RENAMED = {"-ffast-math": "--use_fast_math"}


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as missing:
        raise CompileError(
            f"NVRTC is not available: cuda-bindings is not installed ({missing}); "
            "pip install 'pytest-gpuperf[cuda]'"
        ) from None
    return nvrtc


def version() -> str:
    """ "nvrtc 13.5": part of the compile cache key, so a new NVRTC recompiles."""
    nvrtc = _nvrtc()
    try:
        err, major, minor = nvrtc.nvrtcVersion()
    except RuntimeError as failure:  # cuda-pathfinder could not find libnvrtc
        raise CompileError(
            f"NVRTC could not be loaded: {failure}; pip install nvidia-cuda-nvrtc"
        ) from None
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise CompileError(f"nvrtcVersion failed: {err.name}")
    return f"nvrtc {major}.{minor}"


def nvrtc_options(options: Sequence[str], arch: str) -> list[str]:
    """The request's options as NVRTC takes them, targeting real code for `arch` (sm_XX).

    -O levels are dropped (NVRTC always optimises), --offload-arch is dropped (the arch
    comes from the device), -ffast-math becomes --use_fast_math; -D, -I, -std pass through.
    """
    if not arch.startswith("sm_"):
        raise CompilerFailed(f"NVRTC compiles for NVIDIA architectures (sm_XX), not {arch!r}")
    translated = [f"--gpu-architecture={arch}"]
    for option in options:
        if option in _DROPPED or option.startswith(("--offload-arch", "-offload-arch")):
            continue
        translated.append(_RENAMED.get(option, option))
    return translated


def cuda_headers_dir() -> str | None:
    """The folder of CUDA's runtime headers (cuda_bf16.h, cuda_fp16.h) as cuda-pathfinder
    finds it, or None."""
    try:
        from cuda.pathfinder import find_nvidia_header_directory
    except ImportError:
        return None
    try:
        return find_nvidia_header_directory("cudart")
    except Exception:  # any failure of the search (a canary subprocess, a bad path): none
        return None


def needs_cuda_headers(request: CompileRequest) -> bool:
    """Whether the source or its in-memory headers include bf16/fp16 headers."""
    texts = (request.source, *(content for _, content in request.headers))
    return any(_NEEDS_CUDA_HEADERS.search(text) for text in texts)


def compile(request: CompileRequest) -> tuple[bytes, str]:
    """CUBIN bytes and NVRTC's log; `CompilerFailed` with the log on a compile error."""
    nvrtc = _nvrtc()
    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
    headers = list(request.headers)
    given = {name for name, _ in headers}
    headers += [stand_in for stand_in in STAND_INS if stand_in[0] not in given]
    include_dir = cuda_headers_dir() if needs_cuda_headers(request) else None
    err, program = nvrtc.nvrtcCreateProgram(
        request.source.encode(),
        request.source_name.encode(),
        len(headers),
        [content.encode() for _, content in headers],
        [name.encode() for name, _ in headers],
    )
    if err != ok:
        raise CompilerFailed(f"nvrtcCreateProgram failed: {err.name}")
    try:
        options = nvrtc_options(request.options, request.arch)
        if include_dir is not None:
            options.append(f"-I{include_dir}")
        (err,) = nvrtc.nvrtcCompileProgram(program, len(options), [o.encode() for o in options])
        log = program_log(program, nvrtc.nvrtcGetProgramLogSize, nvrtc.nvrtcGetProgramLog, ok)
        if err != ok:
            missing = include_dir is None and re.search(r'source file "cuda_(bf|fp)16\.h"', log)
            raise CompilerFailed(
                f"NVRTC could not compile {request.source_name} for {request.arch} "
                f"({err.name}; options: {' '.join(options)})"
                + (f"; {CUDA_HEADERS_HINT}" if missing else ""),
                log,
            )
        err, cubin = program_output(program, nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN, ok)
        if not cubin:
            raise CompilerFailed(f"NVRTC produced no CUBIN for {request.arch} ({err.name})", log)
        return cubin, log
    finally:
        nvrtc.nvrtcDestroyProgram(program)
