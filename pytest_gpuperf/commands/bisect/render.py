"""What a bisection prints and writes: one progress line per probe, the table of probed
commits, the steps seen and the last line `culprit: <sha> <subject>` (or `culprit: none`,
`culprit: not measured`, `culprit: unknown`, each with why), and the same as JSON (--json
PATH)."""

from __future__ import annotations

from typing import Any

from pytest_gpuperf.commands.bisect.probe import Reading
from pytest_gpuperf.commands.bisect.runner import Report
from pytest_gpuperf.commands.bisect.search import Probe, Step
from pytest_gpuperf.record.checks import AB_MODELLED, AB_UNCHANGED
from pytest_gpuperf.record.plural import counted
from pytest_gpuperf.record.report_reader import BISECT_SCHEMA, BISECT_SCHEMA_VERSION

SUBJECT_WIDTH = 50


def ratio_text(reading: Reading) -> str:
    """'1.0312 [1.0290, 1.0335]', '1 (same code)', '- (GOOD's model, not timed)' or '-'."""
    if reading.state == AB_MODELLED:
        return "- (GOOD's model, not timed)"
    if reading.ratio is None:
        return "-"
    if reading.state == AB_UNCHANGED or reading.ratio_ci is None:
        return f"{reading.ratio:.4f} (same code)"
    low, high = reading.ratio_ci
    return f"{reading.ratio:.4f} [{low:.4f}, {high:.4f}]"


def progress_line(probe: Probe, estimate: int) -> str:
    reading = probe.reading
    rounds = f", {probe.rounds} rounds" if probe.rounds > 1 else ""
    detail = f": {reading.detail}" if reading.detail and not reading.measured else ""
    return (
        f"bisect: probe {probe.number} (about {estimate} expected) {probe.commit.short} "
        f"{ratio_text(reading)} {reading.state}{rounds}{detail} ({probe.wall_s:.1f} s) "
        f"{_clip(probe.commit.subject)}"
    )


def _clip(text: str, width: int = SUBJECT_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def text_report(report: Report) -> str:
    """The table of probed commits in history order, the steps, the last line the culprit."""
    lines = [_header(report)]
    rows = [("#", "commit", "ratio to GOOD (95% CI)", "state", "subject")]
    rows.append(("-", report.good.short, "1 (GOOD)", "good", _clip(report.good.subject)))
    ordered = sorted(report.probes, key=lambda p: report.positions.get(p.commit.sha, 0))
    for probe in ordered:
        state = probe.reading.state + (f" ({probe.rounds} rounds)" if probe.rounds > 1 else "")
        subject = _clip(probe.commit.subject)
        if probe.stands_for is not None:
            subject += f" (BAD: kernels as at {probe.stands_for.short})"
        rows.append(
            (str(probe.number), probe.commit.short, ratio_text(probe.reading), state, subject)
        )
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)]
        lines.append("  ".join([*cells, row[4]]).rstrip())
    outcome = report.outcome
    if outcome is not None:
        for probe in outcome.skipped:
            lines.append(f"skipped {probe.commit.short} (does not build): {probe.reading.detail}")
        for step in outcome.steps[1:]:
            lines.append("other step: " + _step_text(step))
        if outcome.steps and outcome.steps[0].resolved:
            lines.append("largest step: " + _step_text(outcome.steps[0]))
    for name, reading in report.also_slower:
        lines.append(
            f"also slower at BAD: {name} {ratio_text(reading)} (bisect it with -- -k on its test)"
        )
    modelled = sum(1 for probe in report.probes if probe.reading.state == AB_MODELLED)
    lines.append(
        counted(len(report.probes), "probe")
        + (f" ({modelled} not timed: GOOD's model)" if modelled else "")
        + f", {report.wall_s:.1f} s"
        + (" (simulated device)" if report.simulated else "")
    )
    code = report.culprit_code
    if code is not None:
        said = "; ".join(code["changes"]) or code["unavailable"]
        lines.append(f"culprit's code, against {code['against']}: {said}")
    traffic = report.culprit_traffic
    if traffic is not None:
        good = f"{report.good.short} (GOOD)"
        said = list(traffic["lines"])
        if len(said) == 1:
            lines.append(f"culprit's traffic, against {good}: {said[0]}")
        elif said:  # the prefix once, not once a counter line
            lines.append(f"culprit's traffic, against {good}:")
            lines += [f"  {line}" for line in said]
    lines.append(culprit_line(report))
    return "\n".join(lines)


