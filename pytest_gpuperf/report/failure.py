"""The message a failing (or marginal) measurement fails its test with.

It names what was measured against what was expected, the difference, the noise allowance and
where it comes from, the cache mode, the device, where the baseline came from, and the command
that updates it: everything a reviewer needs to tell a real slowdown from noise. The words of
the stored-baseline check are `stored_words.py`'s, the A/B's `ab_words.py`'s; this module
chooses what leads and what follows.
"""

from __future__ import annotations

import shlex
import time

from pytest_gpuperf.engine.results import Measurement
from pytest_gpuperf.record.checks import AB_MODELLED, AB_REGRESSED, FloorCheck
from pytest_gpuperf.record.verdict import ACCEPTABLE_CHECKS, FAIL, MARGINAL, Verdict
from pytest_gpuperf.report.ab_words import ab_decisive, comparison_details, comparison_headline
from pytest_gpuperf.report.code_change import code_rows
from pytest_gpuperf.report.roofline_words import (
    FLOPS_CHECK,
    ROOFLINE_CHECK,
    deciding_work_floors,
    floor_headline,
    floor_noise,
    floor_rows,
    roofline_rows,
    work_floor_checks,
)
from pytest_gpuperf.report.stored_words import (
    baseline_decisive,
    baseline_details,
    baseline_headline,
)
from pytest_gpuperf.report.text import (
    difference_text,
    gbps_text,
    measured_text,
    pct,
    signed_pct,
)


def label_of(measurement: Measurement) -> str:
    m = measurement
    return m.name if m.kernel in ("", m.name) else f"{m.name} (kernel {m.kernel})"


def one_line(measurement: Measurement, verdict: Verdict) -> str:
    """'vector_add: 81.2% of peak; reaches the floor 74%; within noise of the baseline ...'"""
    parts = [f"{pct(measurement.efficiency)} of peak"]
    parts += _headlines(measurement, verdict, everything=True)
    return f"{label_of(measurement)}: " + "; ".join(parts)


def failure_text(
    measurement: Measurement, verdict: Verdict, *, verbose: bool = False, test_id: str = ""
) -> str:
    """The message of a FAIL or MARGINAL verdict, led by what decided it.

    The first line names each check that failed (or is marginal) with the numbers that
    decided it; the rows under it bear on that decision only (for an A/B: the pairs and where
    the threshold came from; for a baseline: the allowance and what it is made of; for a
    floor: the interval against it), then the device and the command to act on. Everything
    else (checks that passed, the measurement in full, the provenance) follows under
    `verbose` (pytest -v) and is always in the JSON report.
    """
    m = measurement
    headline = "; ".join(_headlines(m, verdict, everything=False))
    deciding = _deciding(verdict)
    rows: list[tuple[str, str]] = []
    for check in deciding:
        rows += _DECISIVE[check](m, verdict)
    rows += code_rows(verdict)
    rows.append(("device", f"{_device(m)}; cache={m.cache}"))
    if m.gpu is not None:
        rows.append(("gpu", _gpu(m)))
    rows += _actions(verdict, test_id)
    rest = _context(m, verdict, deciding)
    if verbose:
        rows += [row for _, group in rest for row in group]
    elif rest:
        rows.append(("more", f"pytest -v adds {', '.join(what for what, _ in rest)}"))
    return f"{label_of(m)}: {headline}\n" + _block(rows)


def not_measured_reason(modelled: list[tuple[Measurement, Verdict]]) -> str:
    """The one line an xfailed (MODELLED) test shows: what was not measured, and why."""
    parts = []
    for m, verdict in modelled:
        what = " and ".join(
            {"ab": "A/B", "stored": "stored check"}[check] for check in verdict.unmeasured
        )
        parts.append(f"{m.name} ({what} modelled)")
    return (
        f"gpuperf: not measured: {', '.join(parts)}: the simulated device times changed code "
        "from its unchanged model, so the edit's speed is unknown (not a pass; "
        "--gpuperf-strict fails it)"
    )


# The checks a message can lead with, in the order they are told.
PEAK_CHECK, FLOOR_CHECK, BASELINE_CHECK, AB_CHECK = "beyond-peak", "floor", "baseline", "ab"


def _deciding(verdict: Verdict) -> list[str]:
    """The checks that made this verdict FAIL (or MARGINAL): what the message is about."""
    failed = verdict.failed_checks
    deciding = []
    if verdict.beyond_peak is not None:
        deciding.append(PEAK_CHECK)
    floor = verdict.floor
    if floor is not None and ("floor" in failed or floor.status == MARGINAL):
        deciding.append(FLOOR_CHECK)
    deciding += deciding_work_floors(verdict)  # min_flops, min_roofline
    unmeasured = verdict.unmeasured if "strict-modelled" in failed else ()
    stored_failed = any(c in failed for c in ("regression", "strict-baseline", "drift"))
    if stored_failed or "stored" in unmeasured:
        deciding.append(BASELINE_CHECK)
    if any(c in failed for c in ("ab", "strict-ab")) or "ab" in unmeasured:
        deciding.append(AB_CHECK)
    return deciding


