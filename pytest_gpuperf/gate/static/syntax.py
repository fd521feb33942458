"""A syntax check with a stock clang, for the simulated device, which compiles nothing.

On the simulated device a kernel that does not compile (a typo, an undeclared name) used to
pass under --gpuperf with only a "no model" warning: the simulator reads a kernel's
structure and signature, not its C++. Where a clang that compiles HIP is at hand (Debian's
clang-19 needs no ROCm), the source goes through `clang -fsyntax-only` with the flags the
static gate compiles with (gate/static/build.py: the plugin's own HIP header, the test's options
and defines, the source's folder and kernels/ on the include path), so a kernel that would
not compile on a GPU does not pass here either. Without a clang nothing changes: the module's
log says the source was not compiled.

A clean check is remembered on disk (the kernel cache's `syntax/` folder, keyed as the
static build is), so a suite pays the compiler once per source version; a failure is not
remembered (it is cheap, and its log is the answer).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_gpuperf.errors import CompileError
from pytest_gpuperf.gate.static.build import _cache_key, hip_flags
from pytest_gpuperf.gate.static.clang import Clang, find_clang
from pytest_gpuperf.gate.static.errors import StaticUnavailable, UnknownArch
from pytest_gpuperf.runtime.compile import KERNELS_DIR, cache_dir, error_location, read_source

if TYPE_CHECKING:
    from pytest_gpuperf.runtime.base import Module

SYNTAX_ARCH = "gfx942"  # HIP syntax does not depend on the arch; the simulated MI300X's
DEFAULT_TIMEOUT_S = 120.0


def first_error(log: str) -> str:
    """The compiler's first `error:` line, as it wrote it ("" when there is none)."""
    for line in log.splitlines():
        if "error:" in line:
            return line[line.index("error:") :].strip()  # the file:line is the message's
    return ""


def syntax_clang(arch: str = SYNTAX_ARCH) -> Clang | None:
    """The clang that checks sources for `arch`, or None when none is at hand."""
    try:
        return find_clang(None, arch)
    except (StaticUnavailable, UnknownArch):
        return None


def check_syntax(
    source: str | Path,
    *,
    defines: Mapping[str, str | int] | None = None,
    options: Sequence[str] = (),
    clang: Clang | None = None,
    name: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> str | None:
    """Check that `source` compiles as HIP; the compiler's label ("clang 19.1.7") when it
    did, None when no clang is at hand or the source includes a header the check does not
    have. Raises `CompileError` whose message ends with the
    compiler's first error and whose log is the compiler's whole output."""
    compiler = clang or syntax_clang()
    if compiler is None:
        return None
    text, source_name, directory = read_source(source, name)
    flags = hip_flags("gpuperf", options, defines or {})
    includes = [*([directory] if directory else []), KERNELS_DIR]
    key = _cache_key(compiler, compiler.arch, "syntax", flags, text, includes)
    remembered = cache_dir() / "syntax" / key
    if remembered.is_file():
        return compiler.label
    given = str(source) if directory is not None else "-"  # a file, or the text on stdin
    command = [
        compiler.path, "-x", "hip", f"--offload-arch={compiler.arch}", "--cuda-device-only",
        "-fsyntax-only", *flags, *(f"-I{d}" for d in includes), given,
    ]  # fmt: skip
    try:
        done = subprocess.run(
            command, input=None if directory is not None else text, capture_output=True,
            text=True, timeout=timeout_s,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise CompileError(
            f"{compiler.label} did not finish checking {source_name} within {timeout_s:.0f} s; "
            "it was stopped",
            source_path=source_name,
        ) from None
    except OSError as failure:  # the clang went away since it was found: as if none
        del failure
        return None
    if done.returncode == 0:
        remembered.parent.mkdir(parents=True, exist_ok=True)
        tmp = remembered.with_name(f"{key}.{os.getpid()}.tmp")
        tmp.write_text(compiler.version_line)
        os.replace(tmp, remembered)
        return compiler.label
    log = done.stderr.replace("<stdin>", source_name)
    said = first_error(log) or f"exit status {done.returncode}"
    if "file not found" in said:
        # a header of ROCm's or CUDA's (hip_fp16.h ...) that the plugin's own HIP header
        # does not stand in for: the check cannot judge this source, which may well compile
        # on a GPU; a false failure would cry wolf, so it is left unchecked, as without clang
        return None
    file, line = error_location(log, source_name)
    raise CompileError(
        f"does not compile ({compiler.label}, checked for the simulated device): {said}",
        log=log,
        source_path=file or source_name,
        line=line,
    )


def check_module(
    module: Module, path: Path, options: Sequence[str], defines: Mapping[str, str | int]
) -> None:
    """A simulated module's source checked (raises CompileError); its log says whether a
    compiler looked at it."""
    checked = check_syntax(path, defines=defines, options=options)
    if checked is None:
        module.log = (
            "simulated device: not compiled (no clang at hand, or a header only a GPU "
            "toolkit has; structure checked only)"
        )
    else:
        module.log = f"simulated device: syntax checked with {checked}; no code was generated"


__all__ = ["SYNTAX_ARCH", "check_module", "check_syntax", "first_error", "syntax_clang"]
