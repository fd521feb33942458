"""hiprtc as a compiler for runtime/compile.py, and where the ROCm libraries are.

hip-python opens `libamdhip64.so` and `libhiprtc.so` by bare name on first use (so the
dynamic loader's search path decides, not $ROCM_PATH) and keeps that handle for the life of
the process. We therefore find the libraries ourselves - $ROCM_PATH/lib when ROCM_PATH is
set (and only there), else /opt/rocm/lib, else the system library directories - and hand
hip-python absolute paths before its first call. ROCm 5.x ships hiprtc inside
libamdhip64.so; without a libhiprtc.so next to it, hiprtc is looked up there.

`compile` runs in the child process of compile.py: ROCm 5.2's hiprtc aborts the process for
gfx940-gfx942, which the parent turns into a CompileError.
"""

from __future__ import annotations

import os
import re
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from pytest_gpuperf.errors import CompileError, GpuPerfError
from pytest_gpuperf.runtime.compile import (
    CompileRequest,
    CompilerFailed,
    program_log,
    program_output,
)

HIP_LIBRARY = "libamdhip64.so"
HIPRTC_LIBRARY = "libhiprtc.so"
DEFAULT_ROCM_PATH = "/opt/rocm"
INSTALL_HINT = "pip install 'pytest-gpuperf[hip]'"


class RocmUnavailable(GpuPerfError):
    """hip-python or the ROCm libraries cannot be used; says what was looked for."""


@dataclass(frozen=True)
class RocmLibraries:
    """Absolute paths of the HIP runtime and of the library that holds hiprtc."""

    hip: str
    hiprtc: str  # libhiprtc.so, or libamdhip64.so itself on ROCm 5.x


def find_rocm(environ: Mapping[str, str] | None = None) -> RocmLibraries:
    """The ROCm libraries to use; `RocmUnavailable` names every place searched."""
    environ = os.environ if environ is None else environ
    rocm_path = environ.get("ROCM_PATH")
    if rocm_path:
        lib_dir = Path(rocm_path) / "lib"
        found = _find_in((lib_dir,), HIP_LIBRARY)
        if found is None:
            raise RocmUnavailable(
                f"the HIP library was not found: no {HIP_LIBRARY} in {lib_dir} "
                f"(ROCM_PATH={rocm_path}); point ROCM_PATH at a ROCm installation, or unset "
                f"it to search {DEFAULT_ROCM_PATH}/lib and the system library directories"
            )
        return _with_hiprtc(found, (lib_dir,))
    directories = (Path(DEFAULT_ROCM_PATH) / "lib", *_system_dirs(environ))
    found = _find_in(directories, HIP_LIBRARY)
    if found is None:
        searched = ", ".join(str(d) for d in directories)
        raise RocmUnavailable(
            f"the HIP library was not found: no {HIP_LIBRARY} in {searched} (ROCM_PATH is "
            "not set); install ROCm, or set ROCM_PATH to its folder (the one holding lib/)"
        )
    return _with_hiprtc(found, (found.parent, *directories))


