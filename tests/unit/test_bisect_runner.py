"""The bisection's runner (bisect/runner.py) with a stand-in for the pytest process: more
rounds with a larger budget for an undecided probe, which measurement is followed, a BAD that
does not build, a probe pytest could not run; and bench/bisect_demo.py on the simulated
device (the H100 run's path)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_gpuperf.commands.bisect.__main__ import exit_status
from pytest_gpuperf.commands.bisect.probe import (
    BROKEN,
    NO_BUILD,
    PROBE_FAILED,
    Key,
    ProbeError,
    ProbeFailed,
    ProbeRun,
    Reading,
)
from pytest_gpuperf.commands.bisect.render import culprit_line, text_report, to_json
from pytest_gpuperf.commands.bisect.runner import Bisection, Plan
from pytest_gpuperf.record.checks import AB_INCONCLUSIVE, AB_MODELLED, AB_PASS, AB_REGRESSED
from tests.git_repo import git

REPO = Path(__file__).resolve().parents[2]
FOLLOWED = Key("test_k.py::test_add", "add")
OTHER = Key("test_k.py::test_copy", "copy")


@pytest.fixture
def project(tmp_path):
    """GOOD, then 8 commits that each edit kernels/add.hip (commit 4 also docs only)."""
    (tmp_path / "kernels").mkdir()
    git(tmp_path, "init", "-q")
    for index in range(9):
        if index == 4:
            (tmp_path / "README.md").write_text(f"{index}\n")
        else:
            (tmp_path / "kernels" / "add.hip").write_text(f"// {index}\n")
        git(tmp_path, "add", "-A")
        git(tmp_path, "commit", "-qm", f"commit {index}")
    return tmp_path


def reading(state: str, ratio: float) -> Reading:
    return Reading(state, ratio, (ratio * 0.998, ratio * 1.002), pairs=40, threshold=0.005)


class FakePytest:
    """Answers each probe from `answer(subject, budget_s)`; records the calls."""

    def __init__(self, project: Path, answer) -> None:
        self.project = project
        self.answer = answer
        self.calls: list[tuple[str, float]] = []

    def __call__(self, pytest_args, *, good, head, budget_s, threshold, cwd, timeout_s):
        subject = git(self.project, "show", "-s", "--format=%s", head)
        self.calls.append((subject, budget_s))
        readings, failures = self.answer(subject, budget_s)
        return ProbeRun(
            readings=readings,
            kernel_files={FOLLOWED.test_id: ("kernels/add.hip",), OTHER.test_id: ()},
            rootdir=str(self.project),
            device="NVIDIA H100 SXM 80GB",
            simulated=False,
            wall_s=1.0,
            exit_code=1,
            failures=failures,
        )


def plan(project: Path, **changes) -> Plan:
    settings = dict(
        good="HEAD~8", bad="HEAD", pytest_args=("tests",), threshold=0.005, budget_s=0.5,
        rounds=3, max_probes=30, cwd=project,
    )  # fmt: skip
    settings.update(changes)
    return Plan(**settings)


def index_of(subject: str) -> int:
    return int(subject.split()[-1])


def test_an_undecided_probe_gets_more_rounds_with_four_times_the_budget(project):
    def answer(subject, budget_s):
        index = index_of(subject)
        if index == 4 + 0 and budget_s < 8:  # commit 4 changes no kernel: never probed
            raise AssertionError("commit 4 was probed")
        if index == 5 and budget_s < 8.0:
            return {FOLLOWED: reading(AB_INCONCLUSIVE, 1.004)}, {}
        state = AB_REGRESSED if index >= 5 else AB_PASS
        return {FOLLOWED: reading(state, 1.05 if index >= 5 else 1.0)}, {}

    fake = FakePytest(project, answer)
    report = Bisection(plan(project), probe_fn=fake).run()
    assert report.culprit is not None and report.culprit.subject == "commit 5"
    assert [b for s, b in fake.calls if s == "commit 5"] == [0.5, 2.0, 8.0]
    probe = next(p for p in report.probes if p.commit.subject == "commit 5")
    assert probe.rounds == 3 and probe.reading.state == AB_REGRESSED
    assert "commit 4" not in [s for s, _ in fake.calls]
    assert [c.subject for c in report.candidates] == [f"commit {i}" for i in (1, 2, 3, 5, 6, 7, 8)]


def test_the_slowest_regressed_measurement_is_followed_and_the_others_listed(project):
    def answer(subject, budget_s):
        index = index_of(subject)
        slow = index >= 6
        return {
            FOLLOWED: reading(AB_REGRESSED if slow else AB_PASS, 1.08 if slow else 1.0),
            OTHER: reading(AB_REGRESSED, 1.02),
        }, {}

    report = Bisection(plan(project), probe_fn=FakePytest(project, answer)).run()
    assert report.followed == "test_k.py::test_add [add]"
    assert [name for name, _ in report.also_slower] == ["test_k.py::test_copy [copy]"]
    assert report.culprit is not None and report.culprit.subject == "commit 6"


def test_a_bad_that_does_not_build_names_no_culprit(project):
    def answer(subject, budget_s):
        return {}, {FOLLOWED.test_id: "CompileError: kernels/add.hip:3: expected ';'"}

    report = Bisection(plan(project), probe_fn=FakePytest(project, answer)).run()
    assert report.culprit is None
    assert report.why_none == (
        "BAD does not build: test_k.py::test_add: CompileError: kernels/add.hip:3: expected ';'"
    )
    assert report.probes[0].reading.state == NO_BUILD


def test_a_probe_that_failed_once_is_run_again(project):
    def answer(subject, budget_s):
        index = index_of(subject)
        if index == 3 and sum(1 for s, _ in fake.calls if s == subject) == 1:
            raise ProbeFailed("the probe of commit 3 ran longer than 60 s (--probe-timeout)")
        state = AB_REGRESSED if index >= 7 else AB_PASS
        return {FOLLOWED: reading(state, 1.05 if index >= 7 else 1.0)}, {}

    fake = FakePytest(project, answer)
    report = Bisection(plan(project), probe_fn=fake).run()
    assert report.culprit is not None and report.culprit.subject == "commit 7"
    assert [s for s, _ in fake.calls].count("commit 3") == 2
    assert not report.outcome.skipped and not report.stopped


@pytest.mark.parametrize(
    "failure",
    [
        ProbeFailed("the probe of commit 3 ran longer than 60 s (--probe-timeout)"),
        "OutOfDeviceMemory: the simulated device cannot allocate 576 MiB",
        "LaunchError: hipErrorLaunchFailure",
    ],
)
def test_a_probe_that_fails_twice_ends_the_search_with_its_reason(project, failure):
    """Only a compile error is "does not build": a runtime failure (the machine short of
    memory, a timeout) says nothing about the commit, and skipping it could skip the
    culprit."""

    def answer(subject, budget_s):
        index = index_of(subject)
        if index == 3:  # the first midpoint of the 7 candidates (1, 2, 3, 5, 6, 7, 8)
            if isinstance(failure, ProbeFailed):
                raise failure
            return {}, {FOLLOWED.test_id: failure}
        state = AB_REGRESSED if index >= 3 else AB_PASS
        return {FOLLOWED: reading(state, 1.05 if index >= 3 else 1.0)}, {}

    fake = FakePytest(project, answer)
    report = Bisection(plan(project), probe_fn=fake).run()
    assert [s for s, _ in fake.calls].count("commit 3") == 2
    assert report.culprit is None and report.stopped.startswith("the probe of ")
    assert str(failure).split(":")[0] in report.stopped and "failed twice" in report.stopped
    last = report.probes[-1]
    assert last.commit.subject == "commit 3" and last.reading.state in (BROKEN, PROBE_FAILED)
    assert culprit_line(report).startswith("culprit: unknown (the search stopped: the probe of ")
    assert exit_status(report) == 4


def test_a_bad_whose_probe_fails_at_run_time_is_not_called_unbuildable(project):
    fake = FakePytest(
        project, lambda s, b: ({}, {FOLLOWED.test_id: "OutOfDeviceMemory: out of memory"})
    )
    report = Bisection(plan(project), probe_fn=fake).run()
    assert len(fake.calls) == 2  # run once more
    assert "does not build" not in report.ending
    assert report.stopped == (
        f"the probe of {report.bad.short} failed twice: test_k.py::test_add: "
        "OutOfDeviceMemory: out of memory"
    )
    assert exit_status(report) == 4


def test_a_bad_the_simulated_device_did_not_time_is_not_measured(project):
    """An edit without a gpuperf-sim directive has GOOD's model: no interval, its own line
    and exit status, never `not slower than GOOD`."""
    modelled = Reading(AB_MODELLED, 1.0, None, threshold=0.005, modelled_by="default")
    fake = FakePytest(project, lambda s, b: ({FOLLOWED: modelled}, {}))
    report = Bisection(plan(project), probe_fn=fake).run()
    assert len(fake.calls) == 1 and report.culprit is None
    line = culprit_line(report)
    assert line.startswith("culprit: not measured (BAD was not timed: ")
    assert "the simulator's default" in line and "CI" not in line and "1.0000" not in line
    assert exit_status(report) == 3
    text = text_report(report)
    assert "GOOD's model, not timed" in text and "[1.0000" not in text
    assert to_json(report)["probes"][0]["ratio_ci"] is None


def test_a_run_that_measured_nothing_is_a_usage_error(project):
    report = Bisection(plan(project), probe_fn=FakePytest(project, lambda s, b: ({}, {})))
    with pytest.raises(ProbeError, match="measured no kernel with gpu_bench"):
        report.run()


@pytest.mark.slow
def test_the_demo_project_names_its_culprit_on_the_simulated_device(tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["GPUPERF_SIM_SEED"] = "99"
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "bisect_demo.py"), "--backend", "sim",
         "--elements", str(1 << 20), "--budget", "0.02", "--out", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["named"] and summary["commits"] == 24
    assert summary["probes"] <= 1 + 4 + 1  # BAD, log2 of 9 candidates, one skipped
    assert "(does not build)" in (tmp_path / "bisect.txt").read_text()


def test_an_undecided_bad_is_measured_again_before_the_search(project):
    def answer(subject, budget_s):
        index = index_of(subject)
        if index == 8 and budget_s < 2.0:
            return {FOLLOWED: reading(AB_INCONCLUSIVE, 1.006)}, {}
        slow = index >= 6
        return {FOLLOWED: reading(AB_REGRESSED if slow else AB_PASS, 1.01 if slow else 1.0)}, {}

    fake = FakePytest(project, answer)
    report = Bisection(plan(project), probe_fn=fake).run()
    assert [b for s, b in fake.calls if s == "commit 8"] == [0.5, 2.0]
    assert report.probes[0].rounds == 2 and report.probes[0].reading.state == AB_REGRESSED
    assert report.culprit is not None and report.culprit.subject == "commit 6"


def test_a_bad_that_stays_undecided_names_no_culprit_and_says_how_to_decide(project):
    fake = FakePytest(project, lambda s, b: ({FOLLOWED: reading(AB_INCONCLUSIVE, 1.006)}, {}))
    report = Bisection(plan(project, rounds=2), probe_fn=fake).run()
    assert len(fake.calls) == 2 and report.culprit is None
    assert report.why_none.startswith("BAD's difference from GOOD stays within the noise")
    assert "raise --budget or --rounds" in report.why_none


def test_the_culprits_measured_traffic_is_said_under_it_against_good(project):
    """A probe whose regression was confirmed on a GPU with the vendor's profiler carries its
    explain.traffic (one launch of the commit, one of GOOD): the culprit's lines are printed
    above the culprit line and kept in the JSON; a probe without them adds nothing."""
    traffic = {
        "profiler": "ncu",
        "lines": ["head moved +2.5% DRAM bytes: read +3.0% (268.4 -> 276.5 MB), write unchanged"],
    }

    def answer(subject, budget_s):
        index = index_of(subject)
        if index >= 6:
            return {FOLLOWED: replace(reading(AB_REGRESSED, 1.03), traffic=traffic)}, {}
        return {FOLLOWED: reading(AB_PASS, 1.0)}, {}

    report = Bisection(plan(project), probe_fn=FakePytest(project, answer)).run()
    assert report.culprit is not None and report.culprit.subject == "commit 6"
    lines = text_report(report).splitlines()
    assert lines[-2] == (
        f"culprit's traffic, against {report.good.short} (GOOD): head moved +2.5% DRAM bytes: "
        "read +3.0% (268.4 -> 276.5 MB), write unchanged"
    )
    assert to_json(report)["culprit_explain"]["traffic"] == traffic

    quiet = Bisection(
        plan(project), probe_fn=FakePytest(project, lambda s, b: ({FOLLOWED: reading(
            AB_REGRESSED if index_of(s) >= 6 else AB_PASS, 1.03 if index_of(s) >= 6 else 1.0
        )}, {}))
    ).run()  # fmt: skip
    assert "traffic" not in text_report(quiet)
    assert to_json(quiet)["culprit_explain"] is None


def test_the_culprits_counter_lines_say_their_prefix_once(project):
    """Issue 45 item 15: four counter lines each began "culprit's traffic, against ...:"."""
    said = [
        "head moved +2.5% DRAM bytes: read +3.0% (268.4 -> 276.5 MB), write unchanged",
        "registers per thread 16 -> 24",
        "achieved occupancy 90% -> 60%",
        "instructions +12%",
    ]
    traffic = {"profiler": "ncu", "lines": said}

    def answer(subject, budget_s):
        if index_of(subject) >= 6:
            return {FOLLOWED: replace(reading(AB_REGRESSED, 1.03), traffic=traffic)}, {}
        return {FOLLOWED: reading(AB_PASS, 1.0)}, {}

    report = Bisection(plan(project), probe_fn=FakePytest(project, answer)).run()
    text = text_report(report)
    assert text.count("culprit's traffic") == 1
    lines = text.splitlines()
    start = lines.index(f"culprit's traffic, against {report.good.short} (GOOD):")
    assert lines[start + 1 : start + 5] == [f"  {line}" for line in said]
