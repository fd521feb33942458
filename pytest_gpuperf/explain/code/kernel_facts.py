"""The code facts of a kernel the run compiled, from the build it already made.

A kernel measured on a GPU is read as the GPU loaded it (its resources and occupancy at
the launch's block from the driver, kept on the Kernel) plus the compiler's report of the
same source, options and defines: NVRTC with `-Xptxas -v` (cached on disk like every
compile) or clang for a gfx arch, whose assembly gives the memory instructions. The
simulated device runs no code, so what it can honestly say is what that compiler says for
its arch, labelled so; without the compiler, nothing.

Facts are computed only to explain a failure, and once per (code, kernel, launch shape) in a
process.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from pytest_gpuperf.errors import CompileError, GpuPerfError
from pytest_gpuperf.explain.code.code_facts import (
    DRIVER_CUDA,
    DRIVER_HIP,
    CodeFacts,
    amd_facts,
    nvidia_facts,
)
from pytest_gpuperf.explain.code.ptxas import PTXAS_VERBOSE
from pytest_gpuperf.runtime.base import Kernel
from pytest_gpuperf.runtime.compile import compile_source, source_request
from pytest_gpuperf.runtime.devices import normalize_arch
from pytest_gpuperf.runtime.fingerprint import kernel_fingerprint
from pytest_gpuperf.runtime.info import KernelResources


class FactsUnavailable(GpuPerfError):
    """No code facts for this kernel here; the message says why and, where there is one,
    what would give them. `advice`, when set, is the long way out (no clang-19 on this
    machine: how to install one and every candidate tried), which a run says once in its
    notes while each failure's row keeps to the short message."""

    def __init__(self, message: str, advice: str = "") -> None:
        super().__init__(message)
        self.advice = advice


SIMULATED_NOTE = "compiled for {arch} by {toolchain}: the simulated device runs no code"
_cache: dict[tuple[object, ...], CodeFacts] = {}


def facts_of(
    kernel: Kernel,
    *,
    block: tuple[int, ...] | None = None,
    dynamic_shared_bytes: int = 0,
    compile_timeout_s: float = 300.0,
) -> CodeFacts:
    """`kernel`'s code facts for blocks of `block` (the measurement's launch shape); raises
    FactsUnavailable."""
    module = kernel.module
    backend = module.backend
    info = backend.info
    arch = normalize_arch(info.arch)
    block_threads = math.prod(block) if block else None
    key = (
        backend.kernel_fingerprint(kernel), kernel.name, block_threads,
        dynamic_shared_bytes, info.simulated, arch,
    )  # fmt: skip
    if key not in _cache:
        _cache[key] = _facts(kernel, arch, block_threads, dynamic_shared_bytes, compile_timeout_s)
    return _cache[key]


def _facts(
    kernel: Kernel, arch: str, block_threads: int | None, dynamic: int, timeout_s: float
) -> CodeFacts:
    module = kernel.module
    info = module.backend.info
    if module.source_path is None:
        raise FactsUnavailable(
            f"kernel {kernel.name!r} was not compiled from a file through gpu_bench.kernel"
        )
    driver = None if info.simulated or kernel.resources.registers is None else kernel.resources
    request = _FactsRequest(
        kernel, module.source_path, arch, dict(module.defines), block_threads, dynamic, driver
    )
    if arch.startswith("sm_"):
        facts = _nvidia(request, timeout_s)
        if driver is not None and kernel_fingerprint(module.binary, kernel.name).digest != (
            facts.fingerprint
        ):
            facts = _noted(
                facts,
                "the loaded code differs from NVRTC's -Xptxas -v build of the same source: "
                "spills and memory instructions are the -v build's",
            )
    elif arch.startswith("gfx"):
        facts = _amd(request)
    else:
        raise FactsUnavailable(f"no compiler this plugin drives builds for {arch}")
    if info.simulated:
        note = SIMULATED_NOTE.format(arch=arch, toolchain=facts.toolchain)
        facts = _noted(facts, note)
    return facts


def nvrtc_build(
    kernel: Kernel, source: Path, arch: str, defines: dict[str, str], timeout_s: float
) -> tuple[bytes, str, str]:
    """(CUBIN, NVRTC's log with ptxas's -v report, "nvrtc X.Y") of `source` built as
    `kernel`'s module was, plus `-Xptxas -v`: the compile cache keeps it."""
    options = (*kernel.module.options, *PTXAS_VERBOSE)
    request = source_request("nvrtc", source, None, arch, options, defines)
    try:
        result = compile_source(request, timeout_s=timeout_s)
    except CompileError as failure:
        raise FactsUnavailable(
            f"NVRTC could not build {source.name} for {arch}: {compiler_said(failure, source)}"
        ) from None
    return result.binary, result.log, result.compiler_version


@dataclass(frozen=True)
class _FactsRequest:
    """What a compiler is asked to build and report on for one kernel: the source and
    defines its module was compiled from, for `arch`; the launch's block and dynamic shared
    bytes; what the driver said of the loaded code (None on the simulated device)."""

    kernel: Kernel
    source: Path
    arch: str
    defines: dict[str, str]
    block_threads: int | None
    dynamic_shared_bytes: int
    driver: KernelResources | None


def _nvidia(request: _FactsRequest, timeout_s: float) -> CodeFacts:
    kernel, arch = request.kernel, request.arch
    cubin, log, version = nvrtc_build(kernel, request.source, arch, request.defines, timeout_s)
    backend = kernel.module.backend.name
    return nvidia_facts(
        cubin, log, kernel.name, arch, toolchain=version,
        block_threads=request.block_threads, dynamic_shared_bytes=request.dynamic_shared_bytes,
        driver=request.driver, driver_source=DRIVER_HIP if backend == "hip" else DRIVER_CUDA,
    )  # fmt: skip


def _amd(request: _FactsRequest) -> CodeFacts:
    from pytest_gpuperf.gate.static.build import compile_static
    from pytest_gpuperf.gate.static.errors import ClangNotFound

    kernel, source, arch = request.kernel, request.source, request.arch
    options = kernel.module.options
    try:
        build = compile_static(source, arch, defines=request.defines, options=options)
    except CompileError as failure:
        raise FactsUnavailable(
            f"clang could not build {source.name} for {arch}: {compiler_said(failure, source)}"
        ) from None
    except ClangNotFound as missing:  # the same long advice for every failure: said once
        raise FactsUnavailable(missing.needs, advice=first_line(missing)) from None
    except GpuPerfError as missing:  # no clang-19, an arch it does not know
        raise FactsUnavailable(first_line(missing)) from None
    return amd_facts(
        build, kernel.name, block_threads=request.block_threads,
        dynamic_shared_bytes=request.dynamic_shared_bytes, driver=request.driver,
    )  # fmt: skip


def first_line(error: Exception) -> str:
    """An error's first line (a compiler's message runs on with its whole log)."""
    lines = str(error).splitlines()
    return lines[0] if lines else type(error).__name__


def compiler_said(failure: CompileError, source: Path) -> str:
    """The compiler's first error line (the source named by its file name, as the row names
    it), else the error's own first line (a compiler that timed out wrote none)."""
    said = failure.first_error.replace(str(source), source.name)
    return said or first_line(failure)


def _noted(facts: CodeFacts, note: str) -> CodeFacts:
    from dataclasses import replace

    return replace(facts, notes=(*facts.notes, note))
