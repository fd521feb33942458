"""Kernel compilation, vendor-neutral: on-disk cache and a child process with a time limit.

Run-time compilers can abort the whole process (Debian's ROCm 5.2 hiprtc does for gfx942) or
hang; compiling in a child turns either into a `CompileError` for one kernel
while the pytest session goes on. Results are cached on disk, keyed by everything that can
change the binary: source, headers, options, arch, compiler and its version.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import pickle
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_gpuperf.errors import CompileError

# compiler name -> module with `version() -> str` and `compile(request) -> (bytes, log)`;
# `compile` raises CompilerFailed with the log when the source does not compile.
COMPILERS = {
    "hiprtc": "pytest_gpuperf.runtime.hip_compiler",
    "nvrtc": "pytest_gpuperf.runtime.cuda_compiler",
}

DEFAULT_TIMEOUT_S = 300.0


def _kernels_dir() -> Path:
    """kernels/ inside an installed wheel, else the repository's top-level kernels/."""
    packaged = Path(__file__).parent.parent / "kernels"
    return packaged if packaged.is_dir() else Path(__file__).parents[2] / "kernels"


KERNELS_DIR = _kernels_dir()


class CompilerFailed(Exception):
    """Raised inside the child by a compiler module; carries the compiler's log."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


def program_output(
    program: Any,
    size_of: Callable[[Any], tuple[Any, int]],
    read: Callable[[Any, bytearray], tuple[Any]],
    success: Any,
) -> tuple[Any, bytes]:
    """What NVRTC and hiprtc hand out in two calls, its size and then a buffer of that size
    to fill (the code, the log): the last call's status, and the bytes, empty when a call
    failed or there were none."""
    status, size = size_of(program)
    buffer = bytearray(size)
    if status == success and size:
        (status,) = read(program, buffer)
    return status, bytes(buffer) if status == success else b""


def program_log(
    program: Any,
    size_of: Callable[[Any], tuple[Any, int]],
    read: Callable[[Any, bytearray], tuple[Any]],
    success: Any,
) -> str:
    """The compiler's log of `program` as text ("" when there is none or it cannot be read)."""
    _, raw = program_output(program, size_of, read, success)
    return raw.rstrip(b"\0").decode(errors="replace")


@dataclass(frozen=True)
class CompileRequest:
    """Everything a compiler needs; picklable so it can cross into the child process."""

    compiler: str
    source: str
    source_name: str  # a path for files, "<string>" for sources given as text
    arch: str
    options: tuple[str, ...] = ()
    headers: tuple[tuple[str, str], ...] = ()  # (include name, content), in-memory

    def cache_key(self, compiler_version: str) -> str:
        digest = hashlib.sha256()
        for part in (self.compiler, compiler_version, self.arch, self.source, *self.options):
            digest.update(part.encode())
            digest.update(b"\0")
        for name, content in self.headers:
            digest.update(name.encode() + b"\0" + content.encode() + b"\0")
        return digest.hexdigest()


@dataclass(frozen=True)
class CompileResult:
    binary: bytes
    log: str
    compiler_version: str
    from_cache: bool = False
    meta: dict = field(default_factory=dict)


def portability_headers() -> tuple[tuple[str, str], ...]:
    """The headers shipped in kernels/ (the portability header among them), in memory."""
    return tuple((path.name, path.read_text()) for path in sorted(KERNELS_DIR.glob("*.h")))


