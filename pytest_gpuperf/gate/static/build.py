"""Offline compilation of one kernel source for one AMD arch with a stock clang.

What runs: `clang -x hip --offload-arch=<arch> --cuda-device-only -O3 -S` (the test's
defines and options, the source's own folder and the plugin's kernels/ folder on the include
path, as the hip backend compiles them with hiprtc), then `clang --target=amdgcn-amd-amdhsa
-mcpu=<arch> -c` on that assembly. Going through the assembly gives both things the gate
reads from one compilation - the text (ISA checks, LLVM's per-kernel comments) and a code
object whose NT_AMDGPU_METADATA note and symbols match it - and needs no ld.lld.

Two ways to provide the HIP device API (`hip_runtime`):
- "gpuperf" (default): -nogpulib -nogpuinc and the plugin's own device-only
  `hip/hip_runtime.h`, `hip/hip_bf16.h` and `hip/hip_fp16.h` (gate/static/include), with
  `__HIPCC_RTC__` defined as hiprtc defines it.
  Needs only clang (Debian: clang-19), no ROCm package: -nogpuinc keeps clang from looking
  for a HIP installation (without one it stops: "cannot find HIP runtime"), and the header
  includes clang's own HIP wrapper, which -nogpuinc would otherwise leave out.
  ROCm's header would leave the launch coordinates as unlinked device-library calls
  under -nogpulib (checked with ROCm 5.2: every kernel then calls __ockl_get_local_id & co.,
  and its registers are the calling convention's), so it is not used in this mode.
- "rocm": ROCm's headers and device libraries, found by clang as hipcc would (pass
  `--rocm-path=...` in options to choose one). Faithful for math functions too, but needs a
  ROCm installation with device libraries for the arch (Debian: libamdhip64-dev and
  rocm-device-libs, ROCM_PACKAGES; the messages name them).

Compilation runs in a subprocess with a time limit; results are cached on disk (under the
kernel cache's `static/` folder) keyed by everything that can change them.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_gpuperf.errors import CompileError, ConfigError
from pytest_gpuperf.gate.static.clang import Clang, find_clang, supported_processors
from pytest_gpuperf.gate.static.errors import StaticUnavailable, UnknownArch
from pytest_gpuperf.runtime.compile import (
    KERNELS_DIR,
    cache_dir,
    error_location,
    local_headers,
    portability_headers,
    read_source,
)

SHIM_DIR = Path(__file__).parent / "include"
HIP_RUNTIMES = ("gpuperf", "rocm")
DEFAULT_TIMEOUT_S = 300.0
_CACHE_VERSION = "static-build-v1"
_ARCH_MARKERS = ("invalid target id", "unsupported cuda gpu architecture", "unknown target cpu")
# What hip_runtime="rocm" needs besides clang, as Debian and Ubuntu package it: the HIP headers
# (and runtime) and the device libraries (ocml, ockl bitcode).
ROCM_PACKAGES = "apt-get install libamdhip64-dev rocm-device-libs"


@dataclass(frozen=True)
class StaticBuild:
    """One source compiled for one arch: the code object (a relocatable AMDGPU ELF with the
    kernels' metadata note) and the assembly it was assembled from."""

    source_name: str
    arch: str
    compiler: str  # "clang 19.1.7"
    hip_runtime: str  # "gpuperf" or "rocm"
    code_object: bytes
    asm: str
    log: str = ""
    from_cache: bool = False


def compile_static(
    source: str | Path,
    arch: str = "gfx942",
    *,
    defines: Mapping[str, str | int] | None = None,
    options: Sequence[str] = (),
    include_dirs: Sequence[str | Path] = (),
    clang: Clang | str | os.PathLike[str] | None = None,
    hip_runtime: str = "gpuperf",
    name: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    use_cache: bool = True,
) -> StaticBuild:
    """Compile `source` (a .hip path, or source text named `name`) for `arch`.

    `defines` and `options` are what the test passes to `gpu_bench.kernel` (an
    `--offload-arch` among the options is replaced by `arch`); `clang` is a Clang from
    `find_clang`, a path or command name, or None to search PATH. Raises `CompileError`
    (clang's full log, the source file:line), `UnknownArch`, or `StaticUnavailable`.
    """
    if hip_runtime not in HIP_RUNTIMES:
        raise ConfigError(
            f"hip_runtime {hip_runtime!r} is not one of {', '.join(HIP_RUNTIMES)}: 'gpuperf' "
            "(the plugin's HIP header, no ROCm needed) or 'rocm' (ROCm's headers and libraries)"
        )
    compiler = clang if isinstance(clang, Clang) and clang.arch == arch else None
    if compiler is None:
        compiler = find_clang(clang.path if isinstance(clang, Clang) else clang, arch)
    text, source_name, directory = read_source(source, name)
    flags = hip_flags(hip_runtime, options, defines or {})
    includes = [*([directory] if directory else []), *map(Path, include_dirs), KERNELS_DIR]
    key = _cache_key(compiler, arch, hip_runtime, flags, text, includes)
    cached = cache_dir() / "static" / key
    if use_cache and cached.with_suffix(".o").is_file() and cached.with_suffix(".s").is_file():
        return StaticBuild(
            source_name, arch, compiler.label, hip_runtime,
            code_object=cached.with_suffix(".o").read_bytes(),
            asm=cached.with_suffix(".s").read_text(),
            from_cache=True,
        )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="gpuperf-static-") as tmp:
        work = Path(tmp)
        if directory is not None:
            path = Path(source)
        else:
            path = work / (Path(source_name).name if source_name != "<string>" else "kernel.hip")
            path.write_text(text)
        asm_path, object_path = work / "kernel.s", work / "kernel.o"
        compile_command = [
            compiler.path, "-x", "hip", f"--offload-arch={arch}", "--cuda-device-only", "-O3",
            *flags, *(f"-I{d}" for d in includes), str(path), "-S", "-o", str(asm_path),
        ]  # fmt: skip
        log = _run(compile_command, timeout_s, compiler, arch, hip_runtime, source_name, path)
        assemble = [compiler.path, "--target=amdgcn-amd-amdhsa", f"-mcpu={arch}", "-c",
                    str(asm_path), "-o", str(object_path)]  # fmt: skip
        _run(assemble, timeout_s, compiler, arch, hip_runtime, source_name, asm_path)
        build = StaticBuild(
            source_name, arch, compiler.label, hip_runtime,
            code_object=object_path.read_bytes(), asm=asm_path.read_text(), log=log,
        )  # fmt: skip
    if use_cache:
        _store(cached.with_suffix(".s"), build.asm.encode())
        _store(cached.with_suffix(".o"), build.code_object)
    return build


