"""Words and numbers shared by every renderer: units, labels, counts, the notes of a run.

Renderers read `verdict.Row`s and never decide anything: a verdict's status and checks are
the gate's; this module only says them.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_gpuperf.engine.results import Measurement
from pytest_gpuperf.errors import stop_words
from pytest_gpuperf.record.checks import (
    AB_IMPROVED,
    AB_INCONCLUSIVE,
    AB_MODELLED,
    AB_NO_BASE,
    AB_PASS,
    AB_REGRESSED,
    AB_UNCHANGED,
    IMPROVED,
    NO_BASE_CALLABLE,
    NO_BASE_COMPILE,
    NO_BASE_FILE,
    NO_BASE_KERNEL,
    NO_BASE_REF,
    NO_BASELINE,
    OTHER_DEVICE,
    REGRESSED,
    ComparedFile,
    ComparisonCheck,
    Drift,
)
from pytest_gpuperf.record.plural import counted
from pytest_gpuperf.record.verdict import (
    ACCEPTED,
    FAIL,
    MARGINAL,
    MODELLED,
    PASS,
    SAVE_NOT_MADE,
    UNJUDGED,
    Row,
    Verdict,
)
from pytest_gpuperf.report.roofline_words import roofline_text

SIMULATED_BANNER = "SIMULATED device — numbers are not measurements"


# -- units ------------------------------------------------------------------------------------


def format_time(seconds: float) -> str:
    """Four significant digits in the unit that keeps the number in [1, 1000): '105.7 µs',
    '97.00 µs' (fixed decimals, so a column of times lines up)."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if abs(seconds) >= scale or unit == "ns":
            value = seconds / scale
            decimals = 1 if abs(value) >= 100 else 2 if abs(value) >= 10 else 3
            return f"{value:.{decimals}f} {unit}"
    raise AssertionError("unreachable")


def format_gbps(bandwidth_bps: float) -> str:
    gbps = bandwidth_bps / 1e9
    return f"{gbps:,.0f}" if gbps >= 100 else f"{gbps:.3g}"


def gbps_text(bandwidth_bps: float) -> str:
    return f"{format_gbps(bandwidth_bps)} GB/s"


def pct(fraction: float, digits: int = 2) -> str:
    """'81.25%'; in four significant digits from 10,000% up ('4.232e+24%'), where only a
    wrong byte count gets (gate/peak.py) and a 26-digit number would hide the point."""
    if abs(fraction) >= 100:
        return f"{fraction * 100:.4g}%"
    return f"{fraction:.{digits}%}"


def signed_pct(fraction: float, digits: int = 2) -> str:
    return f"{fraction:+.{digits}%}"


def drift_text(drift: Drift, *, strict: bool = False) -> str:
    """'drift across saves: -4.02% since abc123 (2026-11-20) over 5 re-saves
    (abc123 80.00% -> ... -> def456 76.78%), each step within its allowance; beyond the
    allowance of -1.00% for the whole (--gpuperf-strict fails it)'."""
    path = " -> ".join(f"{step.commit[:12] or '?'} {step.efficiency:.2%}" for step in drift.steps)
    since = drift.since_commit[:12] or "an unrecorded commit"
    if drift.since_when:
        since += f" ({drift.since_when[:10]})"
    each = (
        "each step within its allowance"
        if drift.gradual
        else f"its largest single step {drift.largest_step:+.2%}"
    )
    action = "(failed under --gpuperf-strict)" if strict else "(drift: --gpuperf-strict fails it)"
    return (
        f"drift across saves: {drift.change:+.2%} since {since} over "
        f"{len(drift.steps) - 1} re-save{'s' if len(drift.steps) > 2 else ''} of changed code "
        f"({path}), {each}; together beyond the allowance of -{drift.allowance:.2%} "
        f"{action}"
    )


# -- one verdict in a few words -----------------------------------------------------------


CAUSE_WORDS = {
    "beyond-peak": "beyond peak",
    "floor": "floor",
    "min_flops": "compute floor",
    "min_roofline": "roofline floor",
    "regression": "regression",
    "ab": "A/B",
    "strict-baseline": "no baseline",
    "drift": "drift",
    "strict-ab": "A/B undecided",
    "strict-modelled": "not measured",
}


def cause_words(verdict: Verdict) -> list[str]:
    """The words of a failed verdict's causes ('not gated' for a missing baseline where no
    A/B base and no floor gated it either)."""
    words = dict(CAUSE_WORDS, **({"strict-baseline": "not gated"} if verdict.not_gated else {}))
    return [words[cause] for cause in verdict.failed_checks]


