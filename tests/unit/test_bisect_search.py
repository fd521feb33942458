"""The bisection's search on its own (bisect/search.py): speeds given per commit, no process
run. How many probes a step costs, several steps, commits that do not build, the budget."""

from __future__ import annotations

import math

import pytest

from pytest_gpuperf.commands.bisect.commits import Commit
from pytest_gpuperf.commands.bisect.probe import NO_BUILD, Reading
from pytest_gpuperf.commands.bisect.search import Measured, Probe, Search

GOOD = Commit("0" * 40, "good")


def commits(count: int) -> list[Commit]:
    return [Commit(f"{index:040x}", f"change {index}") for index in range(1, count + 1)]


def reading(ratio: float, half_width: float = 0.002) -> Reading:
    return Reading("measured", ratio, (ratio * (1 - half_width), ratio * (1 + half_width)))


def search_of(ratios: dict[int, float], count: int, *, broken=(), max_probes=40, threshold=0.005):
    """A search over `count` commits whose speed (time / GOOD's) changes at the commits in
    `ratios` (index -> the ratio from that commit on); `broken` commits do not build."""
    candidates = commits(count)

    def ratio_at(index: int) -> float:
        value = 1.0
        for start, ratio in sorted(ratios.items()):
            if index >= start:
                value = ratio
        return value

    measured: list[int] = []

    def measure(commit: Commit) -> Measured:
        index = int(commit.sha, 16)
        measured.append(index)
        if index in broken:
            return Measured(Reading(NO_BUILD, detail="error: expected ';'"), 1, 0.1)
        return Measured(reading(ratio_at(index)), 1, 0.1)

    bad = Probe(1, candidates[-1], reading(ratio_at(count)), 1, 0.1)
    search = Search(GOOD, candidates, bad, measure, threshold=threshold, max_probes=max_probes)
    return search, measured


@pytest.mark.parametrize("hidden", [1, 2, 13, 20, 27, 39, 40])
def test_one_step_among_40_commits_is_found_in_at_most_7_probes(hidden):
    search, _ = search_of({hidden: 1.10}, 40)
    outcome = search.run()
    assert len(outcome.probes) <= 1 + math.ceil(math.log2(40)) == 7
    assert [step.culprit.subject for step in outcome.steps] == [f"change {hidden}"]
    assert outcome.steps[0].ratio == pytest.approx(1.10)


def test_two_steps_name_the_largest_and_the_other_one_seen():
    search, _ = search_of({9: 1.04, 31: 1.04 * 1.15}, 40)
    outcome = search.run()
    assert [step.culprit.subject for step in outcome.steps] == ["change 31", "change 9"]
    assert [round(step.ratio, 4) for step in outcome.steps] == [1.15, 1.04]
    assert all(step.resolved for step in outcome.steps)


def test_a_speed_up_between_is_not_a_step():
    search, _ = search_of({5: 0.9, 30: 1.08}, 40)
    outcome = search.run()
    assert [step.culprit.subject for step in outcome.steps] == ["change 30"]


def test_commits_that_do_not_build_are_skipped_for_their_neighbours():
    search, measured = search_of({23: 1.1}, 40, broken={20, 21})
    outcome = search.run()
    assert outcome.steps[0].culprit.subject == "change 23"
    assert {p.commit.subject for p in outcome.skipped} <= {"change 20", "change 21"}
    assert outcome.skipped and all(p.reading.state == NO_BUILD for p in outcome.skipped)
    assert len(set(measured)) == len(measured)  # nothing measured twice


def test_a_step_only_unbuildable_commits_separate_is_a_range_not_a_guess():
    search, _ = search_of({12: 1.1}, 16, broken={9, 10, 11})
    outcome = search.run()
    step = outcome.steps[0]
    assert not step.resolved
    assert [c.subject for c in step.suspects] == [f"change {i}" for i in (9, 10, 11, 12)]


def test_the_probe_budget_ends_the_search_with_a_range():
    search, _ = search_of({30: 1.1}, 40, max_probes=3)
    outcome = search.run()
    assert len(outcome.probes) == 3 and outcome.budget_spent
    step = outcome.steps[0]  # probed: BAD (40), 20, 30
    assert not step.resolved
    assert [c.subject for c in step.suspects] == [f"change {i}" for i in range(21, 31)]


def test_commits_of_one_speed_within_the_noise_are_not_steps():
    """Readings that differ by less than the threshold, or whose intervals overlap, are one
    speed: a step needs both."""
    search, _ = search_of({10: 1.004, 25: 1.10}, 40)
    outcome = search.run()
    assert [step.culprit.subject for step in outcome.steps] == ["change 25"]