def hip_flags(
    hip_runtime: str = "gpuperf",
    options: Sequence[str] = (),
    defines: Mapping[str, str | int] | None = None,
) -> list[str]:
    """The flags after `-x hip --offload-arch=<arch> --cuda-device-only -O3` that provide the
    HIP device API `hip_runtime` names (see above), then the test's options and defines: the
    project's own compile tests use them too, so they need no more than the gate does."""
    user = [o for o in options if not o.startswith(("--offload-arch", "-offload-arch"))]
    flags = []
    if hip_runtime == "gpuperf":
        flags += ["-nogpulib", "-nogpuinc", "-D__HIPCC_RTC__", f"-I{SHIM_DIR}"]
        if not any(o.startswith("-mcode-object-version") for o in user):
            flags.append("-mcode-object-version=5")  # the shim reads v5 implicit arguments
    return [*flags, *user, *(f"-D{key}={value}" for key, value in (defines or {}).items())]


def _cache_key(
    compiler: Clang,
    arch: str,
    hip_runtime: str,
    flags: Sequence[str],
    text: str,
    includes: Sequence[Path],
) -> str:
    """Everything that can change the output: the compiler build, arch, mode, flags, the
    source, the headers it includes by quotes from each include folder, the shipped headers
    and the shim's headers (hip_runtime.h, hip_bf16.h, hip_fp16.h, ...)."""
    digest = hashlib.sha256()
    headers = [
        *portability_headers(),
        *(h for folder in includes for h in local_headers(text, folder)),
        *shim_headers(),
    ]
    parts = [_CACHE_VERSION, compiler.version_line, arch, hip_runtime, *flags, text]
    for part in parts + [f"{n}\0{c}" for n, c in headers]:
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()


def shim_headers() -> list[tuple[str, str]]:
    """The plugin's own HIP headers (gate/static/include), as (name, text), in name order."""
    return [
        (path.relative_to(SHIM_DIR).as_posix(), path.read_text())
        for path in sorted(SHIM_DIR.rglob("*.h"))
    ]


def _run(
    command: list[str],
    timeout_s: float,
    compiler: Clang,
    arch: str,
    hip_runtime: str,
    source_name: str,
    compiled: Path,
) -> str:
    """Run one clang step; its stderr (warnings) on success, typed errors on failure."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise CompileError(
            f"{compiler.label} did not finish compiling for {arch} within {timeout_s:.0f} s; "
            "it was stopped",
            source_path=source_name,
        ) from None
    log = done.stderr.replace(str(compiled), source_name)
    if done.returncode == 0:
        return log
    lowered = log.lower()
    if any(marker in lowered for marker in _ARCH_MARKERS):
        raise UnknownArch(arch, compiler.path, supported_processors(compiler.path))
    if hip_runtime == "rocm" and "cannot find rocm device library" in lowered:
        raise StaticUnavailable(
            f"{compiler.label} found no ROCm device libraries for {arch} (hip_runtime='rocm'): "
            f"install them (Debian/Ubuntu: {ROCM_PACKAGES}), pass --rocm-path=<ROCm folder> "
            "(or --rocm-device-lib-path) among the options, or use hip_runtime='gpuperf', "
            "which needs only clang"
        )
    if hip_runtime == "rocm" and (
        "'hip/hip_runtime.h' file not found" in lowered or "cannot find hip runtime" in lowered
    ):
        raise StaticUnavailable(
            f"{compiler.label} found no ROCm HIP headers (hip_runtime='rocm'): install them "
            f"(Debian/Ubuntu: {ROCM_PACKAGES}), pass --rocm-path=<ROCm folder> among the "
            "options, or use hip_runtime='gpuperf', which needs only clang"
        )
    file, line = error_location(log)
    step = "assemble the code of" if compiled.suffix == ".s" else "compile"
    raise CompileError(
        f"{compiler.label} could not {step} {source_name} for {arch}",
        log=log,
        source_path=file or source_name,
        line=line,
    )


def _store(path: Path, data: bytes) -> None:
    """Write whole or not at all; a read-only or full cache costs a recompile, never a
    failure (and leaves no temporary)."""
    from pytest_gpuperf.baseline.file_write import write_whole

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_whole(path, data)
    except OSError:
        pass
