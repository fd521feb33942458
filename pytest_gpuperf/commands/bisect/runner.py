"""A whole bisection: probe BAD, choose the measurement to follow, find the commits that
changed its kernel files, search them, and say what was found (a `Report`).

An undecided probe (its interval straddles the threshold) is run again with four times the
sampling budget, so more pairs, up to `rounds` runs, before the search moves on. A probe that
failed for any reason but a compile error (out of device memory, a timeout, a crash) is run
once more; failing again, it ends the search (`Report.stopped`): a commit left out for a
failure of the run, not of the commit, could be the culprit. A BAD the simulated device did
not time (its edit has GOOD's model) ends it too (`Report.unmeasured`): nothing was measured.
"""

from __future__ import annotations

import math
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_gpuperf.commands.bisect import commits as git_range
from pytest_gpuperf.commands.bisect.commits import Commit
from pytest_gpuperf.commands.bisect.probe import (
    BROKEN,
    PROBE_FAILED,
    Key,
    ProbeError,
    ProbeFailed,
    ProbeRun,
    Reading,
    failure_reading,
    run_probe,
)
from pytest_gpuperf.commands.bisect.search import Measured, Outcome, Probe, Search
from pytest_gpuperf.errors import GpuPerfError
from pytest_gpuperf.record.checks import AB_INCONCLUSIVE, AB_MODELLED, AB_REGRESSED
from pytest_gpuperf.report.text import MODELLED_FROM

BUDGET_GROWTH = 4  # each further round of an undecided probe samples for 4x the budget
ATTEMPTS = 2  # a probe that failed (not a compile error) is run once more, then ends the search


class SearchStopped(GpuPerfError):
    """A probe failed twice for a reason that is not the commit's: the search ends there."""

    def __init__(self, commit: Commit, reading: Reading, rounds: int, wall_s: float) -> None:
        super().__init__(
            f"the probe of {commit.short} failed twice: {reading.detail or reading.state}"
        )
        self.commit = commit
        self.reading = reading
        self.rounds = rounds
        self.wall_s = wall_s


@dataclass(frozen=True)
class Plan:
    """What the user asked for (the command line, checked)."""

    good: str
    bad: str
    pytest_args: tuple[str, ...]
    threshold: float
    budget_s: float
    rounds: int
    max_probes: int
    cwd: Path
    probe_timeout_s: float | None = None


@dataclass(frozen=True)
class Report:
    """Everything the table, the culprit line and the JSON say."""

    good: Commit
    bad: Commit
    threshold: float
    range_commits: int
    kernel_files: tuple[str, ...] = ()
    candidates: tuple[Commit, ...] = ()
    followed: str = ""
    also_slower: tuple[tuple[str, Reading], ...] = ()
    device: str = ""
    simulated: bool = False
    outcome: Outcome | None = None
    probes: tuple[Probe, ...] = ()
    why_none: str = ""  # set when there is no culprit
    unmeasured: str = ""  # set when BAD was not timed (simulated: GOOD's model)
    stopped: str = ""  # set when a probe failed twice (not a compile error)
    wall_s: float = 0.0
    positions: dict[str, int] = field(default_factory=dict)  # sha -> place in GOOD..BAD
    # what the culprit changed in the code against the commit before it (the explain
    # package's `code` object), None without a culprit or without facts
    culprit_code: dict[str, Any] | None = None
    # what the profiler counted at the culprit's own probe, against GOOD (explain.traffic)
    culprit_traffic: dict[str, Any] | None = None

    @property
    def culprit(self) -> Commit | None:
        if self.ending or self.outcome is None or not self.outcome.steps:
            return None
        step = self.outcome.steps[0]
        return step.culprit if step.resolved else None

    @property
    def ending(self) -> str:
        """Why no culprit is named ("" when one is): stopped, unmeasured or why_none."""
        return self.stopped or self.unmeasured or self.why_none


ProbeFn = Callable[..., ProbeRun]


