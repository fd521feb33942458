"""The static gate's decision: one kernel's facts before and after, as a structured result.

The rules (docs/static-gate.md says why these and not others):
- unchanged: same machine code (fingerprint) for the same launch shape; nothing to check.
- fail ("occupancy-drop"): fewer resident waves per CU than before;
- fail ("scratch-appeared", "vgpr-spill-appeared", "sgpr-spill-appeared"): a kernel that
  used no scratch, or spilled nothing, now does;
- fail ("vgpr-growth", "lds-growth"): VGPRs or LDS grew by more than a margin (relative,
  and more than a floor: one VGPR allocation granule, `lds_min_growth_bytes`), even where
  occupancy held at this launch shape - the headroom to the next occupancy step is gone;
- otherwise, changed code passes, with the list of what changed.

The result holds no prose: renderers (gate/static/render.py) turn it into text.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from pytest_gpuperf.gate.static.errors import StaticFactsError
from pytest_gpuperf.gate.static.facts import StaticFacts
from pytest_gpuperf.runtime.occupancy import cu_limits

DEFAULT_VGPR_GRANULE = 8  # gfx90a/gfx942 allocate VGPRs in blocks of 8 (runtime/occupancy.py)


class StaticStatus(str, enum.Enum):
    UNCHANGED = "unchanged"
    CHANGED = "changed"  # the code changed, within the rules: passes
    FAILED = "failed"


@dataclass(frozen=True)
class StaticMargins:
    """How much growth passes without an occupancy change: `vgpr_growth` and `lds_growth`
    are fractions of the before value (0.25: up to +25%); growth must also exceed one VGPR
    allocation granule, or `lds_min_growth_bytes`, to fail."""

    vgpr_growth: float = 0.25
    lds_growth: float = 0.25
    lds_min_growth_bytes: int = 1024

    def __post_init__(self) -> None:
        for name in ("vgpr_growth", "lds_growth"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and value >= 0 and math.isfinite(value)):
                raise StaticFactsError(f"the static margin {name} must be >= 0, not {value!r}")
        if self.lds_min_growth_bytes < 0:
            raise StaticFactsError("the static margin lds_min_growth_bytes must be >= 0")


DEFAULT_MARGINS = StaticMargins()


@dataclass(frozen=True)
class StaticChange:
    """One quantity that differs: before, after, the relative change (None when before is
    zero or the values are not numbers) and the rule it breaks (None: within the rules)."""

    quantity: str
    before: int | float | str | None
    after: int | float | str | None
    relative: float | None = None
    rule: str | None = None

    @property
    def fails(self) -> bool:
        return self.rule is not None


@dataclass(frozen=True)
class StaticComparison:
    """The gate's decision for one kernel, with both sides' facts for the renderers."""

    status: StaticStatus
    before: StaticFacts
    after: StaticFacts
    changes: tuple[StaticChange, ...] = ()
    margins: StaticMargins = DEFAULT_MARGINS

    @property
    def kernel(self) -> str:
        return self.after.kernel

    @property
    def arch(self) -> str:
        return self.after.arch

    @property
    def failed(self) -> bool:
        return self.status is StaticStatus.FAILED

    @property
    def failures(self) -> tuple[StaticChange, ...]:
        return tuple(change for change in self.changes if change.fails)

    @property
    def code_changed(self) -> bool:
        return self.before.fingerprint != self.after.fingerprint

    @property
    def limiter_moved(self) -> tuple[str | None, str | None] | None:
        """(before, after) occupancy limiter when it moved, else None."""
        before, after = self.before.occupancy_limiter, self.after.occupancy_limiter
        return (before, after) if before != after else None

    @property
    def toolchain_changed(self) -> bool:
        """The compiler or HIP header differs: a difference may come from the tools, not
        from the source."""
        return self.before.toolchain != self.after.toolchain

    @property
    def launch_changed(self) -> bool:
        before, after = self.before, self.after
        return (before.block_threads, before.dynamic_lds_bytes) != (
            after.block_threads,
            after.dynamic_lds_bytes,
        )

    def change(self, quantity: str) -> StaticChange | None:
        return next((c for c in self.changes if c.quantity == quantity), None)


# Reported in this order; each is a StaticFacts attribute.
QUANTITIES = (
    "occupancy", "waves_per_simd", "occupancy_limiter", "vgprs", "arch_vgprs", "agprs",
    "sgprs", "lds_bytes", "scratch_bytes", "vgpr_spills", "sgpr_spills", "calls",
    "block_threads", "dynamic_lds_bytes", "fingerprint",
)  # fmt: skip


def compare_facts(
    before: StaticFacts, after: StaticFacts, margins: StaticMargins = DEFAULT_MARGINS
) -> StaticComparison:
    """Decide one kernel: unchanged, changed within the rules, or failed (module docstring).

    Both sides must be the same kernel for the same arch (`StaticFactsError` otherwise).
    """
    if (before.kernel, before.arch) != (after.kernel, after.arch):
        raise StaticFactsError(
            f"cannot compare {before.kernel} ({before.arch}) with {after.kernel} ({after.arch}): "
            "static facts compare one kernel on one arch"
        )
    same_launch = (before.block_threads, before.dynamic_lds_bytes) == (
        after.block_threads,
        after.dynamic_lds_bytes,
    )
    if before.fingerprint == after.fingerprint and same_launch:
        return StaticComparison(StaticStatus.UNCHANGED, before, after, (), margins)
    changes = tuple(
        _change(name, before, after, margins)
        for name in QUANTITIES
        if _value(before, name) != _value(after, name)
    )
    status = StaticStatus.FAILED if any(c.fails for c in changes) else StaticStatus.CHANGED
    return StaticComparison(status, before, after, changes, margins)


def _value(facts: StaticFacts, name: str):
    value = getattr(facts, name)
    return ", ".join(value) if isinstance(value, tuple) else value


def _change(name: str, before: StaticFacts, after: StaticFacts, margins: StaticMargins):
    old, new = _value(before, name), _value(after, name)
    return StaticChange(name, old, new, _relative(old, new), _rule(name, before, after, margins))


def _relative(old, new) -> float | None:
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (old, new))
    if not numbers or old == 0:
        return None
    return (new - old) / old


def _rule(name: str, before: StaticFacts, after: StaticFacts, margins: StaticMargins) -> str | None:
    """The rule this quantity's change breaks, if any."""
    if name in ("occupancy", "waves_per_simd"):
        old, new = getattr(before, name), getattr(after, name)
        if old is not None and new is not None and new < old:
            return "occupancy-drop"
    if name == "scratch_bytes" and before.scratch_bytes == 0 < after.scratch_bytes:
        return "scratch-appeared"
    if name == "vgpr_spills" and before.vgpr_spills == 0 < after.vgpr_spills:
        return "vgpr-spill-appeared"
    if name == "sgpr_spills" and before.sgpr_spills == 0 < after.sgpr_spills:
        return "sgpr-spill-appeared"
    if name == "vgprs":
        granule = _vgpr_granule(after.arch)
        old = _allocated(before.vgprs, granule)
        new = _allocated(after.vgprs, granule)
        if new - old > max(margins.vgpr_growth * old, granule):
            return "vgpr-growth"
    if name == "lds_bytes":
        growth = after.lds_bytes - before.lds_bytes
        if growth > max(margins.lds_growth * before.lds_bytes, margins.lds_min_growth_bytes):
            return "lds-growth"
    return None


def _vgpr_granule(arch: str) -> int:
    limits = cu_limits(arch)
    return limits.vgpr_granule if limits else DEFAULT_VGPR_GRANULE


def _allocated(vgprs: int, granule: int) -> int:
    """VGPRs the hardware allocates: growth within one granule costs nothing."""
    return max(granule, math.ceil(vgprs / granule) * granule)