def verdict_label(verdict: Verdict) -> str:
    """Short status for tables: 'FAIL regression', 'FAIL A/B', 'marginal', 'pass (improved)'."""
    if verdict.status == FAIL:
        return " ".join(["FAIL", *cause_words(verdict)])
    if verdict.status == UNJUDGED:
        return "not judged"
    if verdict.status == MARGINAL:
        return "marginal"
    if verdict.status == ACCEPTED:
        return "accepted"
    if verdict.status == MODELLED:
        return "modelled"  # not a pass: nothing about the edit was measured
    if verdict.not_gated:
        return "not gated"  # no A/B base, no stored baseline, no floor: nothing decided
    if verdict.save is not None and verdict.save.saved:
        return "saved"
    if verdict.save is not None and verdict.save.why_not in SAVE_NOT_MADE:
        return "NOT saved"
    comparison = verdict.comparison
    if comparison is not None and comparison.state == AB_IMPROVED:
        return "pass (faster)"
    if comparison is None and verdict.baseline.outcome == IMPROVED:
        return "pass (improved)"
    return PASS


def ab_cell(comparison: ComparisonCheck | None) -> str:
    """'+3.1% slower', '-2.0% faster', 'same', 'same code', 'no base', 'undecided',
    'speed from model' (the simulated device cannot see the edit)."""
    if comparison is None:
        return "—"
    state = comparison.state
    if state == AB_UNCHANGED:
        return "same code"
    if state == AB_NO_BASE:
        return "no base"
    if state == AB_MODELLED:
        return "speed from model"
    assert comparison.ratio is not None
    change = signed_pct(comparison.ratio - 1.0, 1)
    words = {
        AB_REGRESSED: "slower",
        AB_IMPROVED: "faster",
        AB_PASS: "same",
        AB_INCONCLUSIVE: "undecided",
    }
    second = comparison.confirmation
    if second is not None and second.ratio is not None:
        again = signed_pct(second.ratio - 1.0, 1)
        if state == AB_REGRESSED:
            return f"{change} slower, again {again}"
        return f"{again} {words[state]} (1st round {change}: not confirmed)"
    return f"{change} {words[state]}"


def no_base_text(comparison: ComparisonCheck) -> str:
    """Why an A/B comparison had no base, with the tool's own words."""
    why = {
        NO_BASE_REF: f"the base revision {comparison.ref} could not be used",
        NO_BASE_FILE: "the kernel's file is new",
        NO_BASE_KERNEL: "the kernel is new",
        NO_BASE_COMPILE: f"the base version at {comparison.ref} could not be built",
        NO_BASE_CALLABLE: f"the test's Python at {comparison.ref} could not be loaded",
    }.get(comparison.no_base_why, "no base")
    return f"{why}: {comparison.detail}" if comparison.detail else why


def files_text(files: Sequence[ComparedFile], most: int = 6) -> str:
    """'4 files compared: conftest.py (ran, fixtures), mykern.py (imported, ran), ...'."""
    if not files:
        return "no file compared"
    shown = ", ".join(f"{f.path} ({', '.join(f.ways)})" for f in files[:most])
    more = f", and {len(files) - most} more (the JSON lists them)" if len(files) > most else ""
    return f"{counted(len(files), 'file')} compared: {shown}{more}"


def incomplete_text(comparison: ComparisonCheck) -> str:
    """A callable's A/B whose files may not be all the test ran: timed, the stored baseline
    gating beside it."""
    why = f"the run could not record all the test ran ({comparison.incomplete})"
    if comparison.changed_files:
        return f"A/B: {why}: the stored baseline gates beside the A/B"
    return (
        f"A/B: timed although no file compared differs at {comparison.ref}: {why}, so the "
        "files may not be all its code; the stored baseline gates beside the A/B"
    )


MODELLED_FROM = {
    "option": "the kernel_efficiency option",
    "directive": "its gpuperf-sim directive",
    "model": "the model registered for it",
    "reference": "the simulator's reference table",
    "default": "the simulator's default",
}


def modelled_text(comparison: ComparisonCheck) -> str:
    """Where a modelled comparison's speed comes from: 'efficiency 71.85% from ...'."""
    efficiency = comparison.modelled_efficiency
    source = MODELLED_FROM.get(comparison.modelled_by, "the simulator")
    return f"efficiency {pct(efficiency)} from {source}" if efficiency else f"from {source}"


