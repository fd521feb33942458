"""The search: where between GOOD and BAD the followed measurement got slower, and by how much.

Positions 0..n are GOOD and the n commits that changed a kernel file (oldest first); every
probe gives the ratio of a position's time to GOOD's, so the change across an interval is
the ratio of its ends. The search halves the interval holding the larger change (one probe
each: n commits cost about log2(n) probes), and keeps the other half when it changed by
more than the threshold too: a range with several steps ends with the largest as the culprit
and the others as steps it saw, each narrowed as far as the probe budget allows. A commit
whose kernels do not build is skipped for its nearest neighbour and named; a step that only
unbuildable commits separate is reported as a range, never guessed. Nothing here runs a
process: `measure` does (runner.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pytest_gpuperf.commands.bisect.commits import Commit
from pytest_gpuperf.commands.bisect.probe import GOOD_STATE, Reading


@dataclass(frozen=True)
class Probe:
    """One probed commit: its reading after `rounds` pytest runs (more pairs for an undecided
    one), and the candidate it stands for when that is not itself (BAD, for the last commit
    that changed a kernel file)."""

    number: int
    commit: Commit
    reading: Reading
    rounds: int
    wall_s: float
    stands_for: Commit | None = None


@dataclass(frozen=True)
class Measured:
    reading: Reading
    rounds: int
    wall_s: float


@dataclass(frozen=True)
class Step:
    """A change of speed between two measured positions: `ratio` is after / before. When
    `suspects` has more than one commit the search could not tell which of them it was (the
    ones between do not build, or the probe budget ran out)."""

    before: Commit
    suspects: tuple[Commit, ...]
    ratio: float
    ratio_bounds: tuple[float, float]  # the ends' intervals combined: (lowest, highest)

    @property
    def resolved(self) -> bool:
        return len(self.suspects) == 1

    @property
    def culprit(self) -> Commit:
        return self.suspects[-1]


@dataclass(frozen=True)
class Outcome:
    probes: tuple[Probe, ...]
    steps: tuple[Step, ...]  # largest first
    skipped: tuple[Probe, ...]  # probed commits whose kernels did not build (or test failed)
    budget_spent: bool


class Search:
    """One bisection over `candidates` given BAD's probe (which stands for the last of them)."""

    def __init__(
        self,
        good: Commit,
        candidates: Sequence[Commit],
        bad_probe: Probe,
        measure: Callable[[Commit], Measured],
        *,
        threshold: float,
        max_probes: int,
        on_probe: Callable[[Probe], None] = lambda probe: None,
    ) -> None:
        if not candidates:
            raise ValueError("a search needs at least one candidate commit")
        self.good = good
        self.positions = [good, *candidates]
        self.threshold = threshold
        self.max_probes = max_probes
        self._measure = measure
        self._on_probe = on_probe
        self.probes: list[Probe] = [bad_probe]
        self.readings: dict[int, Reading] = {
            0: Reading(GOOD_STATE, 1.0, (1.0, 1.0)),
            len(candidates): bad_probe.reading,
        }
        self.unbuildable: dict[int, Probe] = {}
        self.budget_spent = False

    # -- the numbers ------------------------------------------------------------------------
    def _log(self, position: int) -> float:
        ratio = self.readings[position].ratio
        assert ratio is not None
        return math.log(ratio)

    def change(self, lo: int, hi: int) -> float:
        """The log of the speed change from `lo` to `hi` (> 0: slower)."""
        return self._log(hi) - self._log(lo)

    def _bounds(self, lo: int, hi: int) -> tuple[float, float]:
        low_ci = self.readings[lo].ratio_ci or (self.readings[lo].ratio,) * 2
        high_ci = self.readings[hi].ratio_ci or (self.readings[hi].ratio,) * 2
        assert low_ci[0] and high_ci[0] and low_ci[1] and high_ci[1]
        return high_ci[0] / low_ci[1], high_ci[1] / low_ci[0]

    def slower(self, lo: int, hi: int) -> bool:
        """`hi` is slower than `lo` by more than the threshold, and their intervals do not
        overlap: a step, not two readings of one speed."""
        return self.change(lo, hi) > math.log1p(self.threshold) and self._bounds(lo, hi)[0] > 1.0

    # -- probing ----------------------------------------------------------------------------
    def _probe(self, position: int) -> bool:
        """Measure `position`; False when its kernels do not build (it is skipped)."""
        commit = self.positions[position]
        measured = self._measure(commit)
        probe = Probe(
            len(self.probes) + 1, commit, measured.reading, measured.rounds, measured.wall_s
        )
        self.probes.append(probe)
        self._on_probe(probe)
        if not measured.reading.measured:
            self.unbuildable[position] = probe
            return False
        self.readings[position] = measured.reading
        return True

    def _between(self, lo: int, hi: int) -> int | None:
        """A measured position strictly between lo and hi, nearest the middle first; None
        when every one of them does not build (or the budget is spent)."""
        middle = (lo + hi) // 2
        order = sorted(range(lo + 1, hi), key=lambda p: (abs(p - middle), p < middle))
        for position in order:
            if position in self.unbuildable:
                continue
            if position in self.readings:
                return position
            if len(self.probes) >= self.max_probes:
                self.budget_spent = True
                return None
            if self._probe(position):
                return position
        return None

    def _narrow(self, lo: int, hi: int, pending: list[tuple[int, int]]) -> tuple[int, int]:
        while hi - lo > 1:
            middle = self._between(lo, hi)
            if middle is None:
                break
            left, right = self.change(lo, middle), self.change(middle, hi)
            if right > left:
                other, (lo, hi) = (lo, middle), (middle, hi)
            else:
                other, (lo, hi) = (middle, hi), (lo, middle)
            if self.slower(*other):
                pending.append(other)
        return lo, hi

    def run(self) -> Outcome:
        """Narrow the largest change first, then the others seen, while probes remain."""
        pending = [(0, len(self.positions) - 1)]
        steps: list[Step] = []
        while pending:
            pending.sort(key=lambda span: self.change(*span), reverse=True)
            lo, hi = self._narrow(*pending.pop(0), pending)
            if self.slower(lo, hi):
                steps.append(self._step(lo, hi))
        steps.sort(key=lambda step: step.ratio, reverse=True)
        skipped = tuple(sorted(self.unbuildable.values(), key=lambda p: p.number))
        return Outcome(tuple(self.probes), tuple(steps), skipped, self.budget_spent)

    def _step(self, lo: int, hi: int) -> Step:
        return Step(
            before=self.positions[lo],
            suspects=tuple(self.positions[lo + 1 : hi + 1]),
            ratio=math.exp(self.change(lo, hi)),
            ratio_bounds=self._bounds(lo, hi),
        )