def _system_dirs(environ: Mapping[str, str]) -> list[Path]:
    dirs = [Path(p) for p in environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    multiarch = sysconfig.get_config_var("MULTIARCH")
    if multiarch:
        dirs.append(Path("/usr/lib") / multiarch)
    dirs += [Path("/usr/lib64"), Path("/usr/lib"), Path("/usr/local/lib")]
    return dirs


def _find_in(directories: tuple[Path, ...] | list[Path], name: str) -> Path | None:
    """`name` in the first directory that has it, else its newest `name.N` there."""
    for directory in directories:
        if (directory / name).exists():
            return directory / name
        versions = sorted(
            directory.glob(f"{name}.[0-9]*"),
            key=lambda path: [int(n) for n in re.findall(r"\d+", path.name[len(name) :])],
        )
        if versions:
            return versions[-1]
    return None


def _with_hiprtc(hip: Path, directories: tuple[Path, ...]) -> RocmLibraries:
    hiprtc = _find_in(directories, HIPRTC_LIBRARY) or hip
    return RocmLibraries(hip=str(hip), hiprtc=str(hiprtc))


# hip-python module name -> resolved library it was pointed at in this process
_BOUND: dict[str, str] = {}


def load_hip_python() -> tuple[ModuleType, ModuleType, RocmLibraries]:
    """`hip.hip`, `hip.hiprtc` and the libraries they are bound to (before their first call).

    Raises `RocmUnavailable` when hip-python is missing (checked first: it is the fix a pip
    user needs) or when the ROCm libraries are not found.
    """
    try:
        from hip import chip, chiprtc
    except ImportError as missing:
        raise RocmUnavailable(f"hip-python is not installed ({missing}); {INSTALL_HINT}") from None
    libraries = find_rocm()
    for module, path in ((chip, libraries.hip), (chiprtc, libraries.hiprtc)):
        _bind(module, path)
    from hip import hip, hiprtc

    return hip, hiprtc, libraries


def _bind(module: ModuleType, path: str) -> None:
    resolved = os.path.realpath(path)
    bound = _BOUND.get(module.__name__)
    if bound is not None:
        if bound != resolved:
            raise RocmUnavailable(
                f"hip-python already loaded {bound} in this process and cannot switch to "
                f"{resolved}; run in a new process to use another ROCm"
            )
        return
    if not hasattr(module, "DLL"):
        raise RocmUnavailable(
            f"this hip-python ({module.__name__} has no DLL setting) cannot be pointed at "
            f"{path}; install a supported version: {INSTALL_HINT}"
        )
    module.DLL = path.encode()  # type: ignore[attr-defined]  # read at hip-python's first call
    _BOUND[module.__name__] = resolved


def version() -> str:
    """hiprtc's identity for the cache key: the library file it lives in, and its size."""
    try:
        libraries = find_rocm()
    except RocmUnavailable as missing:
        raise CompileError(f"hiprtc is unavailable: {missing}") from None
    library = Path(libraries.hiprtc).resolve()
    return f"hiprtc {library.name} ({library.stat().st_size} bytes)"


def compile(request: CompileRequest) -> tuple[bytes, str]:
    """Compile with hiprtc for `--offload-arch=<request.arch> -O3 <request.options>`.

    Returns the code object (a bare ELF from ROCm 5, an offload bundle from ROCm 6) and the
    log; raises CompilerFailed with hiprtc's log, its paths mapped back to our names.
    """
    try:
        _, hiprtc, _ = load_hip_python()
    except RocmUnavailable as missing:
        raise CompilerFailed(f"hiprtc is unavailable: {missing}") from None
    success = hiprtc.hiprtcResult.HIPRTC_SUCCESS
    names = [name.encode() for name, _ in request.headers]
    contents = [content.encode() for _, content in request.headers]
    try:
        status, program = hiprtc.hiprtcCreateProgram(
            request.source.encode(), request.source_name.encode(), len(names), contents, names
        )
    except RuntimeError as failure:  # hip-python: a library or symbol that did not load
        raise CompilerFailed(f"hiprtc could not be loaded: {failure}") from None
    if status != success:
        raise CompilerFailed(f"hiprtcCreateProgram failed: {status.name}")
    try:
        options = [f"--offload-arch={request.arch}", "-O3", *request.options]
        (status,) = hiprtc.hiprtcCompileProgram(
            program, len(options), [option.encode() for option in options]
        )
        log = program_log(
            program, hiprtc.hiprtcGetProgramLogSize, hiprtc.hiprtcGetProgramLog, success
        )
        log = clean_log(log, request)
        if status != success:
            raise CompilerFailed(
                f"hiprtc could not compile {request.source_name} for {request.arch} "
                f"({status.name})",
                log,
            )
        status, code = program_output(
            program, hiprtc.hiprtcGetCodeSize, hiprtc.hiprtcGetCode, success
        )
        if not code:
            raise CompilerFailed(f"hiprtc produced no code object ({status.name})", log)
        return code, log
    finally:
        # hiprtcDestroyProgram takes a hiprtcProgram*, hence the reference
        hiprtc.hiprtcDestroyProgram(program.createRef())


# hiprtc (through comgr) compiles copies in a temporary folder: input/CompileSource is the
# source, include/<name> the in-memory headers.
_COMGR_SOURCE_RE = re.compile(r"\S*/comgr-[^/\s]+/input/[^\s:]+")
_COMGR_HEADER_RE = re.compile(r"\S*/comgr-[^/\s]+/include/")


def clean_log(log: str, request: CompileRequest) -> str:
    """hiprtc's log with its temporary paths replaced by the source's and headers' names,
    so `compile.error_location` finds the user's file:line."""
    log = _COMGR_SOURCE_RE.sub(lambda _: request.source_name, log)
    return _COMGR_HEADER_RE.sub("", log)