def is_modelled(row: Row) -> bool:
    """A row whose gating check only restates the simulator's model (never a pass)."""
    return row.verdict.status == MODELLED


def acceptance_text(verdict: Verdict) -> str:
    """'accepted: "fused epilogue" (Gpuperf-Accept in 1a2b3c4d5e6f, pattern test_x.py::*)'."""
    rule = verdict.acceptance
    if rule is None:
        return ""
    reason = f'"{rule.reason}"' if rule.reason else "no reason given"
    return f"{reason} ({rule.origin()}, pattern {rule.pattern})"


def summary_line(rows: Sequence[Row]) -> str:
    """'13 measurements in 10 tests: 11 ok, 1 failed (regression), 1 marginal'.

    Words that do not collide with pytest's own "passed"/"failed" test counts."""
    if not rows:
        return "no measurements"
    tests = len({row.test_id for row in rows})
    statuses = [row.verdict.status for row in rows]
    parts = []
    not_gated = sum(1 for row in rows if row.verdict.not_gated and row.verdict.status == PASS)
    if statuses.count(PASS) - not_gated:
        parts.append(f"{statuses.count(PASS) - not_gated} ok")
    if not_gated:
        parts.append(f"{not_gated} not gated (no A/B base, no stored baseline, no floor)")
    if statuses.count(MODELLED):
        parts.append(f"{statuses.count(MODELLED)} modelled (the change was not measured)")
    if statuses.count(ACCEPTED):
        parts.append(f"{statuses.count(ACCEPTED)} accepted (an intended slowdown)")
    failed = [row.verdict for row in rows if row.verdict.status == FAIL]
    if failed:
        kinds = ["+".join(cause_words(v)) or "other" for v in failed]
        counts = {kind: kinds.count(kind) for kind in dict.fromkeys(kinds)}
        detail = ", ".join(
            kind if len(counts) == 1 else f"{n} {kind}" for kind, n in counts.items()
        )
        parts.append(f"{len(failed)} failed ({detail})")
    if statuses.count(MARGINAL):
        parts.append(f"{statuses.count(MARGINAL)} marginal")
    if statuses.count(UNJUDGED):
        parts.append(f"{statuses.count(UNJUDGED)} not judged (their test failed)")
    noun = "measurement" if len(rows) == 1 else "measurements"
    return f"{len(rows)} {noun} in {tests} test{'s' if tests != 1 else ''}: {', '.join(parts)}"


# -- row labels -------------------------------------------------------------------------------


def row_labels(rows: Sequence[Row]) -> list[str]:
    """Full test ids, with the measurement name where a test has several measurements."""
    per_test: dict[str, int] = {}
    for row in rows:
        per_test[row.test_id] = per_test.get(row.test_id, 0) + 1
    return [
        f"{row.test_id} ({row.measurement.name})" if per_test[row.test_id] > 1 else row.test_id
        for row in rows
    ]


# -- the notes of a run: each distinct one once ---------------------------------------------


@dataclass(frozen=True)
class RunNote:
    """One sentence for the reader, and the rows it is about."""

    text: str
    labels: tuple[str, ...]


def run_notes(
    rows: Sequence[Row],
    labels: Sequence[str],
    *,
    update_command: Callable[..., str] | None = None,
) -> list[RunNote]:
    """The distinct notes of a run, each once with the rows it concerns, in first-seen order."""
    found: dict[str, list[str]] = {}

    def add(text: str, label: str) -> None:
        found.setdefault(text, []).append(label)

    missing, improved, resave = [], [], []
    for row, label in zip(rows, labels, strict=True):
        for text in row_notes(row):
            add(text, label)
        verdict = row.verdict
        baseline = verdict.baseline
        if baseline.drift is not None and baseline.gating:
            add(drift_text(baseline.drift, strict=baseline.strict), label)
        if (
            baseline.outcome in (NO_BASELINE, OTHER_DEVICE)
            and baseline.gating  # while an A/B gates, strict does not ask for a baseline
            and verdict.status not in (FAIL, UNJUDGED)
            and verdict.save is None
        ):
            missing.append(row)
        if verdict.comparison is None and baseline.outcome == IMPROVED and verdict.save is None:
            improved.append(row)
        if verdict.status == ACCEPTED and "regression" in verdict.accepted_checks:
            resave.append(row)
    if improved:
        files = list(dict.fromkeys(row.test_id for row in improved))
        command = update_command(*files) if update_command else "pytest --gpuperf --gpuperf-save"
        found[
            f"{len(improved)} measurement{'s are' if len(improved) != 1 else ' is'} faster than "
            f"the stored baseline beyond the noise: re-record with: {command}"
        ] = []
    if resave:
        files = list(dict.fromkeys(row.test_id for row in resave))
        command = update_command(*files) if update_command else "pytest --gpuperf --gpuperf-save"
        found[
            f"{len(resave)} accepted stored regression{'s' if len(resave) != 1 else ''}: the "
            "stored baseline still holds the old speed and will fail the next run without the "
            f"accept rule; re-save it once the change is merged: {command}"
        ] = []
    if missing:
        devices = ", ".join(sorted({_own_key(row) for row in missing}))
        files = _record_targets(
            [row.test_id.split("::")[0] for row in missing],
            [row.test_id.split("::")[0] for row in rows],
        )
        command = update_command(*files) if update_command else "pytest --gpuperf --gpuperf-save"
        text = (
            f"{len(missing)} of {counted(len(rows), 'measurement')} "
            f"{'has' if len(missing) == 1 else 'have'} no baseline for {devices} "
            "(reported, not failed; --gpuperf-strict fails them)"
        )
        found[text] = []
        found[f"record them with: {command}"] = []
    return [RunNote(text, tuple(labels)) for text, labels in found.items()]


