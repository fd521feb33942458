"""How the engine measures: `MeasureSettings` and the rules the engine derives from them.

The tunables (launches per event pair, warm-up, rotation limits) and the pure functions that
turn a cache mode and a kernel time into a plan (flush buffer size, rotation copies, launches
per event pair, the words that describe it) live here, apart from the code that runs them
(sampling.py), so each can be read and tested without a device. docs/measurement.md explains
every figure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_gpuperf.engine.results import CACHE_MODES
from pytest_gpuperf.errors import ConfigError

if TYPE_CHECKING:  # the rule needs NumPy, which importing the plugin must not load
    from pytest_gpuperf.engine.sequential import StopTarget
    from pytest_gpuperf.runtime.base import DeviceBuffer

# hot/rotate: launches per event pair so that one pair lasts at least this long; the event
# resolution (~0.5 us) and the gap between back-to-back launches then stay below 1%.
PAIR_TARGET_S = 100e-6
MAX_LAUNCHES_PER_PAIR = 256
WARMUP_BATCH_SAMPLES = 5
WARMUP_TOLERANCE = 0.02  # warm-up ends when two batch medians agree within 2%
MIN_WARMUP_S = 0.01  # and at least this long (clock ramp, first-touch page faults)
MAX_ROTATION_MEMORY_FRACTION = 0.5
FLUSH_ELEMENT_BYTES = 16  # gpuperf_flush and gpuperf_copy_ref move uint4 elements
# Each rotation copy is its own allocation (the Backend interface has no sub-buffer views),
# so a working set far below the caches would need thousands of allocations: refused.
MAX_ROTATION_COPIES = 1024
# An A/B pair loads each side this many times (one module per load: the same code object
# loaded again, nothing recompiled) and spreads its pairs over the loads, so the run measures
# what belongs to a load and not to the code (where it landed, how it meets the instruction
# caches) instead of assuming it: 8 loads give the between-load variance 7 degrees of freedom
# (t = 2.36 at 95%, where 4 loads would give 3.18) for a few milliseconds of module loads.
DEFAULT_PAIR_LOADS = 8
# A decision needs at least this many pairs on every load.
MIN_PAIRS_PER_LOAD = 3
# A callable whose event pairs take no longer than a pair around nothing plus this queued no
# GPU work (on the H100 an empty pair reads ~0.002 us, the smallest kernel ~1 us).
NO_WORK_MARGIN_S = 0.3e-6
PROGRESS_EVERY_S = 10.0  # a sampling measurement says where it is this often (real time)
# The host's real time a budget allows: REAL_TIME_ALLOWANCE times it, and never less than
# REAL_TIME_FLOOR_S beyond it. On a GPU the backend's clock is the host's and the budget alone
# decides. The simulated device's clock is virtual and its host work costs 1-2x the time it
# models on a quiet machine, several times that on a loaded one: the floor keeps a seeded
# simulated run of a short budget what its seed makes it on a busy machine, and the allowance
# still cuts the runaway case (238 s of real time for a 4 s pair: now at most 34 s).
REAL_TIME_ALLOWANCE = 4.0
REAL_TIME_FLOOR_S = 30.0
# A cold or rotate measurement of a kernel shorter than MIN_SAMPLING_BELOW_S on a GPU samples
# for at least STORED_MIN_SAMPLING_S of its budget before its precision may stop it: a stored
# baseline is one process's measurement judged against other processes', and a process's level
# wanders within the process far beyond one sample's error. Longer kernels reach the gate's 1%
# tolerance without it. Measured: docs/benchmarks.md#minimum-sampling-time
STORED_MIN_SAMPLING_S = 0.3
MIN_SAMPLING_BELOW_S = 100e-6
# ... and takes at least this many samples, as does a judged one before its horizon stops it
# (within the budget): a stall of the host can eat the 0.3 s and leave a few samples, and the
# priors were measured with about a thousand. Measured: docs/benchmarks.md#minimum-samples
STORED_MIN_SAMPLES = 256
# A cold kernel on a GPU spreads its samples over this many placements of its buffers (the
# caller's and fresh copies, successive samples taking successive placements) when its
# settings ask for it (spread_placements; the plugin does for a cold kernel a stored baseline
# judges or a save records): at 8 us
# where the buffers landed is most of the level a process keeps. Fewer placements where the
# copies would need more than PLACEMENT_MEMORY_BYTES or PLACEMENT_MEMORY_FRACTION of the
# device's memory. Measured: docs/benchmarks.md#buffer-placements
PLACEMENT_SETS = 8
PLACEMENT_MEMORY_BYTES = 2 << 30
PLACEMENT_MEMORY_FRACTION = 1 / 16
# The most samples a measurement keeps while its minimum sampling time runs (max_samples,
# 2000 by default, would stop a 7.6 us cold kernel after about 0.1 s).
MIN_SAMPLING_MAX_SAMPLES = 50_000


# The hard wall-clock limit of a measurement (engine/deadline.py) is this multiple of its
# sampling budget (--gpuperf-hard-limit), and never less than HARD_LIMIT_MIN_S, which the
# probe, the warm-up and the sampling of a short budget fit in.
HARD_LIMIT_MULTIPLE = 10.0
HARD_LIMIT_MIN_S = 5.0


def hard_limit_s(budget_s: float, multiple: float = HARD_LIMIT_MULTIPLE) -> float:
    """The hard wall-clock limit of a measurement whose sampling budget is `budget_s`."""
    return max(multiple * budget_s, HARD_LIMIT_MIN_S)


def overdue_grace_s(limit_s: float, kernel_timeout_s: float | None) -> float:
    """What a call (or an A/B round's first calls) may take past a hard limit `limit_s`
    before it is ended: the limit once more, or the kernel timeout where that is longer (a
    kernel that never finishes is the watchdog's to name)."""
    return max(limit_s, kernel_timeout_s or 0.0)


def real_limit_s(budget_s: float) -> float:
    """The host's real time a sampling (or warm-up) budget allows."""
    return max(REAL_TIME_ALLOWANCE * budget_s, budget_s + REAL_TIME_FLOOR_S)


@dataclass(frozen=True)
class MeasureSettings:
    """How to measure; the defaults are the documented ones (docs/measurement.md).

    cache: "cold" (clean read-eviction before every timed launch), "hot" (same buffers back
      to back after warm-up) or "rotate" (N copies of every buffer, each launch on the next).
    target_rel_ci: stop once the confidence interval's half-width of the median is within
      this fraction of it (0.005 = +-0.5%).
    budget_s: wall-clock budget of the sampling phase; warm-up has its own bound, warmup_s.
      It bounds the backend's clock (the simulated device's is virtual) and the host's real
      one alike: a simulated A/B of short kernels spent 238 s of real time on 11,087 pairs
      within a 4 s budget of simulated time.
    progress: called with a line every PROGRESS_EVERY_S of real time while a measurement
      samples (a long budget is not silent); None: quiet.
    reallocation_rounds: independent placements of the buffers (the caller's + fresh copies)
      that successive samples alternate between, so no one physical placement decides.
    calibrate: also time the reference copy kernel at the same working set and cache mode,
      interleaved with the kernel, and report efficiency relative to it (cancels drift that
      is common to the whole device; docs/measurement.md shows when that helps).
    graphs: in hot mode, on a backend with graphs (CUDA), time a graph replay of the launches
      of each event pair instead of separate stream launches, which leave a ~1 us gap
      between kernels on an H100 (docs/benchmarks.md); kernels only, never callables.
    min_sampling_s: in cold and rotate mode, a kernel shorter than MIN_SAMPLING_BELOW_S
      samples at least this long (within budget_s, and past max_samples up to
      MIN_SAMPLING_MAX_SAMPLES) before precision may stop it: a process's level wanders, and
      a stored baseline judges one process against others. A/B pairs ignore it (both sides
      share the process). 0: precision stops as soon as it is reached.
    stop: the decision the measurement serves (engine/sequential.py): sampling stops once
      it is decided, or at the target's horizon; None: the rules above alone.
    hard_limit_s: the wall-clock limit no part of the measurement outlives (probe, warm-up,
      sampling; engine/deadline.py); None: hard_limit_s(budget_s). At the limit it raises
      MeasurementTimeout, which says what it saw.
    deadline: a Deadline already running (an A/B round's, which its captures share);
      None: the measurement starts its own from hard_limit_s.
    spread_placements: in cold mode, a kernel without a per-launch setup and with
      reallocation_rounds 1 spreads its samples over placement_sets_for(...) placements of
      its buffers, as many as the memory allows up to PLACEMENT_SETS (and as many as it
      still holds when an allocation fails): a stored baseline judges one process's
      placement against others'. Callables and pairs ignore it.
    """

    cache: str = "cold"
    target_rel_ci: float = 0.005
    confidence: float = 0.95
    min_samples: int = 10
    max_samples: int = 2000
    budget_s: float = 1.0
    warmup_s: float = 0.2
    reallocation_rounds: int = 1
    calibrate: bool = False
    graphs: bool = True
    min_sampling_s: float = 0.0
    stop: StopTarget | None = None
    spread_placements: bool = False
    progress: Callable[[str], None] | None = field(default=None, compare=False, repr=False)
    hard_limit_s: float | None = None
    # an engine.deadline.Deadline (which reads this module's limits: typed loosely here)
    deadline: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.cache not in CACHE_MODES:
            raise ConfigError(
                f"cache={self.cache!r} is not a cache mode; choose one of {', '.join(CACHE_MODES)}"
            )
        checks = [
            (0 < self.target_rel_ci < 1, "target_rel_ci must be in (0, 1), e.g. 0.005"),
            (0 < self.confidence < 1, "confidence must be in (0, 1), e.g. 0.95"),
            (self.min_samples >= 3, "min_samples must be at least 3"),
            (self.max_samples >= self.min_samples, "max_samples must be >= min_samples"),
            (self.budget_s > 0, "budget_s must be positive"),
            (self.warmup_s >= 0, "warmup_s must be >= 0"),
            (self.reallocation_rounds >= 1, "reallocation_rounds must be >= 1"),
            (self.min_sampling_s >= 0, "min_sampling_s must be >= 0"),
            (
                self.hard_limit_s is None or self.hard_limit_s > 0,
                "hard_limit_s must be positive",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(f"MeasureSettings: {message} (got {self})")


def stored_min_sampling_s(backend: str, cache: str, budget_s: float) -> float:
    """The minimum sampling time of a measurement a stored baseline may judge: on a GPU, in
    cold and rotate mode, STORED_MIN_SAMPLING_S within the budget; 0 on the simulated device,
    whose process-to-process spread is its own setting and which no sampling time moves (its
    every sample costs host time)."""
    if backend == "sim" or cache == "hot":
        return 0.0
    return min(STORED_MIN_SAMPLING_S, budget_s)


def placement_sets_for(buffer_bytes: int, memory_bytes: int) -> int:
    """How many placements of `buffer_bytes` of buffers a spread measurement takes: up to
    PLACEMENT_SETS, as many as PLACEMENT_MEMORY_BYTES and PLACEMENT_MEMORY_FRACTION of the
    device's memory hold besides the caller's own."""
    if buffer_bytes <= 0:
        return 1
    room = min(PLACEMENT_MEMORY_BYTES, PLACEMENT_MEMORY_FRACTION * max(memory_bytes, 0))
    return max(1, min(PLACEMENT_SETS, 1 + int(room // buffer_bytes)))


def pair_buffer_sets(
    wanted: int,
    loads: int,
    copies: int,
    buffers: Sequence[DeviceBuffer],
    *,
    has_setup: bool,
    memory_bytes: int,
    hot_cache_bytes: int = 0,
) -> tuple[int, str]:
    """How many buffer sets an A/B pair spreads its loads over, and why fewer than `wanted`
    ("" when not fewer). At most one per load (the loads are the groups the interval's
    between-group variance comes from: a set shared by no load tells it nothing); one when
    the call has a setup (it resets the caller's buffers, not copies) or passes no buffer;
    no more than half the device memory holds (each set holds `copies` copies of every
    buffer, rotate mode's included). In hot mode (`hot_cache_bytes`: the caches' size) a
    working set the caches hold keeps only as many sets as they hold together: the slots go
    round the sets, and a set evicted by the others would make the first launch of its
    slot a cold one."""
    sets = min(wanted, loads)
    if sets <= 1:
        return 1, ""
    if not buffers:
        return 1, "the launch passes no buffer"
    if has_setup:
        return 1, "setup= resets the caller's own buffers, so the pair runs on those only"
    buffer_bytes = sum(b.nbytes for b in buffers)
    if hot_cache_bytes and 0 < buffer_bytes <= hot_cache_bytes:
        held = max(1, hot_cache_bytes // buffer_bytes)
        if held < sets:
            return held, f"hot: the caches hold {held} set{'s' if held != 1 else ''} at once"
    budget_bytes = MAX_ROTATION_MEMORY_FRACTION * memory_bytes
    fits = int((budget_bytes / buffer_bytes + 1) // copies) if buffer_bytes else sets
    if fits < sets:
        fits = max(1, fits)
        return fits, (
            f"{sets} sets of {copies * buffer_bytes / 2**30:.2f} GiB would pass half the "
            f"device memory; {fits} used"
        )
    return sets, ""


def scratch_bytes_for(cache_bytes: int) -> int:
    """Size of the cold-mode eviction buffer: twice all caches, in whole 16-byte elements."""
    return round_up(max(2 * cache_bytes, FLUSH_ELEMENT_BYTES), FLUSH_ELEMENT_BYTES)


def rotation_copies_for(working_set_bytes: int, cache_bytes: int) -> int:
    """N such that N copies of the working set cover at least twice all caches."""
    return max(1, math.ceil(2 * cache_bytes / max(working_set_bytes, 1)))


def launches_per_pair(kernel_time_s: float, cache: str, setup: bool = False) -> int:
    """Launches between one event pair: 1 in cold mode (a flush precedes every launch) and
    with a per-launch setup (it runs between launches, outside the pair), else enough for the
    pair to last PAIR_TARGET_S."""
    if cache == "cold" or setup or kernel_time_s <= 0:
        return 1
    return int(min(MAX_LAUNCHES_PER_PAIR, max(1, math.ceil(PAIR_TARGET_S / kernel_time_s))))


def queue_method_for(
    cache: str,
    launches: int,
    graph: bool = False,
    setup: bool = False,
    graph_batches: bool = False,
    as_it_runs: str = "",
) -> str:
    """The words Measurement.queue_method uses for how the queue was kept ahead (or, for
    work timed as it runs, `as_it_runs` saying why it was not)."""
    reset = " + setup before every timed launch" if setup else ""
    if as_it_runs:
        per_pair = "1 call" if launches == 1 else f"{launches} calls"
        flush = " after a read-flush" if cache == "cold" else ""
        return (
            f"as-it-runs: {per_pair} per event pair{flush}, no spin in front, the host's "
            f"waits included ({as_it_runs})"
        )
    if cache == "cold" and graph_batches:
        return "graph-batch: each batch's read-flushes, events and launches replayed as one graph"
    if cache == "cold":
        return "flush-ahead: spin per batch + read-flush before every timed launch" + reset
    per_pair = "1 launch" if launches == 1 else f"{launches} launches"
    if setup:
        return f"spin-ahead: spin per batch + {per_pair} per event pair{reset}"
    if graph:
        return f"graph-replay: spin per batch + a graph of {per_pair} per event pair"
    return f"spin-ahead: spin per batch + {per_pair} per event pair"


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple
