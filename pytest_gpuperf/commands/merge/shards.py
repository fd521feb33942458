"""The shards' JSON reports (`--gpuperf-shard=K/N`) made into one report with one verdict.

A suite split over N CI runners is one run: one commit, one device model, one suite of
measuring tests sharing one false-alarm budget (gate/suite.py). The merge checks that the
reports say so before it trusts them: every shard 1..N present once, the same commit, device
key, suite size, false-alarm target, base commit and shard plan (a runner that planned
another partition may have run a test twice or never), and no test reported by two shards.
It believes no verdict it can decide itself (gate/recheck.py) and no file it has not checked
(record/shard_reader.py): a measuring test the report lists as passed without a measurement
fails the merge. Every test of every shard, measuring or not, is in the merged report once, in
the suite's collection order. The merged rows go through the same renderers as one pytest
run's (report/: json_document.py, markdown_summary.py, junit.py, terminal.py); the verdict
fails when any of those checks does or any shard failed (a failed measurement or test, a
problem, Ctrl-C).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pytest_gpuperf.baseline.store import BaselineStore
from pytest_gpuperf.config.ranges import SUITE_ALARM, TOLERANCE
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.gate.recheck import RunLevels, recheck
from pytest_gpuperf.gate.suite import DEFAULT_SUITE_ALARM, SuiteBudget
from pytest_gpuperf.record.meta import ReportMeta
from pytest_gpuperf.record.plural import counted
from pytest_gpuperf.record.shard_reader import ShardReport, read_shard
from pytest_gpuperf.record.verdict import FAIL, Row
from pytest_gpuperf.report.suite import confirmation_lines, suite_lines

PASSED, FAILED = "passed", "failed"
# pytest's exit statuses a shard may end with and still have passed: all passed, and no tests
# (a shard of a suite smaller than N)
_CLEAN_EXITS = (0, 5)
# How pytest's outcomes count: failed the shard, or did not (a skip is pytest's own word)
_FAILED_OUTCOMES = ("failed", "error")
# Names listed per reason before "and N more"
_SHOWN = 5
# The measured cost spread below which the shards count as balanced: the cost line is left
# out (the planner's own check, tests/plugin/test_shards.py, holds plans within 20%)
BALANCED_SPREAD = 0.25


@dataclass(frozen=True)
class MergedReport:
    """The merged rows, the report facts for the renderers, and the one verdict."""

    rows: tuple[Row, ...]
    meta: ReportMeta
    verdict: str  # PASSED or FAILED
    reasons: tuple[str, ...]  # why FAILED, one line each
    shards: tuple[ShardReport, ...]

    def markdown(self, text: str) -> str:
        """The Markdown summary of the merged rows (markdown_summary.markdown's `text`) with
        the one verdict under its title and a section on the shards at the end."""
        head, _, rest = text.partition("### pytest-gpuperf\n")
        verdict = f"**{verdict_line(self)}**\n"
        shards = "\n#### Shards\n\n" + "".join(f"- {line}\n" for line in self.lines()[:-1])
        return f"{head}### pytest-gpuperf\n\n{verdict}{rest}{shards}"

    def lines(self) -> list[str]:
        """The shard lines and the verdict, for the terminal and the Markdown summary."""
        merge, meta = self.meta.merge or {}, self.meta
        lines = []
        if self.rows and meta.suite_target > 0:
            budget = SuiteBudget(meta.suite_target, max(meta.suite_checks, 1))
            lines += suite_lines(self.rows, budget) + confirmation_lines(self.rows)
        lines += [shard_line(record) for record in merge.get("shards", ())]
        balance = cost_line(merge.get("shards", ()), self.shards[0].shard)
        if balance:
            lines.append(balance)
        lines.append(verdict_line(self))
        return lines


def merge_reports(
    shards: Sequence[ShardReport], *, command: str = "", baseline_dir: Path | None = None
) -> MergedReport:
    """One report of `shards` (in any order) and its verdict. `baseline_dir`: the baseline
    folder the shards' stored checks are judged against again (None: each check's own copy of
    its entry)."""
    if not shards:
        raise ConfigError("no shard reports given")
    problems = []
    checked = []
    levels, level_problems = _run_levels(shards, baseline_dir)
    for shard in sorted(shards, key=lambda s: (s.index, s.path)):
        per_test: dict[str, int] = {}
        for row in shard.rows:
            per_test[row.test_id] = per_test.get(row.test_id, 0) + 1
        rows = []
        for row in shard.rows:
            decided, why = recheck(row, levels, per_test[row.test_id])
            rows.append(decided)
            if why:
                problems.append(f"shard {shard.label} ({shard.path}): {why}")
        checked.append(replace(shard, rows=tuple(rows)))
    ordered = tuple(checked)
    problems = (
        _disagreements(ordered)
        + _missing(ordered)
        + _overlaps(ordered)
        + _counts(ordered)
        + level_problems
        + problems
    )
    reasons = list(problems)
    for shard in ordered:
        reasons += [f"shard {shard.label} ({shard.path}): {why}" for why in failures(shard)]
    tests = every_test(ordered)
    place = {test["test_id"]: n for n, test in enumerate(tests)}
    # each test's measurements where its test stands in the suite's collection order
    rows = sorted(
        (row for shard in ordered for row in shard.rows), key=lambda row: place[row.test_id]
    )
    first = ordered[0].document
    commit = first.get("commit") or {}
    compare = first.get("compare") or {}
    suite = first.get("suite") or {}
    records = [_shard_record(shard) for shard in ordered]
    costs = [record["measured_cost_s"] for record in records if record["measured_cost_s"] > 0]
    meta = ReportMeta(
        project=commit.get("project") or "",
        commit=commit.get("id") or "",
        commit_time=commit.get("time") or "",
        branch=commit.get("branch") or "",
        dirty=bool(commit.get("dirty")),
        command=command,
        compare_ref=compare.get("ref") or "",
        compare_commit=compare.get("commit") or "",
        device_peaks=tuple(
            (device["key"], device["peak_bps"])
            for shard in ordered
            for device in shard.document.get("devices", ())
            if "key" in device and "peak_bps" in device
        ),
        suite_target=float(suite.get("target") or 0.0),
        suite_checks=int(ordered[0].shard.get("suite_tests") or suite.get("checks") or 0),
        problems=tuple(
            problems
            + [
                f"shard {shard.label}: {problem}"
                for shard in ordered
                for problem in shard.document.get("problems", ())
            ]
        ),
        interrupted=any(shard.document.get("interrupted") for shard in ordered),
        # what `gpuperf bisect` reads: each test's kernel files, once
        tests=tuple(_kernel_files(ordered, place)),
        rootdir=str(first.get("rootdir") or ""),
        wall_s=max(
            (float((s.document.get("timing") or {}).get("wall_s") or 0.0) for s in ordered),
            default=None,
        ),
        merge={
            "verdict": FAILED if reasons else PASSED,
            "reasons": reasons,
            "shards": records,
            "cost_spread": max(costs) / min(costs) - 1.0 if len(costs) > 1 else None,
            "tests": tests,
        },
    )
    return MergedReport(
        rows=tuple(rows),
        meta=meta,
        verdict=FAILED if reasons else PASSED,
        reasons=tuple(reasons),
        shards=ordered,
    )


def _run_levels(
    shards: Sequence[ShardReport], baseline_dir: Path | None
) -> tuple[RunLevels, list[str]]:
    """The levels the stored checks are judged at again (gate/recheck.py): the suite's
    false-alarm target (within the range the option accepts) over its measuring tests, the
    tolerances the options accept, the baseline folder's entries."""
    first = min(shards, key=lambda s: (s.index, s.path))
    target = float((first.document.get("suite") or {}).get("target") or DEFAULT_SUITE_ALARM)
    problems = []
    if target not in SUITE_ALARM:
        problems.append(
            f"the suite false-alarm target {target:g} is outside {SUITE_ALARM.text}, which "
            f"--gpuperf-suite-alarm refuses: judged at {DEFAULT_SUITE_ALARM:g}"
        )
        target = DEFAULT_SUITE_ALARM
    checks = max(int(first.shard.get("suite_tests") or 0), 1)
    entries = None
    if baseline_dir is not None:
        entries = BaselineStore(baseline_dir, shown_from=Path.cwd())
    levels = RunLevels(
        SuiteBudget(target, checks), (TOLERANCE.low, TOLERANCE.high), entries=entries
    )
    return levels, problems