class Bisection:
    def __init__(
        self,
        plan: Plan,
        *,
        progress: Callable[[Probe, int], None] = lambda probe, expected: None,
        probe_fn: ProbeFn = run_probe,
    ) -> None:
        self.plan = plan
        self._progress = progress
        self._probe_fn = probe_fn
        self._began = time.monotonic()

    # -- one commit ---------------------------------------------------------------------------
    def _run(self, commit: Commit, budget_s: float) -> ProbeRun:
        return self._probe_fn(
            self.plan.pytest_args,
            good=self._good.sha,
            head=commit.sha,
            budget_s=budget_s,
            threshold=self.plan.threshold,
            cwd=self.plan.cwd,
            timeout_s=self.plan.probe_timeout_s,
        )

    def measure(self, commit: Commit, key: Key, first: ProbeRun | None = None) -> Measured:
        """`key`'s reading at `commit`, with more rounds while it is undecided (`first`: the
        first round, already run). A compile error skips the commit (its reading says so);
        any other failure is run once more, and SearchStopped after the second."""
        wall_s, budget_s, rounds, failed = 0.0, self.plan.budget_s, 0, 0
        reading: Reading | None = None
        if first is not None:
            wall_s, rounds, reading = first.wall_s, 1, reading_for(first, key)
            if reading.retried:
                failed, rounds = 1, 0
            else:
                budget_s *= BUDGET_GROWTH
        while (
            reading is None
            or reading.retried
            or (rounds < self.plan.rounds and reading.state == AB_INCONCLUSIVE)
        ):
            try:
                run = self._run(commit, budget_s)
            except ProbeFailed as failure:
                reading = Reading(PROBE_FAILED, detail=str(failure))
            else:
                wall_s += run.wall_s
                reading = reading_for(run, key)
            if reading.retried:
                failed += 1
                if failed >= ATTEMPTS:
                    raise SearchStopped(commit, reading, rounds + 1, wall_s)
                continue
            rounds += 1
            budget_s *= BUDGET_GROWTH
        return Measured(reading, max(rounds, 1), wall_s)

    def _first(self, bad: Commit) -> ProbeRun:
        """BAD's first run, once more when it measured nothing for a reason that is not a
        compile error (SearchStopped after the second such run)."""
        failure = Reading(BROKEN)
        for _attempt in range(ATTEMPTS):
            try:
                run = self._run(bad, self.plan.budget_s)
            except ProbeFailed as failed:
                failure = Reading(PROBE_FAILED, detail=str(failed))
                continue
            problems = [
                (test_id, failure_reading(error)) for test_id, error in run.failures.items()
            ]
            problems += [(str(key), r) for key, r in run.readings.items() if r.retried]
            measured = any(r.ratio is not None for r in run.readings.values())
            if measured or not problems or not all(r.retried for _, r in problems):
                return run
            where, first = problems[0]
            failure = replace(first, detail=f"{where}: {first.detail}")
        raise SearchStopped(bad, failure, ATTEMPTS, 0.0)

    # -- the whole search -----------------------------------------------------------------------
    def run(self) -> Report:
        """The report; RangeError or ProbeError (usage errors) escape to the command line."""
        plan = self.plan
        toplevel = git_range.toplevel_of(plan.cwd)
        good = git_range.resolve(toplevel, plan.good, "GOOD")
        bad = git_range.resolve(toplevel, plan.bad, "BAD")
        self._good = good
        commits = git_range.first_parent_range(toplevel, good, bad)
        places = {c.sha: i + 1 for i, c in enumerate(commits)}
        places[good.sha] = 0
        base = Report(good, bad, plan.threshold, len(commits), positions=places)

        # BAD's probe: a usage error of the pytest arguments shows here, on the first run.
        try:
            first = self._first(bad)
        except SearchStopped as stop:
            probe = Probe(1, bad, stop.reading, stop.rounds, stop.wall_s)
            self._announce(probe, 1)
            return self._done(replace(base, probes=(probe,), stopped=str(stop)))
        found = [(k, r) for k, r in first.readings.items() if r.ratio is not None]
        if not found:
            built = [(t, e) for t, e in first.failures.items() if not failure_reading(e).retried]
            if built:
                test_id, error = built[0]
                reading = failure_reading(error)
                probe = Probe(1, bad, reading, 1, first.wall_s)
                self._announce(probe, 1)
                return self._done(
                    replace(
                        base, probes=(probe,), why_none=f"BAD does not build: {test_id}: {error}"
                    )
                )
            command = shlex.join(["pytest", *plan.pytest_args])
            raise ProbeError(
                f"{command}: the selected tests measured no kernel "
                "with gpu_bench(...) against GOOD: select the perf tests (a path, -k EXPR)"
            )
        key, _ = max(found, key=lambda item: _rank(item[1]))
        try:
            measured = self.measure(bad, key, first)
        except SearchStopped as stop:
            probe = Probe(1, bad, stop.reading, stop.rounds, stop.wall_s)
            self._announce(probe, 1)
            return self._done(replace(base, probes=(probe,), stopped=str(stop)))
        bad_probe = Probe(1, bad, measured.reading, measured.rounds, measured.wall_s)
        also = tuple((str(k), r) for k, r in found if k != key and r.state == AB_REGRESSED)
        rootdir = Path(first.rootdir) if first.rootdir else plan.cwd
        files = git_range.kernel_closure(
            [rootdir / f for f in first.kernel_files.get(key.test_id, ())], toplevel
        )
        candidates = git_range.touching(toplevel, commits, files)
        report = replace(
            base,
            kernel_files=tuple(files),
            candidates=tuple(candidates),
            followed=str(key),
            also_slower=also,
            device=first.device,
            simulated=first.simulated,
        )
        estimate = 1 + math.ceil(math.log2(len(candidates))) if candidates else 1
        if candidates and candidates[-1].sha != bad.sha:
            bad_probe = replace(bad_probe, stands_for=candidates[-1])
        self._announce(bad_probe, estimate)
        reading = bad_probe.reading
        if reading.state == AB_MODELLED:
            return self._done(
                replace(report, probes=(bad_probe,), unmeasured=_why_unmeasured(reading))
            )
        why = _why_not_searched(reading, plan.threshold, files, candidates)
        if why:
            return self._done(replace(report, probes=(bad_probe,), why_none=why))
        search = Search(
            good,
            candidates,
            bad_probe,
            lambda commit: self.measure(commit, key),
            threshold=plan.threshold,
            max_probes=plan.max_probes,
            on_probe=lambda probe: self._announce(probe, estimate),
        )
        try:
            outcome = search.run()
        except SearchStopped as stop:
            probe = Probe(
                len(search.probes) + 1, stop.commit, stop.reading, stop.rounds, stop.wall_s
            )
            self._announce(probe, estimate)
            probes = (*search.probes, probe)
            return self._done(replace(report, probes=probes, stopped=str(stop)))
        report = replace(report, outcome=outcome, probes=outcome.probes)
        report = replace(report, why_none=_why_no_culprit(outcome, reading))
        return self._done(
            replace(
                report, culprit_code=culprit_code(report), culprit_traffic=culprit_traffic(report)
            )
        )

    def _done(self, report: Report) -> Report:
        return replace(report, wall_s=time.monotonic() - self._began)

    def _announce(self, probe: Probe, estimate: int) -> None:
        """Each probe as it ends, with the number of probes the search expects in all."""
        self._progress(probe, estimate)


