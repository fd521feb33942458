"""The bytes a test declares, checked against the DRAM bytes one cold launch moved.

Efficiency is declared bytes / time / peak: a declaration 30% off gives an efficiency 30% off
and a meaningless floor. The counters say what the kernel moved: on an H200 a 256 MiB copy
read 268.44 MB (exactly its input) and wrote 247.0 MB, the rest of its output still in L2
when the kernel ended. So written bytes may fall short of the declaration by up to the L2's
size, and the check allows that on top of its 5% bound. Uniform inputs defeat it: Hopper
compresses them (an H100 read 6.4 KB of a 268 MB buffer of one constant), so a shortfall with
such an input is named as compression, not as a wrong declaration, but only as far as that
input's own size goes: a 4-byte uniform scalar buffer cannot hide a 270 MB shortfall.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from pytest_gpuperf.engine.plain import to_plain
from pytest_gpuperf.explain.counters.traffic import megabytes

BOUND = 0.05  # a gap beyond this fraction of the declaration is reported
WITHIN, OVER, UNDER, COMPRESSED, NOT_CHECKED = "within", "over", "under", "compressed", "hot"


def _size(value_bytes: int) -> str:
    """4 B, 6.4 KB, 268.4 MB: a uniform buffer may be tiny, and '0.0 MB' would hide that."""
    if value_bytes < 1000:
        return f"{value_bytes} B"
    if value_bytes < 1_000_000:
        return f"{value_bytes / 1e3:.1f} KB"
    return megabytes(value_bytes)


@dataclass(frozen=True)
class BytesCheck:
    """One cold launch's DRAM bytes against the declaration. `l2_bytes`: how much written
    data the L2 can still hold at the kernel's end; `uniform_args`: the launch's buffer
    arguments (by position) that held one value, which the GPU may compress;
    `uniform_arg_bytes`: their sizes, in the same order (an argument of unknown size excuses
    nothing)."""

    declared_bytes: int
    read_bytes: float
    written_bytes: float
    l2_bytes: int
    cache: str = "cold"
    uniform_args: tuple[int, ...] = ()
    uniform_arg_bytes: tuple[int, ...] = ()

    @property
    def measured_bytes(self) -> float:
        return self.read_bytes + self.written_bytes

    @property
    def gap(self) -> float:
        """(measured - declared) / declared: -0.08 is 8% fewer bytes than declared."""
        return (self.measured_bytes - self.declared_bytes) / self.declared_bytes

    @property
    def hidden_bytes(self) -> int:
        """The written bytes the L2 may still hold: never more than was declared."""
        return min(self.l2_bytes, self.declared_bytes)

    @property
    def compressible_bytes(self) -> int:
        """The most a compressed uniform input can hide: the sum of the uniform buffers'
        sizes (compression can make a buffer read as nothing, never as less than nothing)."""
        return sum(self.uniform_arg_bytes[: len(self.uniform_args)])

    @property
    def outcome(self) -> str:
        if self.cache == "hot":
            return NOT_CHECKED
        if self.measured_bytes > self.declared_bytes * (1 + BOUND):
            return OVER
        floor = self.declared_bytes * (1 - BOUND) - self.hidden_bytes
        if self.measured_bytes < floor:
            excused = self.measured_bytes + self.compressible_bytes >= floor
            return COMPRESSED if self.uniform_args and excused else UNDER
        return WITHIN

    @property
    def warns(self) -> bool:
        return self.outcome in (OVER, UNDER)

    def line(self) -> str:
        moved = (
            f"DRAM read {megabytes(self.read_bytes)} + written {megabytes(self.written_bytes)} "
            f"against {megabytes(self.declared_bytes)} declared ({self.gap:+.1%})"
        )
        outcome = self.outcome
        if outcome == NOT_CHECKED:
            return "declared bytes not checked: cache=hot serves the launch from the caches"
        if outcome == WITHIN:
            return (
                f"declared bytes match the counters: {moved}, within {BOUND:.0%} once the "
                f"{megabytes(self.hidden_bytes)} of writes the L2 can still hold are allowed"
            )
        if outcome == COMPRESSED:
            args = ", ".join(str(i) for i in self.uniform_args)
            return (
                f"declared bytes not checked: {moved}; argument(s) {args} hold one value, which "
                "the GPU compresses (an H100 read 6.4 KB of a 268 MB constant buffer): give the "
                "test realistic inputs to check its declaration"
            )
        if outcome == OVER:
            return (
                f"declared bytes look too low: {moved}: the kernel moves more than the test "
                "declares, so its efficiency is understated (declare every byte each input "
                "and output must move, or find the extra traffic)"
            )
        uniform = ""
        if self.uniform_args:
            args = ", ".join(str(i) for i in self.uniform_args)
            uniform = (
                f" (argument(s) {args} hold one value, but {_size(self.compressible_bytes)} "
                "compressed away cannot explain the gap)"
            )
        return (
            f"declared bytes look too high: {moved}, beyond {BOUND:.0%} and the "
            f"{megabytes(self.hidden_bytes)} of writes the L2 can hold{uniform}: the efficiency "
            "is overstated; declare only what the kernel must move"
        )

    def plain(self) -> dict[str, Any]:
        return plain_check(self)


class CheckedDeclaration(Protocol):
    """A declaration checked against the counters: BytesCheck, flops_check.FlopsCheck."""

    @property
    def gap(self) -> float | None: ...

    @property
    def outcome(self) -> str: ...

    @property
    def warns(self) -> bool: ...

    def line(self) -> str: ...


def plain_check(check: CheckedDeclaration) -> dict[str, Any]:
    """A check as plain data (the JSON report's explain.bytes_check, explain.flops_check): its
    fields, as engine.plain.to_plain gives every result's, then what it found."""
    return {
        **to_plain(check),
        "gap": check.gap,
        "outcome": check.outcome,
        "warns": check.warns,
        "line": check.line(),
    }


__all__ = ["BOUND", "BytesCheck", "CheckedDeclaration", "plain_check"]