SOURCE_SUFFIXES = (".hip", ".cu", ".cpp", ".cc", ".h")
_LOCAL_INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def read_source(source: str | Path, name: str | None = None) -> tuple[str, str, Path | None]:
    """(text, name for messages, the file's directory) of a kernel source.

    A Path, or a one-line str ending in a source suffix (.hip, .cu, ...), is read from disk;
    any other str is the source itself, named `name` or "<string>".
    """
    is_path = isinstance(source, Path) or ("\n" not in source and source.endswith(SOURCE_SUFFIXES))
    if not is_path:
        return str(source), name or "<string>", None
    path = Path(source)
    try:
        return path.read_text(encoding="utf-8"), name or str(path), path.parent
    except UnicodeDecodeError as failure:
        raise CompileError(
            f"the kernel source is not UTF-8 text (byte {failure.start}: {failure.reason}); "
            "save it as UTF-8",
            source_path=str(path),
        ) from None
    except OSError as failure:
        raise CompileError(
            f"cannot read the kernel source: {failure}", source_path=str(path)
        ) from None


def local_headers(
    text: str, directory: Path | None, skip: set[str] | frozenset[str] = frozenset()
) -> tuple[tuple[str, str], ...]:
    """The headers `text` includes with quotes from `directory` (recursively), in memory.

    Run-time compilers see only in-memory headers, and only what is in the request takes
    part in the cache key: an edited local header must recompile its kernels.
    """
    if directory is None:
        return ()
    found: dict[str, str] = {}
    pending = [text]
    while pending:
        for include in _LOCAL_INCLUDE_RE.findall(pending.pop()):
            path = directory / include
            if include in skip or include in found or not path.is_file():
                continue
            found[include] = path.read_text()
            pending.append(found[include])
    return tuple(sorted(found.items()))


def source_request(
    compiler: str,
    source: str | Path,
    name: str | None,
    arch: str,
    options: Sequence[str] = (),
    defines: Mapping[str, str | int] | None = None,
) -> CompileRequest:
    """What a driver backend (cuda, hip) asks `compiler` for to build `source` (a file or the
    text; see read_source) for `arch`: the defines as -D flags after the options, and in
    memory the portability headers and the local headers the source includes."""
    text, source_name, directory = read_source(source, name)
    flags = (*options, *(f"-D{key}={value}" for key, value in (defines or {}).items()))
    shipped = portability_headers()
    local = local_headers(text, directory, {n for n, _ in shipped})
    return CompileRequest(compiler, text, source_name, arch, tuple(flags), (*shipped, *local))


CACHE_ENV = "GPUPERF_CACHE_DIR"


def cache_dir() -> Path:
    """`$GPUPERF_CACHE_DIR`, else `$XDG_CACHE_HOME/pytest-gpuperf/kernels` (`~/.cache` when
    XDG_CACHE_HOME is unset or relative, as the XDG specification says).

    A relative `$GPUPERF_CACHE_DIR` (after `~` expansion) is taken inside that cache home
    (`GPUPERF_CACHE_DIR=kcache` is `~/.cache/kcache`), never the current directory, as the
    lock folder takes a relative `$GPUPERF_LOCK_DIR` inside the temp dir: in the checkout,
    pytest collected the base revision's tests and conftest.py extracted under it ("import
    file mismatch") and `git status` listed it; and a test that changed directory moved it."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    home = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    given = os.environ.get(CACHE_ENV)
    if not given:
        return home / "pytest-gpuperf" / "kernels"
    folder = Path(os.path.expanduser(given))
    return folder if folder.is_absolute() else home / folder


def compiler_version(compiler: str) -> str:
    return _compiler_module(compiler).version()


def _compiler_module(compiler: str):
    try:
        return importlib.import_module(COMPILERS[compiler])
    except KeyError:
        raise CompileError(f"unknown compiler {compiler!r}; known: {sorted(COMPILERS)}") from None


_LOCATION_PATTERNS = (
    re.compile(r"^(?P<file>[^\s:()]+):(?P<line>\d+):(?:\d+:)?\s*(?:fatal )?error", re.M),
    re.compile(r"^(?P<file>[^\s:()]+)\((?P<line>\d+)\):\s*(?:catastrophic )?error", re.M),
)


def error_location(log: str, source_name: str | None = None) -> tuple[str | None, int | None]:
    """The file and line of the first error in a clang-style or NVRTC-style log.

    The source's own name is looked for literally first: a path may hold spaces, colons or
    parentheses that no general pattern can tell from the log's own punctuation."""
    found: list[tuple[int, str, int]] = []
    if source_name:
        name = re.escape(source_name)
        literal = re.compile(
            rf"^(?P<file>{name})(?::(?P<a>\d+):(?:\d+:)?\s*(?:fatal )?error"
            rf"|\((?P<b>\d+)\):\s*(?:catastrophic )?error)",
            re.M,
        )
        match = literal.search(log)
        if match:
            found.append((match.start(), source_name, int(match.group("a") or match.group("b"))))
    for pattern in _LOCATION_PATTERNS:
        match = pattern.search(log)
        if match:
            found.append((match.start(), match.group("file"), int(match.group("line"))))
    if not found:
        return None, None
    _, file, line = min(found)
    return file, line


