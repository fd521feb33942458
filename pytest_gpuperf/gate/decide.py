"""Compose the checks of one measurement into its Verdict: the gate decides here, once.

A test fails when its efficiency is beyond what the device can do (gate/peak.py), when a
floor is missed (min_bw, or the roofline's min_flops and min_roofline: gate/roofline.py),
when the stored baseline regressed (while that baseline gates), when a baseline is required
(strict) and missing, under strict when the entry drifted downward
across its replaced baselines (gate/drift.py), when the A/B comparison says
REGRESSED, or under strict when the A/B comparison stays INCONCLUSIVE or could not reach the
base revision at all. A measurement that gets no A/B base is gated by its stored baseline as
in a run without compare; one with neither (nor a floor) is marked `not_gated` (strict fails
it for its missing baseline). Saving re-records the baseline, so while saving a baseline
regression or a missing baseline does not fail; a missed floor still does and is not saved.

Only a measured verdict is green: where the gating check restates the simulated device's model
instead of timing the code (a `modelled` A/B, or a stored entry saved from other code), the
status is MODELLED, which the pytest layer shows as xfailed, and FAIL under strict.

A failure whose every cause is a regression (stored or A/B) becomes ACCEPTED when an accept
rule names the test (--gpuperf-accept, a Gpuperf-Accept commit trailer): intended, passed and
listed with its reason. A floor or a strict rule is never accepted.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pytest_gpuperf.record.checks import (
    AB_NO_BASE,
    NO_BASELINE,
    OTHER_DEVICE,
    BaselineCheck,
    ComparisonCheck,
    FloorCheck,
)
from pytest_gpuperf.record.verdict import (
    ACCEPTABLE_CHECKS,
    ACCEPTED,
    FAIL,
    MARGINAL,
    MODELLED,
    PASS,
    UNJUDGED,
    Acceptance,
    BeyondPeak,
    Note,
    SaveAction,
    Verdict,
)


def decide(
    *,
    baseline: BaselineCheck,
    floor: FloorCheck | None = None,
    comparison: ComparisonCheck | None = None,
    save: SaveAction | None = None,
    unjudged: bool = False,
    notes: tuple[Note, ...] = (),
    update_command: str = "",
    acceptance: Acceptance | None = None,
    beyond_peak: BeyondPeak | None = None,
    flops_floor: FloorCheck | None = None,
    roofline_floor: FloorCheck | None = None,
) -> Verdict:
    """The verdict of one measurement from its checks (see the module docstring);
    `acceptance` is the accept rule naming this test, if any; `beyond_peak` an efficiency
    the device cannot reach (never accepted: the declaration is wrong, not the speed);
    `flops_floor` and `roofline_floor` the roofline's floors (gate/roofline.py), decided as
    the floor is."""
    draft = Verdict(
        status=PASS,
        baseline=baseline,
        floor=floor,
        comparison=comparison,
        save=save,
        notes=notes,
        update_command=update_command,
        acceptance=acceptance,
        beyond_peak=beyond_peak,
        flops_floor=flops_floor,
        roofline_floor=roofline_floor,
    )
    if unjudged:
        status = UNJUDGED
    elif beyond_peak is not None:
        status = FAIL
    elif _fails(draft, saving=save is not None):
        causes = draft.causes
        excused = bool(causes) and all(cause in ACCEPTABLE_CHECKS for cause in causes)
        status = ACCEPTED if acceptance is not None and excused else FAIL
    elif draft.unmeasured:
        status = FAIL if "strict-modelled" in draft.causes else MODELLED
    elif any(check.status == MARGINAL for check in draft.floors):
        status = MARGINAL
    else:
        status = PASS
    return replace(draft, status=status, not_gated=_not_gated(draft, unjudged=unjudged))


def _not_gated(draft: Verdict, *, unjudged: bool) -> bool:
    """Whether no check gated the measurement: under --gpuperf-compare it got no A/B base
    (for any reason), and it has no stored baseline on this device and no floor. Such a row
    must not read as a pass (docs/ci.md, "No green because no gate ran")."""
    comparison = draft.comparison
    return (
        not unjudged
        and draft.save is None
        and not draft.floors
        and draft.beyond_peak is None
        and comparison is not None
        and comparison.state == AB_NO_BASE
        and draft.baseline.outcome in (NO_BASELINE, OTHER_DEVICE)
    )


# The causes a save excuses: it re-records the baseline these checks compared against.
_SAVE_EXCUSES = ("regression", "strict-baseline", "drift")


def _fails(draft: Verdict, *, saving: bool) -> bool:
    """Whether a check fails the measurement: one of `Verdict.causes` (the one list of what
    fails) other than those the branches of `decide` judge on their own (beyond-peak before,
    strict-modelled after) and, while saving, those of the baseline being re-recorded."""
    judged_apart = {"beyond-peak", "strict-modelled", *(_SAVE_EXCUSES if saving else ())}
    return any(cause not in judged_apart for cause in draft.causes)


def with_explanation(verdict: Verdict, explain: dict[str, Any]) -> Verdict:
    """`verdict` carrying why it failed (the `explain` object explain/code/failure.py makes). An
    explanation never changes what was decided: the status and every check stay as they are."""
    return replace(verdict, explain=explain)
