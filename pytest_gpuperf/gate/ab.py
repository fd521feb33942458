"""The A/B check: head against the base revision's build of the same kernel, in one run.

Head and base run interleaved on the same buffers (measure.measure_pair); each pair gives a
ratio of head time to base time in which whatever the run shares (clocks, placement of the
buffers, a neighbour's load) cancels. Each side is loaded several times and the pairs are
spread over the loads, so the interval of the trimmed mean of log ratios carries the drift
between loads as the run measured it. The decision reads that interval against the
threshold t:

  REGRESSED     the whole interval above 1 + t (slower by more than t, with confidence)
  IMPROVED      the whole interval below 1 / (1 + t)
  PASS          the whole interval within [1 / (1 + t), 1 + t]
  INCONCLUSIVE  anything else once the budget is spent (reported; fails under strict)

MODELLED is the state of different code objects that a device computing its times from a
model (the simulated one) times from the same model: it cannot see the edit, so the pair is
not timed and the state is never a pass: the test is xfailed, and failed under strict
(--gpuperf-compare-force times it anyway: the simulator's code-object drift control).

t is --gpuperf-compare-threshold, widened for very short kernels and, when head and base are
different code objects measured on too few loads to estimate their drift, to what the
backend's assumed code-object drift explains (policy.code_allowance). The check keeps the
user's threshold and says what decided. docs/measurement.md says why these rules.
"""

from __future__ import annotations

from collections.abc import Callable

from pytest_gpuperf.engine.measure import DEFAULT_PAIR_LOADS
from pytest_gpuperf.engine.results import (
    DRIFT_ASSUMED,
    DRIFT_MEASURED,
    DRIFT_NONE,
    PairedComparison,
)
from pytest_gpuperf.engine.stats import MIN_LOADS_TO_ESTIMATE
from pytest_gpuperf.gate.policy import (
    BASIS_USER,
    code_spread_for,
    compare_threshold,
    threshold_and_basis,
)
from pytest_gpuperf.record.checks import (
    AB_IMPROVED,
    AB_INCONCLUSIVE,
    AB_MODELLED,
    AB_NO_BASE,
    AB_PASS,
    AB_REGRESSED,
    AB_UNCHANGED,
    STATISTIC_TRIMMED_MEAN,
    ComparisonCheck,
)


def ab_state(ratio_ci: tuple[float, float], threshold: float) -> str:
    """The state an interval of head/base time ratios gives at `threshold`."""
    low, high = ratio_ci
    slower, faster = 1.0 + threshold, 1.0 / (1.0 + threshold)
    if low > slower:
        return AB_REGRESSED
    if high < faster:
        return AB_IMPROVED
    if low >= faster and high <= slower:
        return AB_PASS
    return AB_INCONCLUSIVE


def decided(
    threshold: float, code_spread: float = 0.0
) -> Callable[[tuple[float, float], float], bool]:
    """The stopping rule the engine samples an A/B pair with: stop once the state is known
    (for a base that takes `base_time_s`, whose threshold policy.compare_threshold widens)."""

    def known(ratio_ci: tuple[float, float], base_time_s: float) -> bool:
        effective = compare_threshold(threshold, base_time_s, code_spread)
        return ab_state(ratio_ci, effective) != AB_INCONCLUSIVE

    return known


def pair_code_spread(
    backend: str,
    head_fingerprint: str,
    base_fingerprint: str,
    override: float | None = None,
    loads: int = DEFAULT_PAIR_LOADS,
) -> float:
    """The assumed code-object spread a pair's threshold is widened for: none where the run
    measures the drift (`loads` >= MIN_LOADS_TO_ESTIMATE per side) or for byte-identical
    code (a forced A/A), the backend's (or the override) otherwise."""
    if loads >= MIN_LOADS_TO_ESTIMATE:
        return 0.0
    if head_fingerprint and head_fingerprint == base_fingerprint:
        return 0.0
    return code_spread_for(backend, override)