def _floor_decisive(m: Measurement, verdict: Verdict) -> list[tuple[str, str]]:
    assert verdict.floor is not None
    return [*_floor_details(m, verdict.floor), ("measured", measured_text(m))]


def _peak_decisive(m: Measurement, verdict: Verdict) -> list[tuple[str, str]]:
    check = verdict.beyond_peak
    assert check is not None
    if check.cache == "hot":
        limit = (
            f"hot, but {check.bytes_moved:,} declared bytes exceed the device's caches "
            f"({check.cache_bytes:,} bytes): at least the rest comes from HBM each launch, "
            f"so at most {pct(check.limit)} of peak"
        )
    else:
        limit = f"{check.cache}: every declared byte comes from HBM, so at most 100% of peak"
    return [
        ("declared", f"{check.bytes_moved:,} bytes"),
        ("limit", limit),
        ("measured", measured_text(m)),
        (
            "way out",
            "declare what the kernel must move (each input read once, each output written "
            "once: reads=/writes=), and check that the kernel does all of its work",
        ),
    ]


def _peak_headline(verdict: Verdict) -> str:
    check = verdict.beyond_peak
    assert check is not None
    low, high = check.efficiency_ci
    return (
        f"declared bytes exceed what the device can move: {pct(low)}-"
        f"{pct(high)} of peak ({gbps_text(check.bandwidth_bps)} against the peak "
        f"{gbps_text(check.peak_bps)}), above the {pct(check.limit)} a {check.cache} "
        "measurement can reach"
    )


def _flops_decisive(m: Measurement, verdict: Verdict) -> list[tuple[str, str]]:
    assert verdict.flops_floor is not None
    return [*floor_rows(FLOPS_CHECK, verdict.flops_floor, m), ("measured", measured_text(m))]


def _roofline_decisive(m: Measurement, verdict: Verdict) -> list[tuple[str, str]]:
    assert verdict.roofline_floor is not None
    return [
        *floor_rows(ROOFLINE_CHECK, verdict.roofline_floor, m),
        ("measured", measured_text(m)),
    ]


_DECISIVE = {
    PEAK_CHECK: _peak_decisive,
    FLOOR_CHECK: _floor_decisive,
    FLOPS_CHECK: _flops_decisive,
    ROOFLINE_CHECK: _roofline_decisive,
    BASELINE_CHECK: baseline_decisive,
    AB_CHECK: ab_decisive,
}


def _actions(verdict: Verdict, test_id: str = "") -> list[tuple[str, str]]:
    if verdict.status != FAIL:
        return []
    command = verdict.update_command or "pytest --gpuperf --gpuperf-save"
    failed = verdict.failed_checks
    actions = []
    if "regression" in failed:
        actions.append(
            ("update", f"{command}   (if this slowdown is intended: re-records the baseline)")
        )
    if "strict-baseline" in failed:
        actions.append(("record", command))
    if "strict-modelled" in failed:
        actions.append(
            (
                "why",
                "--gpuperf-strict fails what was not measured: the simulated device cannot "
                "time an edit of a kernel's body; run on a GPU, or gate the edit with "
                "--gpuperf-static=ARCH (docs/static-gate.md)",
            )
        )
    if "drift" in failed:
        actions.append(
            (
                "drift",
                "find the commits that cost it (the drift names them), or run without "
                "--gpuperf-strict to report the drift without failing",
            )
        )
    if failed and all(cause in ACCEPTABLE_CHECKS for cause in failed):
        pattern = accept_pattern(test_id)
        option = "--gpuperf-accept=" + shlex.quote(f"{pattern} <why>")
        actions.append(
            (
                "accept",
                f"if this slowdown is intended: a commit trailer 'Gpuperf-Accept: {pattern} "
                f"<why>' (under --gpuperf-compare), or {option} "
                "(docs/ci.md, 'Accepting an intended slowdown')",
            )
        )
    return actions


_PLAIN = frozenset("_./:-[],=+@%")


def accept_pattern(test_id: str) -> str:
    """The accept rule's pattern for `test_id`, safe to paste anywhere: each character that a
    shell or a commit message would read (a blank ends the pattern; quotes, `$(...)`,
    backticks, `;`, a line break) is the glob's `?`, which still names it. The id itself was
    printed raw: a test id `'$(...)'` pasted from the advice ran the command."""
    plain = "".join(c if c.isalnum() or c in _PLAIN else "?" for c in test_id)
    return plain or "TEST_ID"


