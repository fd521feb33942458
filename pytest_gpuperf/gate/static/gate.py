"""The static gate's decision for a test: one structured result per kernel entry and arch.

`compare_facts` (gate/static/compare.py) decides what changed between two readings of one
kernel; this module adds what the plugin's mode needs around it - nothing to compare with
("new"), a build that failed ("error"), the test's ISA expectations, --gpuperf-strict and
--gpuperf-save - and decides once whether the kernel fails its test. The results are frozen
dataclasses of plain values (`pytest_gpuperf.engine.plain` carries them from xdist workers to the
controller); text is made only by gate/static/render.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from pytest_gpuperf.gate.static.compare import (
    DEFAULT_MARGINS,
    StaticChange,
    StaticComparison,
    StaticMargins,
    StaticStatus,
    compare_facts,
)
from pytest_gpuperf.gate.static.facts import StaticFacts

# What a kernel entry's check found (the first three are StaticStatus values).
UNCHANGED, CHANGED, FAILED = "unchanged", "changed", "failed"
NEW = "new"  # nothing to compare with: no stored facts, or no such file/kernel at REF
ERROR = "error"  # the kernel could not be built or read for the arch
STATUSES = (UNCHANGED, CHANGED, FAILED, NEW, ERROR)
# What the facts were compared with.
AGAINST_STORED, AGAINST_REF = "stored", "ref"


@dataclass(frozen=True)
class KernelCheck:
    """One kernel entry of one test on one arch: its facts, what they were compared with,
    what changed, the ISA expectations it lacks, and whether that fails the test.

    `name` keys the stored entry: the kernel's name, with the build or launch shape added
    when one test uses the same kernel several ways. `against` is "stored" or "ref";
    `against_label` names the file or revision; `no_base` says why there was nothing to
    compare with (status "new"). `accepted` marks rule breaks that --gpuperf-save recorded
    instead of failing on. `launched` is False for a kernel the test loaded but never
    launched: its facts are for the default block of 256 threads."""

    name: str
    kernel: str
    arch: str
    source: str
    status: str
    fails: bool
    facts: StaticFacts | None = None
    before: StaticFacts | None = None
    changes: tuple[StaticChange, ...] = ()
    margins: StaticMargins = DEFAULT_MARGINS
    against: str = AGAINST_STORED
    against_label: str = ""
    no_base: str = ""
    expect_isa: tuple[str, ...] = ()
    missing_isa: tuple[str, ...] = ()
    error: str = ""
    launched: bool = True
    accepted: bool = False
    saved: bool = False
    strict_no_base: bool = False  # fails only because --gpuperf-strict wants a base

    @property
    def comparison(self) -> StaticComparison | None:
        """The comparison the renderers of gate/static/render.py read (None without one)."""
        if (
            self.facts is None
            or self.before is None
            or self.status
            not in (
                UNCHANGED,
                CHANGED,
                FAILED,
            )
        ):
            return None
        return StaticComparison(
            StaticStatus(self.status), self.before, self.facts, self.changes, self.margins
        )

    @property
    def rules_failed(self) -> bool:
        return self.status == FAILED and not self.accepted

    @property
    def toolchain_changed(self) -> bool:
        return bool(self.before and self.facts and self.before.toolchain != self.facts.toolchain)


@dataclass(frozen=True)
class StaticTestResult:
    """The static gate's result for one test: every kernel entry on every arch."""

    __test__ = False  # not a test class

    test_id: str
    checks: tuple[KernelCheck, ...]
    update_command: str = ""

    @property
    def failed(self) -> bool:
        return any(check.fails for check in self.checks)

    @property
    def failing(self) -> tuple[KernelCheck, ...]:
        return tuple(check for check in self.checks if check.fails)


def judge_kernel(
    name: str,
    after: StaticFacts,
    before: StaticFacts | None,
    *,
    source: str,
    against: str = AGAINST_STORED,
    against_label: str = "",
    no_base: str = "",
    margins: StaticMargins = DEFAULT_MARGINS,
    expect_isa: Sequence[str] = (),
    missing_isa: Sequence[str] = (),
    strict: bool = False,
    saving: bool = False,
    launched: bool = True,
) -> KernelCheck:
    """Decide one kernel entry. It fails its test when a static rule breaks (unless this
    run saves: saving accepts the new facts), when an expected instruction is missing
    (saving does not accept that), and under --gpuperf-strict when there was nothing to
    compare with."""
    changes: tuple[StaticChange, ...] = ()
    if before is None:
        status = NEW
    else:
        comparison = compare_facts(before, after, margins)
        status, changes = comparison.status.value, comparison.changes
    accepted = saving and status == FAILED
    fails = (
        (status == FAILED and not saving)
        or bool(missing_isa)
        or (status == NEW and strict and not saving)
    )
    return KernelCheck(
        name=name,
        kernel=after.kernel,
        arch=after.arch,
        source=source,
        status=status,
        fails=fails,
        facts=after,
        before=before,
        changes=changes,
        margins=margins,
        against=against,
        against_label=against_label,
        no_base=no_base,
        expect_isa=tuple(expect_isa),
        missing_isa=tuple(missing_isa),
        launched=launched,
        accepted=accepted,
        strict_no_base=strict and status == NEW and not saving,
    )


def judge_test(
    test_id: str,
    checks: Sequence[KernelCheck],
    *,
    saving: bool = False,
    update_command: str = "",
) -> StaticTestResult:
    """A test's result: its kernel entries, each marked saved when this run saves and no
    entry of the test fails (a test that fails records nothing, as the timing gate does)."""
    if saving and not any(check.fails for check in checks):
        checks = [replace(check, saved=check.facts is not None) for check in checks]
    return StaticTestResult(test_id, tuple(checks), update_command)


def error_check(
    name: str, kernel: str, arch: str, source: str, error: str, *, expect_isa: Sequence[str] = ()
) -> KernelCheck:
    """A kernel entry whose build (or reading) failed: it fails its test with the error."""
    isa = tuple(expect_isa)
    return KernelCheck(name, kernel, arch, source, ERROR, fails=True, error=error, expect_isa=isa)


__all__ = [
    "AGAINST_REF",
    "AGAINST_STORED",
    "CHANGED",
    "ERROR",
    "FAILED",
    "NEW",
    "STATUSES",
    "UNCHANGED",
    "KernelCheck",
    "StaticTestResult",
    "error_check",
    "judge_kernel",
    "judge_test",
]