def _counts(shards: Sequence[ShardReport]) -> list[str]:
    """The plans' counts of measuring tests, which must add up: each shard's list against
    its plan's count for it, and every shard's together against the suite's (a measuring
    test whose results and whose place in `shard.measuring` were both removed merged as
    passed, while the merge said "2 measuring in the suite, 1 measured")."""
    lines = []
    suite = int(shards[0].shard.get("suite_tests") or 0)
    listed = set()
    for shard in shards:
        measuring = list(shard.shard["measuring"])
        listed.update(measuring)
        planned = shard.shard.get("planned_tests") or []
        if len(planned) >= shard.index and int(planned[shard.index - 1]) != len(measuring):
            lines.append(
                f"shard {shard.label} ({shard.path}) lists "
                f"{counted(len(measuring), 'measuring test')} where its plan counts "
                f"{planned[shard.index - 1]}: a measuring test was removed from the report?"
            )
        if planned and sum(int(n) for n in planned) != suite:
            lines.append(
                f"shard {shard.label} ({shard.path}): its plan's shards hold "
                f"{sum(int(n) for n in planned)} measuring tests, its suite {suite}"
            )
    count = max(shard.count for shard in shards)
    if len({shard.index for shard in shards}) == count and len(listed) != suite:
        lines.append(
            f"the shards list {counted(len(listed), 'measuring test')}, the suite has {suite}: "
            "the counts do not add up (a measuring test was removed from a report?)"
        )
    return lines


