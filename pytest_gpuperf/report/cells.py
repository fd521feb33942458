"""The cells of one report row, shared by the terminal table and the Markdown summary."""

from __future__ import annotations

from pytest_gpuperf.record.checks import OTHER_DEVICE, BaselineCheck
from pytest_gpuperf.record.verdict import FAIL, MODELLED, Row
from pytest_gpuperf.report.roofline_words import floor_cell, format_tflops, roof_cell
from pytest_gpuperf.report.text import ab_cell, format_gbps, format_time, pct, verdict_label

# Every column a row can have, in display order; renderers drop the empty ones.
COLUMNS = (
    "kernel",
    "mode",
    "time ± CI",
    "GB/s",
    "eff",
    "TFLOP/s",
    "roof",
    "floor",
    "base",
    "delta",
    "allow",
    "A/B",
    "verdict",
    "occ",
)
LEFT_ALIGNED = {"test", "name", "kernel", "mode", "verdict", "A/B"}
HEADERS = {
    "eff": "efficiency",
    "base": "baseline",
    "allow": "allowance",
    "occ": "occupancy",
    "name": "measurement",
    "roof": "of roof",
}


def cells(row: Row) -> dict[str, str]:
    m, v = row.measurement, row.verdict
    occupancy = m.resources.occupancy if m.resources else None
    throttled = " !" if m.clocks and m.clocks.throttled else ""
    baseline = v.baseline
    if baseline.baseline is not None:
        base = f"{baseline.baseline.efficiency:.1%}"
        if not baseline.gating:
            base += "*"
    elif baseline.info is not None:
        base = f"({baseline.info.efficiency:.1%})"
    else:
        base = "other dev" if baseline.outcome == OTHER_DEVICE else "—"
    roofline = m.roofline  # None unless the test declared its FLOPs: the columns drop out
    return {
        "kernel": m.kernel or "—",
        "mode": m.cache,
        "time ± CI": f"{format_time(m.time_s)} ±{m.relative_ci:.1%}{throttled}",
        "GB/s": format_gbps(m.bandwidth_bps),
        "eff": pct(m.efficiency, 1),
        "TFLOP/s": format_tflops(roofline.flops_per_s) if roofline else "—",
        "roof": roof_cell(roofline) if roofline else "—",
        "floor": floor_cell(v),
        "base": base,
        "delta": f"{baseline.delta:+.1%}" if baseline.delta is not None else "—",
        "allow": _allowance(baseline),
        "A/B": ab_cell(v.comparison),
        "verdict": verdict_label(v) + _outcome(row),
        "occ": f"{occupancy:.0%}" if occupancy is not None else "—",
    }


def _allowance(check: BaselineCheck) -> str:
    """'±1.1% pooled': the band and what decided it (the tolerance, or the noise band's basis:
    prior, history, pooled; docs/baselines.md)."""
    if check.allowance is None:
        return "—"
    band = check.band
    if band is None:
        return f"±{check.allowance:.1%}"
    decided = band.basis if band.noise >= check.tolerance else "tolerance"
    board = "+board" if band.board_status not in ("", "seen") else ""
    return f"±{check.allowance:.1%} {decided}{board}"


def _outcome(row: Row) -> str:
    """Where pytest failed the test for another reason than the gate (its body or a subtest
    failed), say so: reports follow pytest's final word on the test."""
    if row.test_outcome in ("", "passed") or row.verdict.status in (FAIL, MODELLED):
        return ""  # a modelled row's test is xfailed by the gate itself
    return f" (test {row.test_outcome})"