def _record_targets(missing: Sequence[str], measured: Sequence[str]) -> list[str]:
    """The files a record command names: their common folder when every file this run
    measured lacks a baseline and they are several (one short word instead of a line of
    paths), else each file."""
    files = list(dict.fromkeys(missing))
    if len(files) > 2 and set(files) == set(measured):
        folder = posixpath.commonpath(files)
        if folder and folder not in files:
            return [folder]
    return files


def _own_key(row: Row) -> str:
    m = row.measurement
    return row.verdict.baseline.device_key or (
        f"{m.device_key}-sim" if m.simulated else m.device_key
    )


def explain_notes(explain: Mapping[str, Any] | None) -> list[str]:
    """An explain pass's word for the run: why it could not profile and how to get the code
    facts it lacked (the same line for every test it names, so said once), and a declaration
    the counters contradict."""
    code = (explain or {}).get("code") or {}
    traffic = (explain or {}).get("traffic") or {}
    checks = [(explain or {}).get(name) for name in ("bytes_check", "flops_check")]
    notes = [f"no code facts: {code['advice']}"] if code.get("advice") else []
    notes += [traffic["problem"]] if traffic.get("problem") else []
    return notes + [check["line"] for check in checks if check and check.get("warns")]


def row_notes(row: Row) -> list[str]:
    """What a row adds for the reader, as sentences that are the same for every row they
    apply to (so a run can say each once)."""
    v, m = row.verdict, row.measurement
    notes = explain_notes(v.explain)
    if m.clocks and m.clocks.throttled:
        reasons = ", ".join(m.clocks.throttle_reasons) or "reason not reported"
        notes.append(f"clocks throttled during the measurement ({reasons})")
    if v.floor is not None and v.floor.hot_floor:
        notes.append(
            "a floor in hot mode compares cache bandwidth with the HBM peak (hot runs can "
            "exceed 100%); floors belong to cold or rotate measurements"
        )
    if any(floor.status == MARGINAL for floor in v.floors):
        notes.append(
            "marginal: the efficiency interval straddles the floor and the median reached it; "
            "a longer --gpuperf-budget or a steadier machine would settle it"
        )
    baseline = v.baseline
    if baseline.elsewhere:
        notes.append(
            f"baselines for these measurements exist for other devices only: "
            f"{', '.join(baseline.elsewhere)}"
        )
    if baseline.info is not None:
        notes.append(
            "simulated numbers are never judged against a real device's baselines "
            f"({baseline.info.device_key}.toml), only shown beside them"
        )
    if v.status == ACCEPTED:
        notes.append(f"accepted slowdown: {acceptance_text(v)}")
    elif v.acceptance is not None and v.status == FAIL:
        notes.append(
            f"not accepted: an accept rule names it ({acceptance_text(v)}), but only a "
            "regression is accepted, never a floor or a --gpuperf-strict rule"
        )
    elif v.acceptance is not None and v.status not in (UNJUDGED, MODELLED):
        notes.append(
            f"accepted slowdown not needed: an accept rule names it ({acceptance_text(v)}), "
            "but it did not regress"
        )
    if baseline.modelled and "stored" in v.unmeasured:
        notes.append(
            "stored modelled: the code differs from the code the baseline was saved from, but "
            "the simulated device times it from the same model (efficiency and bytes, not the "
            "code), so 'within the noise' says nothing about the edit: this is not a pass "
            "(xfailed; --gpuperf-strict fails it). "
            "Gate code changes with --gpuperf-compare on a GPU or --gpuperf-static=ARCH; once "
            "reviewed, re-save the baseline (--gpuperf-save)"
        )
    if baseline.outcome != NO_BASELINE and not baseline.gating and baseline.baseline:
        notes.append(
            "stored baselines are shown, not gated, where an A/B comparison with the base "
            "revision gates"
        )
    if v.not_gated:
        notes.append(
            "not gated: no A/B base, no stored baseline on this device and no floor, so "
            "nothing decided these measurements (--gpuperf-strict fails them; record a "
            "baseline with --gpuperf-save or give a floor)"
        )
    comparison = v.comparison
    if (comparison is not None and comparison.first_state and comparison.state != AB_REGRESSED) or (
        baseline.first_outcome and baseline.outcome != REGRESSED
    ):
        notes.append(
            "a first round regressed and a second round, on freshly loaded code and fresh "
            "buffers, did not confirm it: passed, reported (docs/measurement.md, 'Confirm "
            "before failing')"
        )
    if comparison is not None:
        if comparison.state == AB_NO_BASE:
            notes.append(f"A/B: no base — {no_base_text(comparison)}")
        elif comparison.state == AB_UNCHANGED and comparison.compared_files:  # a callable's
            notes.append(
                f"A/B: the test's Python is the same at {comparison.ref}: not timed "
                "(--gpuperf-compare-force times it anyway; -v lists the files compared)"
            )
        elif comparison.state == AB_UNCHANGED:
            notes.append(
                f"A/B: head and {comparison.ref} compiled to the same code object: not timed "
                "(--gpuperf-compare-force times them anyway)"
            )
        elif comparison.state == AB_MODELLED:
            notes.append(
                "A/B modelled: head and base are different code, but the simulated device "
                "times both from the same model (efficiency and bytes, not the code), so the "
                "edit's speed is unknown: this is not a pass (xfailed; --gpuperf-strict fails "
                "it). Gate code changes without a GPU with --gpuperf-static=ARCH (what the "
                "compiler made of the edit; it needs only clang, e.g. apt-get install "
                "clang-19: docs/static-gate.md), or run on a GPU; a changed gpuperf-sim "
                "directive lets the simulated device compare"
            )
        if comparison.incomplete and comparison.state != AB_NO_BASE:
            notes.append(incomplete_text(comparison))
        if comparison.state == AB_INCONCLUSIVE:
            notes.append(
                "A/B: the interval still straddles the threshold at the budget (reported, not "
                "failed; --gpuperf-strict fails it; a longer --gpuperf-budget settles it)"
            )
    save = v.save
    if save is not None:
        if not save.saved:
            why = {
                "floor": "not saved: the floor check failed",
                "beyond-peak": "not saved: declared bytes exceed what the device can move",
                "unjudged": "not saved: the test failed",
                "write": f"not saved: {save.error}" if save.error else "not saved",
                "interrupted": f"not saved: the run was interrupted ({stop_words()}); run the save "
                "again",
                "invalid": f"not saved: {save.error}",
                "crashed": f"not saved: {save.error}",
                "missing": f"not saved: {save.error}",
            }
            notes.append(why.get(save.why_not, "not saved"))
        elif save.new_history and save.previous_efficiency is not None:
            notes.append(
                "saved as a new history: the code (or its declared bytes or launch shape) "
                "differs from the saves before it"
            )
    return notes


def distinct(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def measured_text(m: Measurement) -> str:
    """'81.20% of peak = 4.30 TB/s (95% CI ...; median 12.3 µs of 40 samples)': one measurement,
    as every message that quotes it says it."""
    low, high = m.efficiency_ci
    stopped = f", stopped by {m.stopped_by}" if m.stopped_by else ""
    work = roofline_text(m)  # "" unless the test declared its FLOPs
    return (
        f"{pct(m.efficiency)} of peak = {gbps_text(m.bandwidth_bps)} "
        f"(95% CI {pct(low)} to {pct(high)}, +-{m.relative_ci:.2%}; "
        f"median {format_time(m.time_s)} of {len(m.samples_s)} samples{stopped})"
        + (f"; {work}" if work else "")
    )


def difference_text(value: float, expected: float) -> str:
    """An efficiency against the one expected, in points of peak and relative."""
    return (
        f"{(value - expected) * 100:+.2f} points of peak ({value / expected - 1.0:+.2%} relative)"
    )