def _header(report: Report) -> str:
    device = report.device or "no device"
    if report.simulated:
        device += " (SIMULATED: times from the simulated device's model)"
    files = ", ".join(report.kernel_files) or "none"
    return (
        f"bisect {report.good.short}..{report.bad.short}: {report.range_commits} first-parent "
        f"commits, {len(report.candidates)} change {files}; following {report.followed or '-'}; "
        f"threshold {report.threshold:.1%}; {device}"
    )


def _step_text(step: Step) -> str:
    low, high = step.ratio_bounds
    where = (
        f"{step.culprit.short} {step.culprit.subject}"
        if step.resolved
        else "one of " + ", ".join(c.short for c in step.suspects)
    )
    return f"{where}: {step.ratio:.4f}x ({low:.4f}-{high:.4f}) the time before it"


def culprit_line(report: Report) -> str:
    """The last line: the culprit, or `none` (searched, no single step), `not measured` (BAD
    was not timed) or `unknown` (a probe failed twice), each with why."""
    if report.stopped:
        return f"culprit: unknown (the search stopped: {report.stopped})"
    if report.unmeasured:
        return f"culprit: not measured ({report.unmeasured})"
    culprit = report.culprit
    if culprit is None:
        return f"culprit: none ({report.why_none})"
    return f"culprit: {culprit.sha} {culprit.subject}"


def to_json(report: Report, command: str = "") -> dict[str, Any]:
    outcome = report.outcome
    culprit = report.culprit
    return {
        "schema": BISECT_SCHEMA,
        "schema_version": BISECT_SCHEMA_VERSION,
        "command": command,
        "good": _commit(report.good),
        "bad": _commit(report.bad),
        "threshold": report.threshold,
        "device": report.device,
        "simulated": report.simulated,
        "range_commits": report.range_commits,
        "kernel_files": list(report.kernel_files),
        "candidates": [_commit(c) for c in report.candidates],
        "followed": report.followed,
        "probes": [_probe(p) for p in report.probes],
        "skipped": [_commit(p.commit) for p in outcome.skipped] if outcome else [],
        "steps": [_step(s) for s in outcome.steps] if outcome else [],
        "also_slower": [{"measurement": n, **_reading(r)} for n, r in report.also_slower],
        "culprit": _commit(culprit) if culprit else None,
        "why_none": report.why_none,
        "unmeasured": report.unmeasured,
        "stopped": report.stopped,
        "culprit_line": culprit_line(report),
        "culprit_explain": (
            {"code": report.culprit_code, "traffic": report.culprit_traffic}
            if report.culprit_code or report.culprit_traffic
            else None
        ),
        "wall_s": report.wall_s,
    }


def _commit(commit: Any) -> dict[str, str]:
    return {"sha": commit.sha, "subject": commit.subject}


def _reading(reading: Reading) -> dict[str, Any]:
    timed = reading.state != AB_MODELLED  # a model's ratio is no measurement: null
    return {
        "state": reading.state,
        "ratio": reading.ratio if timed else None,
        "ratio_ci": list(reading.ratio_ci) if reading.ratio_ci and timed else None,
        "modelled_by": reading.modelled_by,
        "pairs": reading.pairs,
        "threshold": reading.threshold,
        "detail": reading.detail,
    }


def _probe(probe: Probe) -> dict[str, Any]:
    return {
        "number": probe.number,
        **_commit(probe.commit),
        "stands_for": _commit(probe.stands_for) if probe.stands_for else None,
        "rounds": probe.rounds,
        "wall_s": probe.wall_s,
        **_reading(probe.reading),
    }


def _step(step: Step) -> dict[str, Any]:
    return {
        "before": _commit(step.before),
        "suspects": [_commit(c) for c in step.suspects],
        "resolved": step.resolved,
        "ratio": step.ratio,
        "ratio_bounds": list(step.ratio_bounds),
    }