def reading_for(run: ProbeRun, key: Key) -> Reading:
    """`key`'s reading in a probe's run: its comparison, or why there is none (the test
    stopped at a kernel that did not build; it measured nothing)."""
    if key in run.readings:
        return run.readings[key]
    if key.test_id in run.failures:
        return failure_reading(run.failures[key.test_id])
    return Reading(BROKEN, detail=f"{key} was not measured at this commit")


def _rank(reading: Reading) -> tuple[int, float]:
    """Regressed first, then by how much slower: the measurement to follow."""
    return (reading.state == AB_REGRESSED, reading.ratio or 0.0)


def _why_unmeasured(reading: Reading) -> str:
    """BAD's kernels differ from GOOD's, and the simulated device gave both one model."""
    source = MODELLED_FROM.get(reading.modelled_by, "the simulator")
    if reading.modelled_by == "default":
        way_out = (
            "give the kernels at BAD a `gpuperf-sim:` directive or a model, or bisect on a GPU"
        )
    else:
        way_out = "it cannot time an edit of a kernel's body: bisect on a GPU"
    return (
        "BAD was not timed: its kernels differ from GOOD's and the simulated device gives both "
        f"one speed ({source}); {way_out}"
    )


def _why_not_searched(
    reading: Reading, threshold: float, files: Sequence[str], candidates: Sequence[Commit]
) -> str:
    if reading.state != AB_REGRESSED:
        shown = ""
        if reading.ratio is not None and reading.ratio_ci is not None:
            low, high = reading.ratio_ci
            shown = f" ({reading.ratio:.4f}x GOOD's time, 95% CI {low:.4f}-{high:.4f})"
        if reading.state == AB_INCONCLUSIVE:
            return (
                f"BAD's difference from GOOD stays within the noise{shown} at the threshold "
                f"{threshold:.1%}: raise --budget or --rounds, or --threshold"
            )
        if not reading.measured:
            return f"BAD could not be measured: {reading.detail}"
        return f"BAD is not slower than GOOD by more than {threshold:.1%}{shown}: {reading.state}"
    if not files:
        return "the followed test loads no kernel file of this repository"
    if not candidates:
        return (
            f"no commit between GOOD and BAD changed {', '.join(files)}: the kernels are "
            "GOOD's, so the slowdown is not in them (the machine? a driver?)"
        )
    return ""


