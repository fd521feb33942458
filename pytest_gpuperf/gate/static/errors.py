"""The errors of the static gate, subclasses of the package's own so callers catch them all.

They live here rather than in pytest_gpuperf/errors.py because only the static gate raises
them; each message names what was looked for and the way out.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_gpuperf.errors import ConfigError, GpuPerfError

CLANG_INSTALL_HINT = (
    "install one (Debian/Ubuntu: apt-get install clang-19) or name it with "
    "--gpuperf-clang=PATH (ini: gpuperf_clang)"
)


class StaticUnavailable(GpuPerfError):
    """The static gate cannot run here: no usable clang (lists every candidate tried and why
    it was refused), or ROCm pieces a chosen mode needs are missing."""

    def __init__(self, message: str, tried: Sequence[tuple[str, str]] = ()) -> None:
        self.tried = tuple(tried)
        listing = "; ".join(f"{name}: {reason}" for name, reason in self.tried)
        super().__init__(f"{message} (tried {listing})" if listing else message)


class ClangNotFound(StaticUnavailable):
    """No clang on PATH compiles HIP for the arch (none was named): the message is the long
    advice (how to install one, every candidate tried), which a run says once; `needs` is
    the short form a report row repeats."""

    needs = "the code facts need clang-19"


class UnknownArch(ConfigError):
    """clang does not know the GPU architecture asked for; names it, the clang asked, the
    architectures that clang does know, and the command that lists them."""

    def __init__(self, arch: str, clang: str, known: Sequence[str] = ()) -> None:
        self.arch = arch
        self.clang = clang
        self.known = tuple(known)
        listing = f" It knows: {', '.join(self.known)}." if self.known else ""
        super().__init__(
            f"{clang} does not know the GPU architecture {arch!r}.{listing} List them with "
            f"`{clang} --target=amdgcn-amd-amdhsa -nogpulib --print-supported-cpus`; the "
            "static gate wants an AMDGPU processor name such as gfx942 (MI300X) or gfx90a."
        )


class StaticFactsError(GpuPerfError):
    """A stored static-facts record (baseline TOML, JSON report) is malformed, or two records
    that cannot be compared were compared; names the field or the mismatch (`field`, when
    one field is at fault, so a file reader can point at its line)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field
