"""The roofline in words and cells: TFLOP/s, the roof that binds and the fraction of it, for
every renderer (terminal, Markdown, failure text, JUnit, pytest-benchmark, the dashboard).

Only a measurement that declared its work (`flops=`, `math=`) has any of this: a memory-bound
test's rows, messages and exports are what they were, word for word. The numbers are
engine/roofline.py's; nothing here decides.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_gpuperf.engine.plain import to_plain
from pytest_gpuperf.engine.results import Measurement
from pytest_gpuperf.engine.roofline import COMPUTE_BOUND, Roofline
from pytest_gpuperf.record.checks import FloorCheck
from pytest_gpuperf.record.verdict import MARGINAL, PASS, Verdict

# The failure text's checks for the roofline's floors (gate/roofline.py)
FLOPS_CHECK, ROOFLINE_CHECK = "min_flops", "min_roofline"


def format_tflops(flops_per_s: float) -> str:
    """'1,024', '612.3', '61.23', '0.412': TFLOP/s with about four significant digits."""
    tflops = flops_per_s / 1e12
    if tflops >= 1000:
        return f"{tflops:,.0f}"
    if tflops >= 100:
        return f"{tflops:.1f}"
    if tflops >= 10:
        return f"{tflops:.2f}"
    return f"{tflops:.3g}"


def tflops_text(flops_per_s: float) -> str:
    return f"{format_tflops(flops_per_s)} TFLOP/s"


def roof_name(roofline: Roofline) -> str:
    """'the bf16 compute roof' or 'the memory roof'."""
    if roofline.bound == COMPUTE_BOUND:
        return f"the {roofline.math} compute roof"
    return "the memory roof"


def roof_cell(roofline: Roofline) -> str:
    """The table's "roof" cell: '78.1% bf16' (compute-bound) or '62.0% memory'."""
    which = roofline.math if roofline.bound == COMPUTE_BOUND else "memory"
    return f"{roofline.roofline_efficiency:.1%} {which}"


def intensity_text(roofline: Roofline) -> str:
    """'intensity 2,731 FLOP/B, above the bf16 ridge 246.7 FLOP/B: compute-bound'."""
    side = "above" if roofline.bound == COMPUTE_BOUND else "below"
    return (
        f"intensity {_flop_per_byte(roofline.intensity)} FLOP/B, {side} the {roofline.math} "
        f"ridge {_flop_per_byte(roofline.ridge)} FLOP/B: {roofline.bound}-bound"
    )


def _flop_per_byte(value: float) -> str:
    return f"{value:,.0f}" if value >= 1000 else f"{value:.4g}"


def roofline_text(m: Measurement) -> str:
    """What a message quoting the measurement adds where it declared work: '612.3 TFLOP/s =
    46.83% of the bf16 peak 1,307 TFLOP/s, 46.83% of the bf16 compute roof' ("" otherwise)."""
    roofline = m.roofline
    if roofline is None:
        return ""
    text = (
        f"{tflops_text(roofline.flops_per_s)} = {roofline.compute_efficiency:.2%} of the "
        f"{roofline.math} peak {tflops_text(roofline.peak_flops_per_s)}"
    )
    if roofline.bound != COMPUTE_BOUND:
        text += f", {roofline.roofline_efficiency:.2%} of the memory roof"
    return text


def roofline_rows(m: Measurement) -> list[tuple[str, str]]:
    """The failure text's rows for a measurement with declared work: its TFLOP/s and the roof
    that binds it (none without declared work)."""
    roofline = m.roofline
    if roofline is None:
        return []
    low, high = roofline.flops_per_s_ci
    return [
        (
            "compute",
            f"{tflops_text(roofline.flops_per_s)} (95% CI {format_tflops(low)} to "
            f"{format_tflops(high)}) for {roofline.flops:,} declared {roofline.math} operations",
        ),
        (
            "roofline",
            f"{intensity_text(roofline)}; attainable "
            f"{tflops_text(roofline.attainable_flops_per_s)}, reached "
            f"{roofline.roofline_efficiency:.2%}",
        ),
    ]


# -- the roofline's floors -------------------------------------------------------------------


def _fraction_of(check: str, m: Measurement) -> str:
    roofline = m.roofline
    assert roofline is not None
    if check == FLOPS_CHECK:
        return f"the {roofline.math} peak {tflops_text(roofline.peak_flops_per_s)}"
    return f"{roof_name(roofline)} {tflops_text(roofline.attainable_flops_per_s)}"