def compile_source(
    request: CompileRequest,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    use_cache: bool = True,
) -> CompileResult:
    """Compile in a child process, through the on-disk cache.

    Raises `CompileError` with the compiler's log and the source file:line of the first
    error, or with the child's fate when the compiler crashed or hung.
    """
    version = compiler_version(request.compiler)
    key = request.cache_key(version)
    cached = cache_dir() / f"{key}.bin"
    if use_cache and cached.is_file():
        log_path = cached.with_suffix(".log")
        try:
            log = log_path.read_text(errors="replace") if log_path.is_file() else ""
            return CompileResult(cached.read_bytes(), log, version, from_cache=True)
        except OSError:
            pass  # an unreadable cache entry costs a recompile, never a failure

    binary, log = _compile_in_child(request, timeout_s)
    if use_cache:
        _store(cached, binary, log)
    return CompileResult(binary, log, version)


def _store(path: Path, binary: bytes, log: str) -> None:
    """Write atomically, so a concurrent reader never sees half a binary."""
    tmp = ""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for target, data in ((path.with_suffix(".log"), log.encode()), (path, binary)):
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, target)
            tmp = ""
    except OSError:
        pass  # a read-only or full cache directory costs a recompile, never a failure
    finally:
        if tmp:  # a write that failed (a full disk) or was interrupted: no debris
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _child_environment() -> dict[str, str]:
    """The parent's environment, with this package first on the child's import path, so the
    child imports the same pytest_gpuperf even when it is not installed (PYTHONPATH=.)."""
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (package_root, env.get("PYTHONPATH"))))
    return env


def _compile_in_child(request: CompileRequest, timeout_s: float) -> tuple[bytes, str]:
    command = [sys.executable, "-m", "pytest_gpuperf.runtime._compile_child"]
    # The module travels with the request: a compiler registered in COMPILERS at run time
    # (a test's fake, a plugin's) is unknown to the child's fresh import of this module.
    module_name = COMPILERS[request.compiler]
    try:
        proc = subprocess.run(
            command,
            input=pickle.dumps((module_name, request)),
            capture_output=True,
            timeout=timeout_s,
            check=False,
            env=_child_environment(),
        )
    except subprocess.TimeoutExpired:
        raise CompileError(
            f"the {request.compiler} compiler did not finish within {timeout_s:.0f} s "
            f"(arch {request.arch}); it was stopped",
            source_path=request.source_name,
        ) from None
    stderr = proc.stderr.decode(errors="replace")
    if proc.returncode != 0:
        how = (
            f"was killed by signal {-proc.returncode}"
            if proc.returncode < 0
            else f"exited with status {proc.returncode}"
        )
        raise CompileError(
            f"the {request.compiler} compiler crashed: its process {how} while compiling "
            f"for {request.arch}",
            log=stderr[-4000:],
            source_path=request.source_name,
        )
    status, payload = pickle.loads(proc.stdout)
    if status == "ok":
        return payload
    message, log = payload
    file, line = error_location(log, request.source_name)
    return_path = request.source_name if file in (None, request.source_name) else file
    raise CompileError(message, log=log, source_path=return_path, line=line)
