"""Which tests one of N CI runners measures (`--gpuperf-shard=K/N`), balanced by recorded cost.

pytest-split and similar tools shard by test count or by pytest's durations; a perf suite's
tests differ by orders of magnitude in what they cost the GPU (a 100 µs kernel sampled 30
times against a 2 µs one sampled 10 times), and the baseline file already records that cost:
each save holds its kernel time and how many samples were timed. A test's cost is the sum,
over its entries in the device's baseline file, of time_s × samples of the last save (the
median over the entry's saves when it has several); a test with none costs the median of
those that have one (the count, when no test has one). The measuring tests are dealt out
longest first, each to the shard with the least cost so far (LPT: deterministic, every
runner computes the same plan from the same checkout and baseline file); the tests that do
not measure are dealt round-robin so each still runs once.

Every shard counts the whole suite's measuring tests, so the run-wide false-alarm budget
(gate/suite.py) is split over all of them, not over one shard's; the plan's digest lets the
merge (`gpuperf merge`) check that every runner made the same plan.
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_gpuperf.baseline.model import BaselineEntry
from pytest_gpuperf.record.shard_reader import MAX_SHARDS

BASIS_BASELINE = "baseline"  # every measuring test has a recorded cost
BASIS_MIXED = "mixed"  # some do; the others cost the median of theirs
BASIS_COUNT = "count"  # none does: balanced by test count


@dataclass(frozen=True)
class ShardPlan:
    """This runner's part of the run, and what it was planned from.

    `selected` is this shard's tests (node ids, collection order); `suite_tests` counts the
    whole suite's measuring tests (the false-alarm budget's N); `planned_cost_s` is each
    shard's sum of recorded costs (seconds of timed GPU work at the last saves);
    `digest` identifies the whole partition.
    """

    index: int  # K, from 1
    count: int  # N
    selected: tuple[str, ...]
    measuring: tuple[str, ...]  # the measuring tests among `selected`
    suite_tests: int
    suite_other: int  # tests of the suite that do not measure
    planned_cost_s: tuple[float, ...]  # zeros under the "count" basis
    planned_tests: tuple[int, ...]  # measuring tests per shard
    basis: str
    costed: int  # measuring tests of the suite with a recorded cost
    device_key: str | None
    digest: str
    # A test that alone costs more than 1/N of the suite: no plan balances the shards then
    dominant: str = ""
    # Each of `selected`'s place in the suite's collection order (from 0): the merge lists
    # every shard's tests in the order one unsharded run would
    positions: tuple[int, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"

    def describe(self) -> str:
        """'shard 2/3: 6 of 17 measuring tests, planned cost 3.41 ms of 10.2 ms (recorded
        time × samples in mi300x-sim.toml)'."""
        where = f" in {self.device_key}.toml" if self.device_key else ""
        if self.basis == BASIS_COUNT:
            cost, basis = "", f"no recorded costs{where}: balanced by test count"
        else:
            mine, total = self.planned_cost_s[self.index - 1], sum(self.planned_cost_s)
            cost = f", planned cost {_ms(mine)} of {_ms(total)}"
            basis = f"recorded time × samples{where}"
            unknown = self.suite_tests - self.costed
            if unknown:
                basis += f"; {unknown} test{'s' if unknown != 1 else ''} without one at the median"
        if self.dominant:
            light, heavy = min(self.planned_cost_s), max(self.planned_cost_s)
            basis += (
                f"; {self.dominant} alone costs more than a shard's share, so the shards "
                f"differ ({_ms(light)} to {_ms(heavy)}): run fewer shards, or split that test"
            )
        others = len(self.selected) - len(self.measuring)
        other = f" (+{others} not measuring)" if others else ""
        return (
            f"shard {self.label}: {len(self.measuring)} of {self.suite_tests} measuring tests"
            f"{other}{cost} ({basis})"
        )

    def to_json(self) -> dict[str, Any]:
        """The report's "shard" object (docs/json-schema.md)."""
        return {
            "index": self.index,
            "count": self.count,
            "tests": list(self.selected),
            "measuring": list(self.measuring),
            "suite_tests": self.suite_tests,
            "suite_other": self.suite_other,
            "planned_cost_s": list(self.planned_cost_s),
            "planned_tests": list(self.planned_tests),
            "basis": self.basis,
            "costed": self.costed,
            "device_key": self.device_key,
            "digest": self.digest,
            "dominant": self.dominant,
            "positions": list(self.positions),
        }


