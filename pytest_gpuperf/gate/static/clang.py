"""Finding a clang that compiles HIP for an AMD GPU architecture, and its version.

The static gate needs only a stock clang (Debian's `clang-19` emits real gfx942 code), no
ROCm and no GPU. A clang is usable for an arch when it accepts `-x hip --offload-arch=<arch>
--cuda-device-only -nogpulib` on a one-line kernel; we try that rather than trust a version
number, since distribution builds differ in the targets they enable. Probes are cached per
process (each is one short compiler run).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pytest_gpuperf.gate.static.errors import (
    CLANG_INSTALL_HINT,
    ClangNotFound,
    StaticUnavailable,
    UnknownArch,
)

# The version the project's tests run first, then newer, then older, then whatever `clang`
# is, then ROCm's own clang: the first that knows the arch wins.
CANDIDATES = (
    "clang-19",
    "clang-22",
    "clang-21",
    "clang-20",
    "clang-18",
    "clang-17",
    "clang",
    "/opt/rocm/llvm/bin/clang",
)
PROBE_TIMEOUT_S = 60.0
_PROBE_SOURCE = 'extern "C" __attribute__((global)) void gpuperf_probe() {}\n'
_VERSION_RE = re.compile(r"clang version (\d+(?:\.\d+)*)")
_ARCH_ERRORS = (
    "invalid target id",
    "unsupported cuda gpu architecture",
    "unsupported hip gpu architecture",
    "unknown target cpu",
    "invalid offload arch",
)


@dataclass(frozen=True)
class Clang:
    """A clang that compiles HIP for `arch`: its path, "19.1.7", and its `--version` line
    (which names the distribution's build, and so belongs in cache keys)."""

    path: str
    version: str
    version_line: str
    arch: str

    @property
    def label(self) -> str:
        """ "clang 19.1.7", as reports and stored facts name the compiler."""
        return f"clang {self.version}"


def find_clang(explicit: str | os.PathLike[str] | None = None, arch: str = "gfx942") -> Clang:
    """The clang to use for `arch`: `explicit` (a path or a command name) when given, else
    the first of CANDIDATES on PATH that compiles HIP for `arch`.

    Raises `UnknownArch` when the clang(s) found reject the arch itself, and
    `StaticUnavailable` (listing every candidate and why it was refused) when none works.
    """
    names = [os.fspath(explicit)] if explicit is not None else list(CANDIDATES)
    tried: list[tuple[str, str]] = []
    found: list[tuple[str, str]] = []  # (path, kind of refusal) of each clang that exists
    for name in names:
        path = _resolve(name)
        if path is None:
            tried.append((name, "not found" if explicit is None else "not found or not executable"))
            continue
        verdict = _probe(path, arch)
        if isinstance(verdict, Clang):
            return verdict
        kind, reason = verdict
        tried.append((name, reason))
        found.append((path, kind))
    if found and all(kind == "arch" for _, kind in found):
        clang = found[0][0]
        raise UnknownArch(arch, clang, supported_processors(clang))
    if explicit is None:
        raise ClangNotFound(
            f"no clang on PATH cannot compile HIP for {arch}: {CLANG_INSTALL_HINT}", tried
        )
    given = f"the clang given ({names[0]}) cannot compile HIP for {arch}"
    raise StaticUnavailable(f"{given}: {CLANG_INSTALL_HINT}", tried)


def _resolve(name: str) -> str | None:
    if os.sep in name or (os.altsep and os.altsep in name):
        path = Path(name)
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    return shutil.which(name)


@functools.lru_cache(maxsize=64)
def _probe(path: str, arch: str) -> Clang | tuple[str, str]:
    """A Clang when `path` compiles a one-line HIP kernel for `arch`, else (kind, reason)
    with kind "arch" (the arch was rejected) or "tool" (anything else)."""
    try:
        done = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired) as failure:
        return "tool", f"could not run it ({failure})"
    first_line = done.stdout.strip().splitlines()[0] if done.stdout.strip() else ""
    match = _VERSION_RE.search(first_line)
    if done.returncode != 0 or match is None:
        said = first_line or done.stderr.strip()
        return "tool", f"`--version` did not name a clang version ({said!r:.120})"
    with tempfile.TemporaryDirectory(prefix="gpuperf-clang-probe-") as tmp:
        source = Path(tmp) / "probe.hip"
        source.write_text(_PROBE_SOURCE)
        command = [path, "-x", "hip", f"--offload-arch={arch}", "--cuda-device-only",
                   "-nogpulib", "-nogpuinc", "-S", str(source), "-o", os.devnull]  # fmt: skip
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as failure:
            return "tool", f"the probe compile did not finish ({failure})"
    if done.returncode == 0:
        return Clang(path=path, version=match.group(1), version_line=first_line, arch=arch)
    error = _first_error(done.stderr)
    kind = "arch" if any(marker in error.lower() for marker in _ARCH_ERRORS) else "tool"
    return kind, f"clang {match.group(1)} refused -x hip --offload-arch={arch}: {error}"


def _first_error(stderr: str) -> str:
    for line in stderr.splitlines():
        if "error:" in line:
            return line.split("error:", 1)[1].strip()[:200]
    return stderr.strip()[:200] or "no message"


@functools.lru_cache(maxsize=16)
def supported_processors(clang: str) -> tuple[str, ...]:
    """The gfx processors `clang` knows (from `--print-supported-cpus`), () if it cannot say."""
    command = [clang, "--target=amdgcn-amd-amdhsa", "-nogpulib", "--print-supported-cpus",
               "-x", "c", "-c", os.devnull, "-o", os.devnull]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    found = re.findall(r"^\s+(gfx\w+)\s*$", done.stdout + done.stderr, re.M)
    return tuple(sorted(set(found), key=_processor_order))


def _processor_order(name: str) -> tuple[int, str]:
    """gfx600 < gfx908 < gfx90a < gfx942 < gfx1030: by length, then by the (hex-like) name."""
    return (len(name), name)
