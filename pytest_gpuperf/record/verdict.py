"""What the gate decided for one measurement, as data: the verdict's status and checks, the
save it planned, the notes for the reader, and the row that ties it to its test.

Frozen dataclasses; the gate (`pytest_gpuperf.gate`) is the only code that builds a
`Verdict`: everything downstream (terminal, Markdown, JSON, JUnit, pytest-benchmark, the
offline commands) only reads it, and text is made by the renderers (report/).
`pytest_gpuperf.engine.plain` converts them to plain data and back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_gpuperf.engine.results import Measurement
from pytest_gpuperf.record.checks import (
    AB_INCONCLUSIVE,
    AB_MODELLED,
    AB_NO_BASE,
    AB_REGRESSED,
    NO_BASE_REF,
    NO_BASELINE,
    OTHER_DEVICE,
    REGRESSED,
    BaselineCheck,
    ComparisonCheck,
    FloorCheck,
)

# Verdict statuses: FAIL fails the test; MARGINAL passes with a warning (undecided at the
# budget, decided on the median); UNJUDGED: the test body failed, so its numbers were neither
# gated nor saved.
PASS, FAIL, MARGINAL, UNJUDGED = "pass", "fail", "marginal", "unjudged"
# MODELLED: nothing measured decided it (the simulated device timed changed code from an
# unchanged model): never a pass; pytest xfails the test, --gpuperf-strict fails it.
# ACCEPTED: a confirmed regression that --gpuperf-accept or a Gpuperf-Accept commit trailer
# names: the test passes, and every report lists it with its reason.
MODELLED, ACCEPTED = "modelled", "accepted"
# Every status, for a reader that checks a stored one is known.
STATUSES = (PASS, FAIL, MARGINAL, UNJUDGED, MODELLED, ACCEPTED)
# The checks an accepted slowdown may excuse: a regression, never a floor or a strict rule.
ACCEPTABLE_CHECKS = ("regression", "ab")


# SaveAction.why_not of a save that was planned and not made (the rest were never planned)
SAVE_NOT_MADE = ("write", "interrupted", "invalid", "crashed", "missing")


@dataclass(frozen=True)
class SaveAction:
    """What --gpuperf-save does with a measurement: where it goes, or why it is not saved."""

    saved: bool
    path: str
    device_key: str
    # "floor": the floor check failed; "unjudged": the test failed; "beyond-peak": the
    # efficiency is beyond what the device can do; "write": planned, but the file could not be
    # written (`error` says why); "interrupted": Ctrl-C (or SIGTERM) came first; "invalid":
    # the entry would not load back; "crashed": the xdist worker holding it died;
    # "missing": not in the file when the controller read it back
    why_not: str = ""
    previous_efficiency: float | None = None
    history_saves: int = 0  # saves in the entry's history after this one
    new_history: bool = False  # the code changed (fingerprint, bytes, launch): history restarts
    run_spread: float | None = None
    spread_basis: str = ""
    error: str = ""  # why the planned save was not made (write, invalid, crashed, missing)
    when: str = ""  # the save record's time stamp: how the controller finds it in the file


@dataclass(frozen=True)
class Note:
    """A fact for the reader, as data (`kind` names it; renderers word it once per run)."""

    kind: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class Acceptance:
    """An intended slowdown, accepted explicitly: the glob of test ids it names, why, and
    where it was written (`source`: "--gpuperf-accept", "gpuperf_accept (ini)" or
    "Gpuperf-Accept trailer"; `commit` the commit that carries the trailer)."""

    pattern: str
    reason: str
    source: str
    commit: str = ""

    def origin(self) -> str:
        """'Gpuperf-Accept in 1a2b3c4d5e6f' or '--gpuperf-accept'."""
        return f"Gpuperf-Accept in {self.commit[:12]}" if self.commit else self.source


@dataclass(frozen=True)
class BeyondPeak:
    """A measured efficiency the device cannot reach (gate/peak.py): the declared bytes
    moved in the measured time need more than the memory system can deliver, even at the
    slow end of the time's interval. The declaration is wrong (or the kernel skipped work);
    the test fails and nothing is saved."""

    efficiency_ci: tuple[float, float]
    limit: float  # the most efficiency reachable in this cache mode (1.0: the HBM peak)
    cache: str
    bytes_moved: int
    cache_bytes: int  # the device's caches (L2 + last-level) that a hot working set may hit
    bandwidth_bps: float
    peak_bps: float


@dataclass(frozen=True)
class Verdict:
    """What the gate decided for one measurement: the test-level status and every check.

    Renderers (report/) turn it into words; `update_command` is the command that re-records
    this measurement's baseline, quoted wherever a message asks for one.
    """

    status: str  # PASS | FAIL | MARGINAL | UNJUDGED | MODELLED | ACCEPTED
    baseline: BaselineCheck
    floor: FloorCheck | None = None
    comparison: ComparisonCheck | None = None
    save: SaveAction | None = None
    notes: tuple[Note, ...] = ()
    update_command: str = ""
    # the accept rule that names this test (status ACCEPTED when it excused a regression;
    # on any other status it was not needed: the test did not regress)
    acceptance: Acceptance | None = None
    beyond_peak: BeyondPeak | None = None  # set only when the efficiency is impossible
    # Why a failure happened, as plain data (docs/json-schema.md, "explain"): "code" (the
    # compiled code of head and base, explain/code/failure.py), "traffic" and "bytes_check".
    # None on every verdict that was not explained.
    explain: dict[str, Any] | None = None
    # No check gated this measurement: under --gpuperf-compare it got no A/B base, and it has
    # neither a stored baseline nor a floor (gate/decide.py). Its row says "not gated", never
    # a plain pass; --gpuperf-strict fails it.
    not_gated: bool = False
    # The roofline's floors on a measurement that declared its work (gate/roofline.py):
    # min_flops (compute efficiency) and min_roofline (the fraction of the roof that binds).
    flops_floor: FloorCheck | None = None
    roofline_floor: FloorCheck | None = None

    @property
    def floors(self) -> tuple[FloorCheck, ...]:
        """Every floor the measurement was given: min_bw, min_flops, min_roofline."""
        checks = (self.floor, self.flops_floor, self.roofline_floor)
        return tuple(check for check in checks if check is not None)

    @property
    def unmeasured(self) -> tuple[str, ...]:
        """The gating checks whose result restates the simulator's model rather than a
        measurement of the code: "ab" (a modelled A/B), "stored" (a modelled stored check)."""
        found = []
        if self.comparison is not None and self.comparison.state == AB_MODELLED:
            found.append("ab")
        if self.baseline.modelled and self.baseline.gating and self.save is None:
            found.append("stored")
        return tuple(found)

    @property
    def failed_checks(self) -> tuple[str, ...]:
        """Which checks failed the test: "beyond-peak", "floor", "min_flops", "min_roofline",
        "regression", "ab", "strict-baseline", "strict-ab", "strict-modelled", "drift"
        (strict)."""
        return self.causes if self.status == FAIL else ()

    @property
    def accepted_checks(self) -> tuple[str, ...]:
        """The regressions an accepted slowdown excused ("regression", "ab")."""
        return self.causes if self.status == ACCEPTED else ()

    @property
    def causes(self) -> tuple[str, ...]:
        """Every check that says fail, whatever the status made of them."""
        causes = []
        if self.beyond_peak is not None:
            causes.append("beyond-peak")
        if self.floor is not None and self.floor.status == FAIL:
            causes.append("floor")
        if self.flops_floor is not None and self.flops_floor.status == FAIL:
            causes.append("min_flops")
        if self.roofline_floor is not None and self.roofline_floor.status == FAIL:
            causes.append("min_roofline")
        if self.baseline.gating and self.baseline.outcome == REGRESSED:
            causes.append("regression")
        if (
            self.baseline.gating
            and self.baseline.strict
            and self.baseline.outcome
            in (
                NO_BASELINE,
                OTHER_DEVICE,
            )
        ):
            causes.append("strict-baseline")
        if self.baseline.gating and self.baseline.strict and self.baseline.drift is not None:
            causes.append("drift")
        comparison = self.comparison
        if comparison is not None:
            if comparison.state == AB_REGRESSED:
                causes.append("ab")
            elif comparison.strict and (
                comparison.state == AB_INCONCLUSIVE
                or (comparison.state == AB_NO_BASE and comparison.no_base_why == NO_BASE_REF)
            ):
                causes.append("strict-ab")
        strict = (self.comparison is not None and self.comparison.strict) or self.baseline.strict
        if self.unmeasured and strict:
            causes.append("strict-modelled")
        return tuple(causes)


@dataclass(frozen=True)
class Row:
    """One measurement of one test, what the gate decided, and how pytest ended the test
    (`test_outcome`: "passed", "failed", ...; "" while the test is still running)."""

    test_id: str
    measurement: Measurement
    verdict: Verdict
    test_outcome: str = ""
