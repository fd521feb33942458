"""The A/B check (head against base in one run) in words: its headline, its pairs, where its
threshold came from, the drift between module loads and the confirming round."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pytest_gpuperf.engine.results import DRIFT_MEASURED, Measurement
from pytest_gpuperf.gate.policy import BASIS_DRIFT, BASIS_QUANTUM, code_allowance
from pytest_gpuperf.record.checks import (
    AB_MODELLED,
    AB_NO_BASE,
    AB_REGRESSED,
    AB_UNCHANGED,
    ComparisonCheck,
)
from pytest_gpuperf.record.verdict import Row, Verdict
from pytest_gpuperf.report.roofline_words import tflops_text
from pytest_gpuperf.report.text import (
    ab_cell,
    files_text,
    format_time,
    modelled_text,
    no_base_text,
    pct,
    row_labels,
    signed_pct,
)


def ab_decisive(m: Measurement, verdict: Verdict) -> list[tuple[str, str]]:
    c = verdict.comparison
    assert c is not None
    if c.state == AB_MODELLED:  # strict: not timed
        return [("code", f"head {c.head_fingerprint[:19]}, base {c.base_fingerprint[:19]}")]
    if c.ratio is None or c.ratio_ci is None:  # strict: no base, or nothing reached
        return [("A/B", comparison_headline(c))]
    confirmation = [("confirmation", _comparison_confirmation(c))] if c.first_state else []
    compute = []
    if m.work is not None and c.base_time_s:  # the same declared FLOPs over each side's time
        head_s = c.base_time_s * c.ratio
        compute = [
            (
                "compute",
                f"head {tflops_text(m.work.flops / head_s)} vs base "
                f"{tflops_text(m.work.flops / c.base_time_s)} ({m.work.math}, the same "
                f"{m.work.flops:,} declared operations)",
            )
        ]
    return [
        ("threshold", _threshold_origin(c)),
        ("pairs", _pairs_text(c)),
        *compute,
        *confirmation,
    ]


def comparison_headline(c: ComparisonCheck) -> str:
    against = f"{c.ref}" + (f" ({c.ref_commit[:12]})" if c.ref_commit else "")
    if c.ratio is None:
        if c.state == "unchanged":
            return f"A/B: same code object as {against}"
        if c.state == AB_MODELLED:
            return (
                f"A/B modelled: other code than {against}, one model on the simulated device "
                f"({modelled_text(c)}): the speed comes from the model, not measured"
            )
        return f"A/B: no base at {against} ({no_base_text(c)})"
    assert c.ratio_ci is not None
    low, high = c.ratio_ci
    interval = f"{signed_pct(low - 1)} to {signed_pct(high - 1)}"
    level = _level(c.confidence)
    if c.state == AB_REGRESSED:
        again = ""
        if c.confirmation is not None and c.confirmation.ratio is not None:
            again = f", confirmed by a second round: {signed_pct(c.confirmation.ratio - 1)}"
        elif c.unconfirmed:
            again = f"; not confirmed: {c.unconfirmed}"
        return (
            f"A/B regressed against {against}: head/base time {c.ratio:.4f} "
            f"({signed_pct(c.ratio - 1)}), {level} CI {low:.4f} to {high:.4f}, all above the "
            f"threshold 1 + {pct(c.threshold)}{again}"
        )
    return (
        f"A/B {ab_cell(c)} against {against} ({level} CI {interval}, "
        f"threshold +-{pct(c.threshold)})"
    )


def _level(confidence: float) -> str:
    """'95%', '98%', '99.37%': an interval's confidence, as few digits as say it."""
    for digits in range(3):
        text = f"{confidence:.{digits}%}"
        if abs(float(text[:-1]) / 100 - confidence) < 1e-9:
            return text
    return f"{confidence:.2%}"


def compared_lines(rows: Sequence[Row]) -> list[str]:
    """For each callable's A/B of the run, the files compared with REF and how each came in:
    'test_op.py::test_op: same code at HEAD, not timed: 4 files compared: conftest.py (ran,
    fixtures), ...' (what -v prints and the Markdown folds away)."""
    lines = []
    for row, label in zip(rows, row_labels(rows), strict=True):
        c = row.verdict.comparison
        if c is None or not c.compared_files:
            continue
        if c.state == AB_UNCHANGED:
            what = f"same code at {c.ref}, not timed"
        elif c.state == AB_NO_BASE:
            what = f"no base at {c.ref}"
        else:
            changed = ", ".join(c.changed_files) or "none"
            what = f"timed against {c.ref} (changed: {changed})"
        gap = f"; not all it ran was recorded: {c.incomplete}" if c.incomplete else ""
        lines.append(f"{label}: {what}: {files_text(c.compared_files)}{gap}")
    return lines