def plan_from_json(data: Mapping[str, Any]) -> ShardPlan:
    """The plan `ShardPlan.to_json` wrote (a pytest-xdist worker's, in its controller)."""
    return ShardPlan(
        index=int(data["index"]),
        count=int(data["count"]),
        selected=tuple(data["tests"]),
        measuring=tuple(data["measuring"]),
        suite_tests=int(data["suite_tests"]),
        suite_other=int(data["suite_other"]),
        planned_cost_s=tuple(float(c) for c in data["planned_cost_s"]),
        planned_tests=tuple(int(n) for n in data["planned_tests"]),
        basis=str(data["basis"]),
        costed=int(data["costed"]),
        device_key=data.get("device_key"),
        digest=str(data["digest"]),
        dominant=str(data.get("dominant", "")),
        positions=tuple(int(n) for n in data.get("positions", ())),
    )


def recorded_costs(entries: Sequence[BaselineEntry]) -> dict[str, float]:
    """Each test's recorded cost in seconds: the sum over its entries of time_s × samples of
    the last save, or the median of that over the entry's history of saves when it has
    several (the sampling is adaptive: one save of a kernel may stop at 10 samples and the
    next at 30, so one save alone is a noisy guess). Entries without a measured save (a
    reported figure) record none."""
    costs: dict[str, float] = {}
    for entry in entries:
        spent = [save.time_s * save.samples for save in entry.saves if save.samples > 0]
        if entry.source != "measured" or not spent:
            continue
        costs[entry.test_id] = costs.get(entry.test_id, 0.0) + statistics.median(spent)
    return costs


def plan_shard(
    index: int,
    count: int,
    tests: Sequence[tuple[str, bool]],
    costs: Mapping[str, float],
    *,
    device_key: str | None = None,
) -> ShardPlan:
    """Shard `index` of `count` for `tests` ((node id, measures), collection order), the
    measuring ones balanced by `costs` (recorded_costs of the device's file)."""
    if not 1 <= index <= count <= MAX_SHARDS:
        raise ValueError(f"shard {index}/{count}: K must be from 1 to N, N at most {MAX_SHARDS}")
    measuring = [test for test, measures in tests if measures]
    others = [test for test, measures in tests if not measures]
    known = [costs[test] for test in measuring if costs.get(test, 0.0) > 0]
    if not known:
        basis, default = BASIS_COUNT, 1.0
    else:
        basis = BASIS_BASELINE if len(known) == len(measuring) else BASIS_MIXED
        default = statistics.median(known)
    cost = {test: costs[test] if costs.get(test, 0.0) > 0 else default for test in measuring}
    position = {test: n for n, (test, _) in enumerate(tests)}
    loads = [0.0] * count
    tests_in = [0] * count
    shard_of: dict[str, int] = {}
    # Longest first; ties by collection order, so every runner deals the same way.
    for test in sorted(measuring, key=lambda t: (-cost[t], position[t])):
        target = min(range(count), key=lambda s: (loads[s], s))
        loads[target] += cost[test]
        tests_in[target] += 1
        shard_of[test] = target + 1
    for n, test in enumerate(others):
        shard_of[test] = n % count + 1
    selected = tuple(test for test, _ in tests if shard_of[test] == index)
    heaviest = max(measuring, key=lambda t: (cost[t], -position[t]), default="")
    # Named only when it unbalances the plan: a test a little over a share with shards at
    # 0.506 and 0.477 ms (6% apart) is balanced enough, and "no plan can balance" was wrong.
    unbalanced = bool(loads) and max(loads) > min(loads) * (1 + PLAN_BALANCED_SPREAD)
    dominant = (
        heaviest
        if count > 1 and basis != BASIS_COUNT and cost[heaviest] > sum(loads) / count and unbalanced
        else ""
    )
    digest = hashlib.sha256(
        "\n".join(f"{shard_of[test]}\t{test}" for test, _ in tests).encode() + f"\n{count}".encode()
    ).hexdigest()[:16]
    return ShardPlan(
        index=index,
        count=count,
        selected=selected,
        measuring=tuple(test for test in selected if test in cost),
        suite_tests=len(measuring),
        suite_other=len(others),
        planned_cost_s=tuple(loads) if basis != BASIS_COUNT else (0.0,) * count,
        planned_tests=tuple(tests_in),
        basis=basis,
        costed=len(known),
        device_key=device_key,
        digest=digest,
        dominant=dominant,
        positions=tuple(position[test] for test in selected),
    )


# Shards whose planned costs differ by less than this count as balanced (the planner's own
# check, tests/plugin/test_shards.py, holds plans within 20%)
PLAN_BALANCED_SPREAD = 0.20


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"
