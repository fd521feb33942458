"""The state of an A/B measurement while it samples: which side goes first in each slot, the
head/base times and their ratios so far, the code load each pair ran on, and when the
comparison may stop (sampling.py fills it batch by batch; recording.py reads its samples).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pytest_gpuperf.engine import stats
from pytest_gpuperf.engine.policy import MIN_PAIRS_PER_LOAD
from pytest_gpuperf.engine.timing import Batch


@dataclass
class Pairing:
    """The state of an A/B measurement: slot order, the ratios so far and the load each
    pair ran on, the stopping rule."""

    rng: np.random.Generator
    stop_when: Callable[[tuple[float, float], float], bool] | None
    loads: int = 1
    placements: int = 1
    ratios: list[float] = field(default_factory=list)
    head_s: list[float] = field(default_factory=list)
    base_s: list[float] = field(default_factory=list)
    loads_of_pairs: list[int] = field(default_factory=list)
    orders: list[tuple[int, int]] = field(default_factory=list)

    def estimate(self) -> stats.NestedEstimate:
        """The trimmed mean of the log ratios, nested over the loads."""
        return stats.nested_trimmed_mean(np.log(self.ratios), self.loads_of_pairs)

    def decidable(self, min_samples: int) -> bool:
        """Enough pairs to decide on: `min_samples`, and MIN_PAIRS_PER_LOAD on every load."""
        if len(self.ratios) < max(min_samples, 2):
            return False
        counts = np.bincount(self.loads_of_pairs, minlength=self.loads)
        return bool(counts.min() >= MIN_PAIRS_PER_LOAD)

    def plan(self, samples: int) -> None:
        self.orders = [(0, 1) if self.rng.random() < 0.5 else (1, 0) for _ in range(samples)]

    def order(self, slot: int) -> tuple[int, int]:
        return self.orders[slot]

    def take(self, batch: Batch) -> None:
        for slot, (head_s, base_s) in enumerate(batch.slots):
            if head_s is not None and base_s is not None:
                self.head_s.append(head_s)
                self.base_s.append(base_s)
                self.ratios.append(head_s / base_s)
                self.loads_of_pairs.append((slot % self.placements) % self.loads)