def floor_headline(check: str, floor: FloorCheck, m: Measurement) -> str:
    """'compute efficiency 41.20% of the bf16 peak 1,307 TFLOP/s is below the floor 60.00%'."""
    what = "compute efficiency" if check == FLOPS_CHECK else "roofline efficiency"
    of = _fraction_of(check, m)
    if floor.status == PASS:
        return f"{what} reaches its floor {floor.floor:.2%} of {of}"
    if floor.status == MARGINAL:
        return f"marginal: {what} {floor.efficiency:.2%} is just at the floor {floor.floor:.2%}"
    text = f"{what} {floor.efficiency:.2%} of {of} is below the floor {floor.floor:.2%}"
    if floor.straddles:
        text += " (marginal: the interval straddles the floor; decided on the median)"
    return text


def floor_noise(floor: FloorCheck, percent: Callable[[float], str] = "{:.2%}".format) -> str:
    """A floor's "floor noise" row, for the bandwidth floor (report/failure.py) and the
    roofline's: where the 95% interval lies against the floor, and what decided."""
    low, high = floor.efficiency_ci
    interval = f"the 95% interval {percent(low)} to {percent(high)}"
    if low >= floor.floor:
        return f"{interval} lies at or above the floor"
    if high < floor.floor:
        return f"{interval} lies entirely below the floor: not noise"
    decided = "reaches" if floor.efficiency >= floor.floor else "misses"
    return f"{interval} straddles the floor; decided on the median, which {decided} it"


def floor_rows(check: str, floor: FloorCheck, m: Measurement) -> list[tuple[str, str]]:
    """The rows that bear on a roofline floor's decision: what it expects, the interval
    against it, and where the measurement stands on the roofline."""
    roofline = m.roofline
    assert roofline is not None
    roof = roofline.peak_flops_per_s if check == FLOPS_CHECK else roofline.attainable_flops_per_s
    return [
        (
            "floor",
            f"expected >= {floor.floor:.2%} of {_fraction_of(check, m)} = "
            f"{tflops_text(floor.floor * roof)} ({floor.origin})",
        ),
        ("vs floor", f"{(floor.efficiency - floor.floor) * 100:+.2f} points"),
        ("floor noise", floor_noise(floor)),
        *roofline_rows(m),
    ]


def work_floor_checks(verdict: Verdict) -> list[tuple[str, FloorCheck]]:
    """(check, its FloorCheck) of the roofline floors the verdict carries."""
    found = []
    if verdict.flops_floor is not None:
        found.append((FLOPS_CHECK, verdict.flops_floor))
    if verdict.roofline_floor is not None:
        found.append((ROOFLINE_CHECK, verdict.roofline_floor))
    return found


def deciding_work_floors(verdict: Verdict) -> list[str]:
    """The roofline floors that made the verdict FAIL or MARGINAL."""
    failed = verdict.failed_checks
    return [
        check
        for check, floor in work_floor_checks(verdict)
        if check in failed or floor.status == MARGINAL
    ]


def floor_cell(verdict: Verdict) -> str:
    """The table's floor cell: '80%' (min_bw), '60% flops', '70% roof', joined; '—' for none."""
    parts = []
    if verdict.floor is not None:
        parts.append(f"{verdict.floor.floor:.0%}")
    if verdict.flops_floor is not None:
        parts.append(f"{verdict.flops_floor.floor:.0%} flops")
    if verdict.roofline_floor is not None:
        parts.append(f"{verdict.roofline_floor.floor:.0%} roof")
    return " ".join(parts) or "—"


# -- exports ---------------------------------------------------------------------------------


def roofline_extra(m: Measurement) -> dict[str, Any]:
    """pytest-benchmark's extra_info and the JUnit properties' numbers ({} without work)."""
    roofline = m.roofline
    if roofline is None:
        return {}
    return {
        "flops": roofline.flops,
        "math": roofline.math,
        "flops_per_s": to_plain(roofline.flops_per_s),
        "tflops": to_plain(roofline.tflops),
        "peak_flops_per_s": to_plain(roofline.peak_flops_per_s),
        "compute_efficiency": to_plain(roofline.compute_efficiency),
        "intensity": to_plain(roofline.intensity),
        "ridge": to_plain(roofline.ridge),
        "bound": roofline.bound,
        "roofline_efficiency": to_plain(roofline.roofline_efficiency),
    }


__all__ = [
    "FLOPS_CHECK",
    "ROOFLINE_CHECK",
    "deciding_work_floors",
    "floor_cell",
    "floor_headline",
    "floor_noise",
    "floor_rows",
    "format_tflops",
    "intensity_text",
    "roof_cell",
    "roofline_extra",
    "roofline_rows",
    "roofline_text",
    "tflops_text",
    "work_floor_checks",
]