def every_test(shards: Sequence[ShardReport]) -> list[dict[str, Any]]:
    """Every test of every shard, once, in the suite's collection order: which shard ran it,
    how pytest ended it (a failure's first line), whether it measures and how many
    measurements it has (docs/json-schema.md, `merge.tests`)."""
    found: dict[str, tuple[int, dict[str, Any]]] = {}
    for shard in shards:
        measuring = set(shard.shard["measuring"])
        counts: dict[str, int] = {}
        for row in shard.rows:
            counts[row.test_id] = counts.get(row.test_id, 0) + 1
        for position, outcome in shard.tests():
            found.setdefault(
                outcome.test_id,
                (
                    position,
                    {
                        "test_id": outcome.test_id,
                        "shard": shard.index,
                        "outcome": outcome.outcome or "not run",
                        "message": outcome.message,
                        "measuring": outcome.test_id in measuring,
                        "measurements": counts.get(outcome.test_id, 0),
                    },
                ),
            )
    return [test for _, test in sorted(found.values(), key=lambda item: item[0])]


def failures(shard: ShardReport) -> list[str]:
    """Why this shard failed, one reason a line (empty: it passed): every failed test named
    (up to five a reason), measuring tests without a measurement, problems, Ctrl-C."""
    reasons = []
    gate = sorted({row.test_id for row in shard.rows if row.verdict.status == FAIL})
    if gate:
        plural = "s" if len(gate) != 1 else ""
        reasons.append(f"{len(gate)} test{plural} failed the gate: {_names(gate)}")
    outcomes = shard.tests()
    failed = [o for _, o in outcomes if o.outcome in _FAILED_OUTCOMES and o.test_id not in gate]
    for outcome in failed[:_SHOWN]:
        said = f": {outcome.message}" if outcome.message else ""
        what = "failed" if outcome.outcome == "failed" else "had an error"
        reasons.append(f"test {outcome.test_id} {what}{said}")
    if len(failed) > _SHOWN:
        reasons.append(f"and {len(failed) - _SHOWN} more tests failed")
    measured = {row.test_id for row in shard.rows}
    ended = {o.test_id: o.outcome for _, o in outcomes}
    unmeasured = [
        test
        for test in shard.shard["measuring"]
        if test not in measured and ended.get(test) in ("passed", "xpassed")
    ]
    if not shard.shard.get("measured", True):
        unmeasured = []  # a run without --gpuperf: its measuring tests ran once, untimed
    if unmeasured:
        reasons.append(
            f"{len(unmeasured)} measuring test{'s' if len(unmeasured) != 1 else ''} passed "
            f"with no measurement in the report: {_names(unmeasured)} (a measuring test "
            "that passed has one; the file lost it, or was edited)"
        )
    not_run = [test for test in shard.shard["tests"] if not ended.get(test)]
    if not_run and not shard.document.get("interrupted"):
        reasons.append(
            f"{len(not_run)} test{'s' if len(not_run) != 1 else ''} of this shard did not "
            f"run: {_names(not_run)}"
        )
    named = len(gate) + len(failed)
    others = int(shard.shard.get("tests_failed", 0)) - named
    if others > 0:
        reasons.append(f"{others} more test{'s' if others != 1 else ''} failed (pytest's count)")
    reasons += [f"problem: {problem}" for problem in shard.document.get("problems", ())]
    if shard.document.get("interrupted"):
        reasons.append("interrupted (Ctrl-C or SIGTERM)")
    status = int(shard.shard.get("exitstatus", 0))
    if not reasons and status not in _CLEAN_EXITS:
        reasons.append(f"pytest exited with status {status}")
    return reasons


def _names(tests: Sequence[str]) -> str:
    more = f" and {len(tests) - _SHOWN} more" if len(tests) > _SHOWN else ""
    return ", ".join(tests[:_SHOWN]) + more