def comparison_details(c: ComparisonCheck) -> list[tuple[str, str]]:
    compared = [("compared", files_text(c.compared_files))] if c.compared_files else []
    if c.incomplete:
        compared.append(("not recorded", c.incomplete))
    if c.ratio is None or c.ratio_ci is None:
        return [("A/B", comparison_headline(c)), *compared]
    assert c.head_efficiency is not None and c.base_efficiency is not None
    low, high = c.ratio_ci
    base = f"{pct(c.base_efficiency)}" + (
        f", {format_time(c.base_time_s)}" if c.base_time_s else ""
    )
    rows = [
        (
            "A/B",
            f"head {pct(c.head_efficiency)} vs base {base} at {c.ref} "
            f"({c.ref_commit[:12] or 'unresolved'}); head/base time {c.ratio:.4f} "
            f"({_level(c.confidence)} CI {low:.4f} to {high:.4f}) over {c.pairs} interleaved "
            "pairs",
        ),
        *_comparison_drift(c),
        ("A/B rule", _comparison_rule(c)),
    ]
    if c.first_state:
        rows.append(("confirmation", _comparison_confirmation(c)))
    return rows + compared


def _comparison_confirmation(c: ComparisonCheck) -> str:
    second = c.confirmation
    if second is None or second.ratio is None or second.ratio_ci is None:
        return f"the first round regressed and could not be measured again: {c.unconfirmed}"
    low, high = second.ratio_ci
    said = "regressed again: confirmed" if c.state == AB_REGRESSED else f"{second.state}"
    how = "with freshly loaded code objects on fresh buffers"
    if c.changed_files:  # a callable: both test bodies run again, each on new buffers
        how = "on new captures of both sides (each test body run again on its own new buffers)"
    return (
        f"measured again {how}: head/base time "
        f"{second.ratio:.4f} ({_level(second.confidence)} CI {low:.4f} to {high:.4f}) over "
        f"{second.pairs} pairs: {said}"
    )


def _comparison_drift(c: ComparisonCheck) -> list[tuple[str, str]]:
    """The drift between module loads, where the run measured it (DRIFT_MEASURED)."""
    if c.drift_basis != DRIFT_MEASURED:
        return []
    levels, over = _drift_levels(c)
    return [
        (
            "A/B drift",
            f"+-{pct(c.drift)} {levels}, measured {over} and carried in the interval",
        )
    ]


def _drift_levels(c: ComparisonCheck) -> tuple[str, str]:
    """('between module loads and buffer sets', 'over 8 loads per side on 8 buffer sets'):
    what the measured drift covers (a confirming round draws both anew), and from what. A
    callable's pair (its changed files known) has captures instead: each test body's run,
    on buffers of its own."""
    if c.changed_files:
        return "between captures, each on its test body's own buffers", (
            f"over {c.loads} captures per side"
        )
    over = f"over {c.loads} loads per side"
    if c.buffer_sets > 1:
        levels, over = (
            "between module loads and buffer sets",
            f"{over} on {c.buffer_sets} buffer sets",
        )
    else:
        levels = "between module loads"
    if c.buffer_sets_note:
        over += f" ({c.buffer_sets_note})"
    return levels, over


def _comparison_rule(c: ComparisonCheck) -> str:
    return (
        f"regressed when the whole interval lies above 1 + {pct(c.threshold)}: "
        f"{_threshold_origin(c)}"
    )


def _threshold_origin(c: ComparisonCheck) -> str:
    """+2.67% and what decided it (the check's threshold_basis): the user's threshold, a
    widening for a very short kernel, or an assumed code-object drift; and, when the run
    measured the drift between module loads, that it sits in the interval instead."""
    threshold = f"+{pct(c.threshold)}"
    user = f"+{pct(c.user_threshold)}" if c.user_threshold else "the threshold"
    if c.threshold_basis == BASIS_DRIFT or (
        not c.threshold_basis
        and c.code_spread > 0
        and math.isclose(c.threshold, code_allowance(c.code_spread))
    ):
        said = (
            f"{threshold}: what a different code object's drift of +-{pct(c.code_spread)} "
            "explains, ASSUMED (--gpuperf-compare-code-spread): too few loads per side to "
            "measure it (--gpuperf-compare-loads)"
        )
    elif c.threshold_basis == BASIS_QUANTUM:
        said = (
            f"{threshold}: widened from your {user} for a very short kernel, whose launches "
            "jitter by more (--gpuperf-compare-threshold)"
        )
    else:
        said = f"{threshold} (--gpuperf-compare-threshold)"
    if c.drift_basis == DRIFT_MEASURED:
        levels, over = _drift_levels(c)
        said += (
            f"; the drift {levels}, measured in this run at +-{pct(c.drift)} {over}, is "
            "carried in the interval"
        )
    return said


def _pairs_text(c: ComparisonCheck) -> str:
    """'10 interleaved pairs: head 40.37% vs base 46.20% of peak (5.138 µs) at HEAD (…)'"""
    against = f"{c.ref} ({c.ref_commit[:12] or 'unresolved'})"
    head = pct(c.head_efficiency) if c.head_efficiency is not None else "?"
    base = pct(c.base_efficiency) if c.base_efficiency is not None else "?"
    base_time = f", base {format_time(c.base_time_s)}" if c.base_time_s else ""
    if c.changed_files:
        return (
            f"{c.pairs} interleaved head/base calls of the callable over {c.loads} captures a "
            f"side (each on its own buffers): head {head} vs base "
            f"{base} of peak{base_time}, base from the test's Python at {against} "
            f"(changed: {', '.join(c.changed_files)})"
        )
    return (
        f"{c.pairs} interleaved head/base pairs on the same buffers: head {head} vs base "
        f"{base} of peak{base_time}, base built from {against}"
    )
