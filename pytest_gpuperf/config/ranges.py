"""The ranges of every option that sets a rate or a level, declared once.

A rate or a level outside a sane range does not make the gate stricter or looser by a little:
it disarms it. A run-wide false-alarm budget of 1e-17 asks for a quantile no float can hold
(1 - 1e-17 rounds to 1, whose quantile is infinite: every allowance became infinite and a 60%
slowdown passed), and a tolerance of 0.9 lets a kernel lose nine tenths of its speed. So each
such value has a closed range, checked where the value is parsed (the option, the ini key, the
marker, the history CLI) and quoted in the help texts and docs/measurement.md. No pytest or
SciPy import here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Range:
    """A closed interval [low, high] of a fraction, with what it is for."""

    low: float
    high: float

    def __contains__(self, value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        return math.isfinite(value) and self.low <= value <= self.high

    @property
    def text(self) -> str:
        """'[0, 0.5]', as the error messages and docs write it."""
        return f"[{self.low:g}, {self.high:g}]"


# The hard limit of a measurement, as a multiple of its budget: below 2 the sampling the
# budget allows (and its warm-up) would not fit; beyond 1000 a hung measurement outlives any
# CI job that would ever end it.
HARD_LIMIT = Range(2.0, 1000.0)
# The smallest drop that fails a stored-baseline test. Above half the speed, a "regression"
# is no longer a gate but a crash detector.
TOLERANCE = Range(0.0, 0.5)
# The smallest A/B difference that counts (head time / base time - 1).
COMPARE_THRESHOLD = Range(0.0, 0.5)
# How much two code objects of equal speed may differ for a whole run (+-95%).
CODE_SPREAD = Range(0.0, 0.5)
# How far below its peers a GPU may fall before the probe calls it degraded.
GPU_MARGIN = Range(0.0, 0.5)
# The run's false-alarm budget (--gpuperf-suite-alarm): at most every other unchanged run red;
# at least 1 in 10,000, whose per-test share still has a finite quantile for any suite size.
SUITE_ALARM = Range(1e-4, 0.5)
# The one-sided level of one check (the history CLI's --false-alarm-rate): from one in a
# million to one in four (a 50% one-sided level is a coin toss, not a band).
CHECK_RATE = Range(1e-6, 0.25)

# Budgets and timeouts (--gpuperf-budget, --gpuperf-kernel-timeout, --gpuperf-compile-timeout,
# a marker's budget_s, bisect's --budget), in seconds: (0, a day]. Beyond it a time means
# "never", and 1e307 overflowed where it was used (an OverflowError in every test).
MAX_SECONDS = 86_400.0
# A marker's peak_gbps: (0, 100 TB/s], twenty times the fastest HBM of today.
MAX_PEAK_GBPS = 100_000.0
# --gpuperf-gpu: a device index; its digits are counted before they are converted.
MAX_GPU_INDEX = 1023