def _kernel_files(shards: Sequence[ShardReport], place: Mapping[str, int]) -> list[dict[str, Any]]:
    """Every shard's tests that used gpu_bench with their kernel files, each once, in
    collection order."""
    found: dict[str, dict[str, Any]] = {}
    for shard in shards:
        for test in shard.document.get("tests", ()):
            found.setdefault(str(test["test_id"]), dict(test))
    return sorted(found.values(), key=lambda test: place.get(test["test_id"], len(place)))


def _shard_record(shard: ShardReport) -> dict[str, Any]:
    """The merged report's summary of one shard (docs/json-schema.md, "merge")."""
    plan, timing = shard.shard, shard.document.get("timing") or {}
    reasons = failures(shard)
    planned = plan.get("planned_cost_s") or []
    return {
        "index": shard.index,
        "count": shard.count,
        "path": shard.path,
        "commit": (shard.document.get("commit") or {}).get("id"),
        "device_key": shard.device_key(),
        "tests": len(plan["tests"]),
        "measuring": len(plan["measuring"]),
        "measurements": len(shard.rows),
        "planned_cost_s": planned[shard.index - 1] if len(planned) >= shard.index else None,
        "measured_cost_s": shard.measured_cost_s,
        "wall_s": timing.get("wall_s"),
        "gpu_lock_held_s": timing.get("gpu_lock_held_s"),
        "status": FAILED if reasons else PASSED,
        "reasons": reasons,
    }


def _disagreements(shards: Sequence[ShardReport]) -> list[str]:
    """One line per fact on which the shards disagree (the run is then not one run)."""
    facts = {
        "the number of shards": lambda s: s.shard.get("count"),
        "whether they measured (--gpuperf)": lambda s: s.shard.get("measured", True),
        "the commit": lambda s: _commit(s.document),
        "the device key": lambda s: s.device_key(),
        "the suite size (measuring tests)": lambda s: s.shard.get("suite_tests"),
        "the suite false-alarm target": lambda s: (s.document.get("suite") or {}).get("target"),
        "the base commit of --gpuperf-compare": lambda s: (s.document.get("compare") or {}).get(
            "commit"
        ),
        "the shard plan (baselines, test selection or plugin version differ)": lambda s: (
            s.shard.get("digest")
        ),
    }
    lines = []
    for what, fact in facts.items():
        values: dict[Any, list[str]] = {}
        for shard in shards:
            value = fact(shard)
            if value is None and what == "the device key":
                continue  # a shard that measured nothing opened no device
            values.setdefault(value, []).append(shard.label)
        if len(values) > 1:
            said = "; ".join(
                f"{', '.join(labels)}: {value if value is not None else 'none'}"
                for value, labels in values.items()
            )
            lines.append(f"shards disagree on {what}: {said}")
    return lines


def _commit(document: Mapping[str, Any]) -> str:
    commit = document.get("commit") or {}
    return str(commit.get("id") or "") + ("-dirty" if commit.get("dirty") else "")


def _missing(shards: Sequence[ShardReport]) -> list[str]:
    """Shards given twice, and shards of 1..N with no report (one line for them all)."""
    lines = []
    count = max(shard.count for shard in shards)
    given: dict[int, list[str]] = {}
    for shard in shards:
        given.setdefault(shard.index, []).append(shard.path)
    for index, paths in sorted(given.items()):
        if len(paths) > 1:
            lines.append(f"shard {index}/{count} given {len(paths)} times: {', '.join(paths)}")
    absent = [index for index in range(1, count + 1) if index not in given]
    if len(absent) == 1:
        lines.append(
            f"shard {absent[0]}/{count} is missing: no report for it (did its job end before "
            "writing --gpuperf-json?); its tests were not measured"
        )
    elif absent:
        lines.append(
            f"{len(absent)} of {count} shards {'is' if len(absent) == 1 else 'are'} missing "
            f"({_ranges(absent)}): no report for "
            "them (did their jobs end before writing --gpuperf-json?); their tests were not "
            "measured"
        )
    return lines


def _ranges(numbers: Sequence[int]) -> str:
    """[2, 3, 4, 7] -> '2-4, 7'."""
    spans: list[list[int]] = []
    for number in numbers:
        if spans and number == spans[-1][1] + 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    return ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in spans)