def check_comparison(
    paired: PairedComparison,
    *,
    ref: str,
    ref_commit: str,
    threshold: float,
    strict: bool = False,
    forced: bool = False,
    code_spread: float | None = None,
    confidence: float | None = None,
) -> ComparisonCheck:
    """The state of a timed A/B pair (`code_spread` None: the backend's default, used only
    where the pair had too few loads to measure the drift), judged on its interval at
    `confidence` (None: the level it was measured at, `paired.confidence`)."""
    head, base = paired.head, paired.base
    level = paired.confidence if confidence is None else confidence
    ratio_ci = paired.ratio_ci
    if level != paired.confidence:
        if paired.df <= 0:
            raise ValueError("this pair has no degrees of freedom to take another level from")
        ratio_ci = paired.ratio_ci_at(level)
    spread = pair_code_spread(
        head.backend, head.fingerprint, base.fingerprint, code_spread, paired.loads
    )
    effective, basis = threshold_and_basis(threshold, base.time_s, spread)
    if paired.drift_basis == DRIFT_MEASURED:
        drift, drift_basis = paired.drift, DRIFT_MEASURED
    else:
        drift, drift_basis = spread, DRIFT_ASSUMED if spread > 0 else DRIFT_NONE
    return ComparisonCheck(
        state=ab_state(ratio_ci, effective),
        ref=ref,
        ref_commit=ref_commit,
        threshold=effective,
        user_threshold=threshold,
        threshold_basis=basis,
        drift=drift,
        drift_basis=drift_basis,
        loads=paired.loads,
        buffer_sets=paired.buffer_sets,
        buffer_sets_note=paired.buffer_sets_note,
        confidence=level,
        statistic=STATISTIC_TRIMMED_MEAN,
        median_ratio=paired.median_ratio,
        base_samples_s=tuple(base.samples_s),
        pair_loads=tuple(paired.pair_loads),
        ratio=paired.ratio,
        ratio_ci=ratio_ci,
        pairs=paired.pairs,
        head_efficiency=head.efficiency,
        base_efficiency=base.efficiency,
        base_time_s=base.time_s,
        head_fingerprint=head.fingerprint,
        base_fingerprint=base.fingerprint,
        forced=forced,
        strict=strict,
        code_spread=spread,
    )


def unchanged(*, ref: str, ref_commit: str, fingerprint: str, threshold: float) -> ComparisonCheck:
    """Head and base compiled to byte-identical code: nothing to time."""
    return ComparisonCheck(
        state=AB_UNCHANGED,
        ref=ref,
        ref_commit=ref_commit,
        threshold=threshold,
        user_threshold=threshold,
        threshold_basis=BASIS_USER,
        head_fingerprint=fingerprint,
        base_fingerprint=fingerprint,
    )


def no_base(
    *, ref: str, ref_commit: str, why: str, detail: str, threshold: float, strict: bool = False
) -> ComparisonCheck:
    """No base to compare with (`why` one of results.NO_BASE_*; `detail` the tool's words)."""
    return ComparisonCheck(
        state=AB_NO_BASE,
        ref=ref,
        ref_commit=ref_commit,
        threshold=threshold,
        user_threshold=threshold,
        threshold_basis=BASIS_USER,
        no_base_why=why,
        detail=detail,
        strict=strict,
    )


def modelled(
    *,
    ref: str,
    ref_commit: str,
    head_fingerprint: str,
    base_fingerprint: str,
    efficiency: float,
    basis: str,
    threshold: float,
    strict: bool = False,
) -> ComparisonCheck:
    """Different code objects with one model: the device's times cannot tell them apart
    (never a pass: gate/decide.py makes it MODELLED, or FAIL under `strict`)."""
    return ComparisonCheck(
        state=AB_MODELLED,
        ref=ref,
        ref_commit=ref_commit,
        threshold=threshold,
        head_fingerprint=head_fingerprint,
        base_fingerprint=base_fingerprint,
        modelled_efficiency=efficiency,
        modelled_by=basis,
        strict=strict,
    )
