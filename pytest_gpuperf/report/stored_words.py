"""The stored-baseline check in words: its headline, the rows that explain its allowance, and
the rows a failure it decided leads with."""

from __future__ import annotations

from pytest_gpuperf.engine.results import Measurement
from pytest_gpuperf.record.checks import IMPROVED, REGRESSED, WITHIN_NOISE, BaselineCheck
from pytest_gpuperf.record.verdict import Verdict
from pytest_gpuperf.report.band_words import band_text
from pytest_gpuperf.report.roofline_words import tflops_text
from pytest_gpuperf.report.text import (
    difference_text,
    drift_text,
    gbps_text,
    measured_text,
    pct,
    signed_pct,
)


def baseline_decisive(m: Measurement, verdict: Verdict) -> list[tuple[str, str]]:
    check = verdict.baseline
    if check.baseline is None:  # strict: a baseline is required and there is none
        return [("measured", measured_text(m))]
    details = dict(baseline_details(m, check))
    ref = check.baseline
    basis = _basis(check)
    confirmation = [("confirmation", details["confirmation"])] if "confirmation" in details else []
    drift = []
    if check.drift is not None:
        drift = [("drift", drift_text(check.drift, strict=check.strict))]
    return [
        *drift,
        ("allowance", details["allowance"] + (f"; {basis}" if basis else "")),
        *confirmation,
        ("baseline", details["baseline"]),
        ("provenance", f"{ref.provenance} [{ref.path}]"),
        ("measured", measured_text(m)),
    ]


def baseline_headline(check: BaselineCheck) -> str:
    ref = check.baseline
    if ref is None:
        why = f"no baseline for device {check.device_key}"
        if check.elsewhere:
            why += " (this test has baselines for other devices only)"
        if check.strict and check.gating:
            return f"{why}, and a baseline is required (strict baselines)"
        return f"{why}, not compared"
    assert check.delta is not None and check.allowance is not None
    measured = ref.efficiency * (1.0 + check.delta)
    versus = f"{pct(measured)} vs baseline {pct(ref.efficiency)} ({signed_pct(check.delta)}"
    shown = "" if check.gating else " [shown, not gated]"
    if check.outcome == REGRESSED:
        again = ""
        second = check.confirmation
        if second is not None and second.delta is not None:
            again = f", confirmed by a second round: {signed_pct(second.delta)}"
        elif check.unconfirmed:
            again = f"; not confirmed: {check.unconfirmed}"
        return (
            f"regressed: {versus}, beyond the allowance of -{pct(check.allowance)}){shown}{again}"
        )
    if check.outcome == IMPROVED:
        return f"improved: {versus}, beyond the allowance of +{pct(check.allowance)}){shown}"
    if check.outcome == WITHIN_NOISE and check.modelled:
        return (
            f"stored modelled: other code than the baseline was saved from, one model on the "
            f"simulated device: {versus}) restates the model, not measured{shown}"
        )
    if check.outcome == WITHIN_NOISE:
        return f"within noise of the baseline: {versus}, allowance +-{pct(check.allowance)}){shown}"
    return ""


def baseline_details(m: Measurement, check: BaselineCheck) -> list[tuple[str, str]]:
    ref = check.baseline
    assert ref is not None and check.allowance is not None and check.noise is not None
    saves = "1 save" if ref.saves == 1 else f"{ref.saves} saves"
    spread = f"{saves}, run-to-run +-{ref.run_spread:.2%} in the file"
    noise = f"noise {pct(check.noise)}"
    if check.band is not None:
        noise += f" ({band_text(check.band)})"
    work = ""
    if m.work is not None and ref.time_s:  # the same declared FLOPs over the baseline's time
        work = f" = {tflops_text(m.work.flops / ref.time_s)} ({m.work.math})"
    rows = [
        (
            "baseline",
            f"expected {pct(ref.efficiency)} of peak = {gbps_text(ref.bandwidth_bps)}{work} "
            f"({spread}, {ref.source}, cache={ref.cache})",
        ),
        ("vs baseline", difference_text(m.efficiency, ref.efficiency)),
        (
            "allowance",
            f"+-{pct(check.allowance)} = the larger of the tolerance {pct(check.tolerance)} "
            f"and the {noise}",
        ),
    ]
    if check.first_outcome:
        second = check.confirmation
        if second is None or second.delta is None:
            said = f"could not be measured again: {check.unconfirmed}"
        else:
            confirmed = check.outcome == REGRESSED
            verdict = "regressed again: confirmed" if confirmed else "not confirmed"
            said = (
                f"measured again with freshly loaded code on fresh buffers: "
                f"{signed_pct(second.delta)} against the allowance of -{pct(second.allowance or 0)}"
                f": {verdict}"
            )
        rows.append(("confirmation", said))
    return rows


# Fields a check may carry (now or from a later gate) that say in words where its threshold
# or allowance came from; the first non-empty one is quoted as it is.
BASIS_FIELDS = ("basis",)


def _basis(check: object) -> str:
    for name in BASIS_FIELDS:
        value = getattr(check, name, "")
        if isinstance(value, str) and value:
            return value
    return ""
