"""NVRTC: compiles the project's .hip sources to CUBIN for NVIDIA GPUs.

Runs inside the compile child (runtime/compile.py). We ask for CUBIN, never PTX: a PTX from
an NVRTC newer than the driver does not JIT there (the GPU machine's driver is CUDA 13.0,
the wheel's NVRTC newer), while a CUBIN for the device's sm_XX loads under minor-version
compatibility. The kernels' `#include <hip/hip_runtime.h>` resolves to an in-memory stand-in,
since gpuperf.h maps everything a kernel needs onto CUDA itself.
"""

from __future__ import annotations

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


def compile(request: CompileRequest) -> tuple[bytes, str]:
    """CUBIN bytes and NVRTC's log; `CompilerFailed` with the log on a compile error."""
    nvrtc = _nvrtc()
    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
    headers = list(request.headers)
    if not any(name == HIP_RUNTIME_SHIM[0] for name, _ in headers):
        headers.append(HIP_RUNTIME_SHIM)
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
        (err,) = nvrtc.nvrtcCompileProgram(program, len(options), [o.encode() for o in options])
        log = program_log(program, nvrtc.nvrtcGetProgramLogSize, nvrtc.nvrtcGetProgramLog, ok)
        if err != ok:
            raise CompilerFailed(
                f"NVRTC could not compile {request.source_name} for {request.arch} "
                f"({err.name}; options: {' '.join(options)})",
                log,
            )
        err, cubin = program_output(program, nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN, ok)
        if not cubin:
            raise CompilerFailed(f"NVRTC produced no CUBIN for {request.arch} ({err.name})", log)
        return cubin, log
    finally:
        nvrtc.nvrtcDestroyProgram(program)
