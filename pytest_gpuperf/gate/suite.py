"""The false alarms of a whole run: the levels each check is judged at, from the run's target.

A pull request runs the whole suite, and it goes red when any test fails: with N checks each
crying wolf at a rate p, an unchanged pull request goes red 1 - (1 - p)^N of the time (63%
for 100 checks at 1%). The gate therefore budgets false alarms per RUN
(--gpuperf-suite-alarm, A): each of the N tests that measure may fail falsely at most A / N
(a union bound, which needs no assumption about how the tests' noise is related, and lets
every test be decided as it finishes, in its own report; a false-discovery rule over all the
run's p-values could only fail tests at the end).

How a test spends its A / N differs between the two checks (docs/measurement.md, "False
alarms of a whole run"):

- **A/B in one run** confirms before failing: a REGRESSED comparison is measured again with
  freshly loaded code objects on fresh buffers, and fails only when the second round agrees.
  What a pair does not cancel (launch jitter, where each code object was loaded, where the
  buffers landed) is drawn anew for the second round, and the run-wide drift cancels in both,
  so the two rounds of an unchanged kernel cry wolf independently: a false failure needs both,
  at a rate a1 x a2. Each round is judged at a = sqrt(A / N), the confirmation of one of a
  test's m measurements at a / m, so a test fails falsely at most a^2 = A / N. A round is never
  judged looser than MAX_ROUND_RATE, the single-round level of a 95% interval.
- **Stored baselines** share the baseline between the rounds: a baseline saved on a fast day
  makes both rounds look slow, and a second round in the same process shares that day's
  drift too. Confirmation there filters what is transient within the run (a neighbour, a
  throttled clock) but earns no credit: each measurement is judged at A / N / m, never looser
  than FALSE_ALARM_RATE.

Kept free of SciPy: the pytest layer quotes the default in help texts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pytest_gpuperf.gate.policy import FALSE_ALARM_RATE

# The default run-wide target: an unchanged pull request goes red at most 1% of the time.
DEFAULT_SUITE_ALARM = 0.01
# The loosest level one A/B round is judged at: the one-sided tail of a 95% interval, the
# level the A/B gate used before it confirmed (small suites are never judged looser).
MAX_ROUND_RATE = 0.025


@dataclass(frozen=True)
class SuiteBudget:
    """The run's false-alarm target and how many tests it is shared by.

    `checks` is the number of collected tests that use the gpu_bench fixture (every xdist
    worker collects the whole run, so each one counts the same N); 1 outside a pytest run.
    """

    target: float = DEFAULT_SUITE_ALARM
    checks: int = 1

    def __post_init__(self) -> None:
        if not 0.0 < self.target < 1.0:
            raise ValueError(f"the suite false-alarm target is a fraction in (0, 1), not {self}")
        if self.checks < 1:
            raise ValueError(f"a run has at least one check, not {self.checks}")

    @property
    def per_test(self) -> float:
        """The rate at which one test may fail falsely: A / N."""
        return self.target / self.checks

    @property
    def ab_round_rate(self) -> float:
        """The one-sided level of an A/B comparison's first round: sqrt(A / N), at most
        MAX_ROUND_RATE."""
        return min(math.sqrt(self.per_test), MAX_ROUND_RATE)

    def ab_confirm_rate(self, measurements: int = 1) -> float:
        """The level of the confirming round of one of a test's `measurements`: what is left
        of A / N after the first round, split among them, at most MAX_ROUND_RATE."""
        share = self.per_test / max(measurements, 1) / self.ab_round_rate
        return min(share, MAX_ROUND_RATE)

    def stored_rate(self, measurements: int = 1) -> float:
        """The level of a stored-baseline check: A / N / m, at most FALSE_ALARM_RATE (the
        rounds share their baseline, so confirmation earns no credit)."""
        return min(self.per_test / max(measurements, 1), FALSE_ALARM_RATE)

    def ab_test_rate(self, measurements: int = 1) -> float:
        """The rate at which an unchanged test of `measurements` A/B comparisons fails: both
        rounds of one of them crying wolf (at most A / N)."""
        return measurements * self.ab_round_rate * self.ab_confirm_rate(measurements)


def interval_confidence(one_sided_rate: float) -> float:
    """The two-sided confidence of an interval whose one tail is `one_sided_rate`: the A/B
    state reads one end of the interval against the threshold (0.025 gives 0.95)."""
    return 1.0 - 2.0 * one_sided_rate


def suite_red_rate(per_test_rates: list[float] | tuple[float, ...]) -> float:
    """How often a run of independent tests with these false-alarm (or detection) rates has
    at least one failure: 1 - prod(1 - p)."""
    return 1.0 - math.prod(1.0 - rate for rate in per_test_rates)