def _context(
    m: Measurement, verdict: Verdict, deciding: list[str]
) -> list[tuple[str, list[tuple[str, str]]]]:
    """What did not decide this verdict, for -v, as (what it is, its rows): the checks that
    passed or were only shown, and the measurement where no deciding check printed it."""
    groups: list[tuple[str, list[tuple[str, str]]]] = []
    shown = {PEAK_CHECK, FLOOR_CHECK, BASELINE_CHECK, FLOPS_CHECK, ROOFLINE_CHECK}
    if not shown & set(deciding):
        groups.append(("the measurement", [("measured", measured_text(m)), *roofline_rows(m)]))
    floor = verdict.floor
    if floor is not None and FLOOR_CHECK not in deciding:
        groups.append((f"the floor ({floor.status})", _floor_details(m, floor)))
    for mark, work_floor in work_floor_checks(verdict):
        if mark not in deciding:
            rows = floor_rows(mark, work_floor, m)
            groups.append((f"the {mark} floor ({work_floor.status})", rows))
    check = verdict.baseline
    if check.baseline is not None and BASELINE_CHECK not in deciding:
        state = check.outcome if check.gating else "shown, not gated"
        stored = ("provenance", f"{check.baseline.provenance} [{check.baseline.path}]")
        groups.append((f"the stored baseline ({state})", [*baseline_details(m, check), stored]))
    comparison = verdict.comparison
    if comparison is not None and AB_CHECK not in deciding:
        groups.append((f"the A/B ({comparison.state})", comparison_details(comparison)))
    return groups


def _gpu(m: Measurement) -> str:
    """'GPU 1 (0000:07:00.0), 12:03:04.512-12:03:05.630 UTC', and a warning on a GPU the
    probe found degraded: the slowdown may be the GPU's, not the code's."""
    assert m.gpu is not None
    text = m.gpu.describe()
    if m.gpu.uuid:
        text += f" {m.gpu.uuid}"
    if m.started_s is not None and m.ended_s is not None:
        start, end = (
            time.strftime("%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}"
            for t in (m.started_s, m.ended_s)
        )
        text += f", measured {start}-{end} UTC"
    if m.gpu.degraded:
        text += (
            " -- this GPU was slower than its peers in the run's probe: the result may be the "
            "GPU's, not the code's; rerun on a healthy GPU (--gpuperf-gpu=INDEX)"
        )
    return text


def _headlines(m: Measurement, verdict: Verdict, *, everything: bool) -> list[str]:
    lines = [_peak_headline(verdict)] if verdict.beyond_peak is not None else []
    floor = verdict.floor
    if floor is not None and (everything or floor.status != "pass"):
        lines.append(_floor_headline(floor))
    for mark, work_floor in work_floor_checks(verdict):
        if everything or work_floor.status != "pass":
            lines.append(floor_headline(mark, work_floor, m))
    baseline = verdict.baseline
    if everything or (baseline.gating and verdict.status == FAIL and _baseline_failed(verdict)):
        text = baseline_headline(baseline)
        if text and verdict.not_gated and "strict-baseline" in verdict.failed_checks:
            text += ": not gated, with no A/B base and no floor either"
        if text:
            lines.append(text)
        drift = baseline.drift
        if drift is not None and "drift" in verdict.failed_checks:
            since = drift.since_commit[:12] or "an unrecorded commit"
            lines.append(
                f"drifted across saves: {signed_pct(drift.change)} since {since}, beyond "
                f"-{pct(drift.allowance)} (strict)"
            )
    comparison = verdict.comparison
    failed = verdict.failed_checks
    if comparison is not None and (
        everything
        or comparison.state == AB_REGRESSED
        or "strict-ab" in failed
        or ("strict-modelled" in failed and comparison.state == AB_MODELLED)
    ):
        lines.append(comparison_headline(comparison))
    return lines or ["ok"]


def _baseline_failed(verdict: Verdict) -> bool:
    failed = verdict.failed_checks
    modelled = "strict-modelled" in failed and "stored" in verdict.unmeasured
    return modelled or any(c in failed for c in ("regression", "strict-baseline", "drift"))


def _floor_headline(floor: FloorCheck) -> str:
    if floor.status == "pass":
        return f"reaches the floor {pct(floor.floor)}"
    if floor.status == MARGINAL:
        return (
            f"marginal: efficiency {pct(floor.efficiency)} is just at the floor {pct(floor.floor)}"
        )
    text = f"efficiency {pct(floor.efficiency)} is below the floor {pct(floor.floor)}"
    if floor.straddles:
        text += " (marginal: the interval straddles the floor; decided on the median)"
    return text


def _device(m: Measurement) -> str:
    simulated = ", simulated" if m.simulated else ""
    return (
        f"{m.device_key} ({m.device_name}{simulated}), {m.backend} backend, "
        f"peak {gbps_text(m.peak_bps)}"
    )


def _floor_details(m: Measurement, floor: FloorCheck) -> list[tuple[str, str]]:
    return [
        (
            "floor",
            f"expected >= {pct(floor.floor)} of peak = {gbps_text(floor.floor * m.peak_bps)} "
            f"({floor.origin})",
        ),
        ("vs floor", difference_text(floor.efficiency, floor.floor)),
        ("floor noise", floor_noise(floor, pct)),
    ]


def _block(rows: list[tuple[str, str]]) -> str:
    width = max(len(key) for key, _ in rows) + 1
    return "\n".join(f"  {key + ':':<{width}} {value}" for key, value in rows)