def _why_no_culprit(outcome: Outcome, bad_reading: Reading) -> str:
    if not outcome.steps:
        return (
            "BAD is slower than GOOD, but no single commit's step was larger than the "
            "threshold (a slow drift over several commits? the steps listed above)"
        )
    step = outcome.steps[0]
    if step.resolved:
        return ""
    names = ", ".join(c.short for c in step.suspects)
    cause = (
        "the probe budget ran out (--max-probes)"
        if outcome.budget_spent
        else ("the commits before the last do not build")
    )
    return f"the step ({step.ratio:.4f}x) is in one of {names}: {cause}"


def culprit_traffic(report: Report) -> dict[str, Any] | None:
    """What the vendor's profiler counted at the culprit's probe (one launch of the culprit
    and one of GOOD, the step's whole span: a probe compares its commit with GOOD), when that
    probe's regression was confirmed on a GPU with the profiler; None otherwise."""
    culprit = report.culprit
    if culprit is None:
        return None
    for probe in report.probes:
        if (probe.stands_for or probe.commit).sha == culprit.sha:
            traffic = probe.reading.traffic
            return dict(traffic) if traffic and traffic.get("lines") else None
    return None


def culprit_code(report: Report) -> dict[str, Any] | None:
    """The culprit's code facts against the commit before it (the step's other end: the
    probe of the last candidate before it, or GOOD), from the probes' own facts
    (--gpuperf-code-facts): both built on the same machine with the test's options."""
    culprit = report.culprit
    outcome = report.outcome
    if culprit is None or outcome is None:
        return None
    before = outcome.steps[0].before
    readings = {(p.stands_for or p.commit).sha: p.reading for p in report.probes}
    at_culprit = readings.get(culprit.sha)
    culprit_code = at_culprit.code if at_culprit is not None else None
    if not culprit_code or not culprit_code.get("head"):
        return None
    if before.sha == report.good.sha:
        before_facts = culprit_code.get("base")
    else:
        at_before = readings.get(before.sha)
        before_code = at_before.code if at_before is not None else None
        before_facts = before_code.get("head") if before_code else None
    against = f"{before.short} {before.subject}"
    if not before_facts:
        return {
            "against": against, "head": culprit_code["head"], "base": None, "changes": [],
            "unavailable": f"no code facts for {before.short}",
        }  # fmt: skip
    from pytest_gpuperf.explain.code.code_diff import code_changes
    from pytest_gpuperf.explain.code.code_facts import CodeFacts

    changes = code_changes(
        CodeFacts.from_dict(before_facts), CodeFacts.from_dict(culprit_code["head"])
    )
    return {
        "against": against, "head": culprit_code["head"], "base": before_facts,
        "changes": changes, "unavailable": "",
    }  # fmt: skip