def _overlaps(shards: Sequence[ShardReport]) -> list[str]:
    """Tests that two shards ran (the plan gives each test to one shard), and two tests that
    claim one place in the suite's order."""
    owners: dict[str, list[str]] = {}
    places: dict[int, set[str]] = {}
    for shard in shards:
        for position, outcome in shard.tests():
            owners.setdefault(outcome.test_id, []).append(shard.label)
            places.setdefault(position, set()).add(outcome.test_id)
    lines = []
    twice = {test: labels for test, labels in owners.items() if len(labels) > 1}
    if twice:
        shown = "; ".join(
            f"{test} ({', '.join(labels)})" for test, labels in list(twice.items())[:_SHOWN]
        )
        more = f" and {len(twice) - _SHOWN} more" if len(twice) > _SHOWN else ""
        lines.append(f"{len(twice)} test(s) ran in more than one shard: {shown}{more}")
    shared = sorted(position for position, tests in places.items() if len(tests) > 1)
    if shared:
        tests = sorted(places[shared[0]])
        lines.append(
            f"{len(shared)} place(s) in the suite's order claimed by two tests (the shards "
            f"planned different suites): {' and '.join(tests)} at {shared[0]}"
        )
    return lines


def shard_line(record: Mapping[str, Any]) -> str:
    """'shard 2/3: 6 measuring tests, 6 measurements, cost 2.93 ms planned / 2.95 ms
    measured, 7.8 s wall: passed'."""
    planned = record.get("planned_cost_s")
    cost = f"cost {record['measured_cost_s'] * 1e3:.3g} ms measured"
    if planned:
        cost += f" ({planned * 1e3:.3g} ms planned)"
    wall = record.get("wall_s")
    wall_text = f", {wall:.1f} s wall" if wall is not None else ""
    status = record["status"]
    if record["reasons"]:
        status += ": " + "; ".join(record["reasons"])
    return (
        f"shard {record['index']}/{record['count']}: "
        f"{counted(record['measuring'], 'measuring test')}, "
        f"{counted(record['measurements'], 'measurement')}, {cost}{wall_text}: {status}"
    )


def cost_line(records: Sequence[Mapping[str, Any]], plan: Mapping[str, Any]) -> str:
    """What to do about shards that measured unequal costs ("" when they are balanced
    within BALANCED_SPREAD, or measured nothing to compare)."""
    measured = [r for r in records if r["measured_cost_s"] > 0]
    if len(measured) < 2:
        return ""
    heavy = max(measured, key=lambda r: r["measured_cost_s"])
    light = min(measured, key=lambda r: r["measured_cost_s"])
    spread = heavy["measured_cost_s"] / light["measured_cost_s"] - 1.0
    if spread <= BALANCED_SPREAD:
        return ""
    head = (
        f"cost balance: shard {heavy['index']} measured {spread:.0%} more GPU time "
        f"(time × samples) than shard {light['index']}"
    )
    suite, costed = int(plan.get("suite_tests") or 0), int(plan.get("costed") or 0)
    if plan.get("dominant"):
        return (
            f"{head}: {plan['dominant']} alone costs more than a shard's share, which no plan "
            "can balance; run fewer shards, or split that test"
        )
    if costed < suite:
        return (
            f"{head}: {suite - costed} of {suite} measuring tests had no recorded cost to plan "
            "by; save baselines (--gpuperf-save, then `gpuperf merge "
            "--baselines`) and the next plan balances by them"
        )
    return (
        f"{head}: the recorded costs (time × samples of the saves) no longer match what the "
        "tests take; save the baselines again (--gpuperf-save) to rebalance"
    )


def verdict_line(merged: MergedReport) -> str:
    """'merged 3 shards: 42 tests (17 measuring, 19 measurements): 41 passed, 1 skipped:
    PASSED' (or FAILED, and how many reasons)."""
    tests = (merged.meta.merge or {}).get("tests", ())
    ended: dict[str, int] = {}
    for test in tests:
        ended[test["outcome"]] = ended.get(test["outcome"], 0) + 1
    counts = ", ".join(f"{n} {outcome}" for outcome, n in ended.items())
    text = (
        f"merged {len(merged.shards)} shard{'s' if len(merged.shards) != 1 else ''}: "
        f"{len(tests)} test{'s' if len(tests) != 1 else ''} ({merged.meta.suite_checks} "
        f"measuring in the suite, {len({row.test_id for row in merged.rows})} measured, "
        f"{counted(len(merged.rows), 'measurement')}){': ' + counts if counts else ''}: "
        f"{merged.verdict.upper()}"
    )
    if merged.verdict == FAILED:
        text += f" ({len(merged.reasons)} reason{'s' if len(merged.reasons) != 1 else ''})"
    return text


__all__ = ["MergedReport", "ShardReport", "every_test", "failures", "merge_reports", "read_shard"]
