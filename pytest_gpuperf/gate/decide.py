"""Compose the checks of one measurement into its Verdict: the gate decides here, once.

A test fails when its floor is missed, when the stored baseline regressed (while that baseline
gates), when a baseline is required (strict) and missing, when the A/B comparison says
REGRESSED, or under strict when the A/B comparison stays INCONCLUSIVE or could not reach the
base revision at all. Saving re-records the baseline, so while saving a baseline regression or
a missing baseline does not fail; a missed floor still does and is not saved.
"""

from __future__ import annotations

from pytest_gpuperf.results import (
    AB_INCONCLUSIVE,
    AB_NO_BASE,
    AB_REGRESSED,
    FAIL,
    MARGINAL,
    NO_BASE_REF,
    NO_BASELINE,
    OTHER_DEVICE,
    PASS,
    REGRESSED,
    UNJUDGED,
    BaselineCheck,
    ComparisonCheck,
    FloorCheck,
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
) -> Verdict:
    """The verdict of one measurement from its checks (see the module docstring)."""
    if unjudged:
        status = UNJUDGED
    elif _fails(baseline, floor, comparison, saving=save is not None):
        status = FAIL
    elif floor is not None and floor.status == MARGINAL:
        status = MARGINAL
    else:
        status = PASS
    return Verdict(
        status=status,
        baseline=baseline,
        floor=floor,
        comparison=comparison,
        save=save,
        notes=notes,
        update_command=update_command,
    )


def _fails(
    baseline: BaselineCheck,
    floor: FloorCheck | None,
    comparison: ComparisonCheck | None,
    *,
    saving: bool,
) -> bool:
    if floor is not None and floor.status == FAIL:
        return True
    if baseline.gating and not saving:
        if baseline.outcome == REGRESSED:
            return True
        if baseline.strict and baseline.outcome in (NO_BASELINE, OTHER_DEVICE):
            return True
    if comparison is not None:
        if comparison.state == AB_REGRESSED:
            return True
        if comparison.strict and (
            comparison.state == AB_INCONCLUSIVE
            or (comparison.state == AB_NO_BASE and comparison.no_base_why == NO_BASE_REF)
        ):
            return True
    return False
