"""Parsing one option or marker value: its type and range, and an error naming where it was given.

Each `parse_*` takes the raw value (a command-line string, an ini string, a marker's Python
value) and `where` (the flag, ini key or marker call) and returns the typed value or raises a
`ConfigError` that names `where` and the values that would do. No pytest import here.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Collection
from typing import Any

from pytest_gpuperf.config import ranges
from pytest_gpuperf.config.options import (
    BACKEND_NAMES,
    DEFAULT_BACKENDS,
    MAX_SIM_GPUS,
    REQUIRE_CHOICES,
)
from pytest_gpuperf.config.ranges import MAX_GPU_INDEX, MAX_PEAK_GBPS, MAX_SECONDS, Range
from pytest_gpuperf.engine.results import CACHE_MODES
from pytest_gpuperf.errors import ConfigError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def parse_bool(raw: Any, where: str) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(f"{where}: expected true or false, got {raw!r}")


def parse_backends(raw: Any, where: str) -> tuple[str, ...]:
    names = [part.strip().lower() for part in str(raw).split(",") if part.strip()]
    if not names:
        raise ConfigError(f"{where}: name at least one backend ({', '.join(BACKEND_NAMES)})")
    expanded: list[str] = []
    for name in names:
        if name == "auto":
            expanded += DEFAULT_BACKENDS
        elif name in BACKEND_NAMES:
            expanded.append(name)
        else:
            raise ConfigError(
                f"{where}: unknown backend {name!r}; choose from {', '.join(BACKEND_NAMES)} "
                "(comma-separated, in order of preference, e.g. 'hip,cuda,sim')"
            )
    return tuple(dict.fromkeys(expanded))


def parse_require(raw: Any, where: str) -> str:
    kind = str(raw).strip().lower()
    if kind not in REQUIRE_CHOICES:
        raise ConfigError(
            f"{where}: expected one of {', '.join(REQUIRE_CHOICES)} (gpu: any real GPU; "
            "static: the static gate's clang), "
            f"got {raw!r}"
        )
    return kind


def parse_ref(raw: Any, where: str) -> str:
    text = str(raw).strip()
    if not text or text.startswith("-") or any(c.isspace() for c in text):
        raise ConfigError(
            f"{where}: expected a git revision (e.g. origin/main, HEAD~1, a commit id), got {raw!r}"
        )
    return text


# -- gpuperf-static ---------------------------------------------------------------------------
_ARCH_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(?::[A-Za-z0-9_]+[+-])*$")


def parse_static_archs(raw: Any, where: str) -> tuple[str, ...]:
    """'gfx942' or 'gfx942,gfx90a' (target ids with features, gfx942:xnack-, allowed).
    Whether clang knows them is checked when the session starts."""
    names = [part.strip() for part in str(raw).split(",") if part.strip()]
    if not names:
        raise ConfigError(f"{where}: name at least one AMD GPU architecture, e.g. gfx942")
    for name in names:
        if not _ARCH_NAME.match(name):
            raise ConfigError(
                f"{where}: {name!r} is not an architecture name; give clang's processor names, "
                "comma-separated (e.g. gfx942 for MI300X, gfx90a for MI250X)"
            )
    return tuple(dict.fromkeys(names))


def parse_clang(raw: Any, where: str) -> str:
    text = os.path.expanduser(str(raw).strip())
    if not text:
        raise ConfigError(f"{where}: expected a clang path or command name, got an empty value")
    return text


# -- end gpuperf-static -------------------------------------------------------------------------


def parse_device_key(raw: Any, where: str) -> str:
    from pytest_gpuperf.runtime.devices import KNOWN_DEVICES

    key = str(raw).strip().lower()
    if key not in KNOWN_DEVICES:
        raise ConfigError(
            f"{where}: unknown device key {raw!r}; known keys: {', '.join(KNOWN_DEVICES)}"
        )
    return key


def _count(raw: Any, low: int, high: int) -> int | None:
    """A whole number written in decimal digits inside [low, high], else None. The digits
    are counted before they are converted: Python refuses to convert more than 4,300 (a
    ValueError, a traceback before)."""
    text = str(raw).strip()
    if not (text.isascii() and text.isdigit()) or len(text.lstrip("0")) > len(str(high)):
        return None
    value = int(text)
    return value if low <= value <= high else None


def count_parser(low: int, high: int, expected: str) -> Callable[[Any, str], int]:
    """The parser of a whole number in [low, high] (_count); its error says `expected`."""

    def parse(raw: Any, where: str) -> int:
        count = _count(raw, low, high)
        if count is None:
            raise ConfigError(f"{where}: expected {expected}, got {raw!r}")
        return count

    return parse


def ranged_parser(what: str, allowed: Range) -> Callable[[Any, str], float]:
    """The parser of a number inside `allowed` (in_range), `what` naming it in the error."""

    def parse(raw: Any, where: str) -> float:
        return in_range(raw, where, what, allowed)

    return parse


parse_hard_limit = ranged_parser(
    "the hard limit (a multiple of the budget, e.g. 10)", ranges.HARD_LIMIT
)
parse_gpu_index = count_parser(
    0, MAX_GPU_INDEX, f"a device index from 0 to {MAX_GPU_INDEX} (0, 1, ...)"
)
parse_gpu_margin = ranged_parser("the degraded-GPU margin (e.g. 0.03 for 3%)", ranges.GPU_MARGIN)


def parse_sim_gpus(raw: Any, where: str) -> tuple[float, ...]:
    """'4' (four equal GPUs) or '1,1,0.95' (relative speeds, one per GPU)."""
    text = str(raw).strip()
    hint = (
        f"expected a number of simulated GPUs (1 to {MAX_SIM_GPUS}) or their relative speeds, "
        f"comma-separated (e.g. 1,1,0.95), got {raw!r}"
    )
    if text.isascii() and text.isdigit():
        count = _count(text, 1, MAX_SIM_GPUS)
        if count is None:
            raise ConfigError(f"{where}: {hint}")
        return (1.0,) * count
    parts = [part.strip() for part in text.split(",")]
    if len(parts) < 2 or len(parts) > MAX_SIM_GPUS:
        raise ConfigError(f"{where}: {hint}")
    speeds = []
    for part in parts:
        try:
            speed = float(part)
        except ValueError:
            raise ConfigError(f"{where}: {hint}") from None
        if not (math.isfinite(speed) and 0 < speed <= 10):
            raise ConfigError(f"{where}: speed {part!r} must be in (0, 10] (1 is healthy); {hint}")
        speeds.append(speed)
    return tuple(speeds)


def parse_shard(raw: Any, where: str) -> tuple[int, int]:
    """'2/3' -> (2, 3): shard K of N, 1 <= K <= N <= MAX_SHARDS (record/shard_reader.py says
    why; N = 100000000 took 71 s and 2.4 GB before a MemoryError)."""
    from pytest_gpuperf.record.shard_reader import MAX_SHARDS

    text = str(raw)
    shown = repr(text if len(text) <= 40 else text[:37] + "...")
    hint = f"expected K/N with 1 <= K <= N <= {MAX_SHARDS} (shard K of N, e.g. 2/3), got {shown}"
    # ASCII digits, a few of them: \d takes any script's digits, and int() of thousands of
    # digits is slow or refused
    match = (
        re.fullmatch(r"\s*([0-9]{1,12})\s*/\s*([0-9]{1,12})\s*", text) if len(text) < 64 else None
    )
    if match is None or not 1 <= int(match.group(1)) <= int(match.group(2)):
        raise ConfigError(f"{where}: {hint}")
    index, count = int(match.group(1)), int(match.group(2))
    if count > MAX_SHARDS:
        raise ConfigError(
            f"{where}: at most {MAX_SHARDS} shards (one CI runner each; GitHub Actions' matrix "
            f"makes at most {MAX_SHARDS} jobs), got {shown}"
        )
    return index, count


parse_history = count_parser(1, 100, "a number of saves from 1 to 100")


def in_range(raw: Any, where: str, what: str, allowed: Range) -> float:
    """A number inside `allowed` (ranges.py), or a ConfigError naming the range."""
    if isinstance(raw, bool):
        raise ConfigError(f"{where}: {what} must be a number in {allowed.text}, got {raw!r}")
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ConfigError(
            f"{where}: {what} must be a number in {allowed.text}, got {raw!r}"
        ) from None
    if value not in allowed:  # nan and inf included
        raise ConfigError(f"{where}: {what} must be in {allowed.text}, got {raw!r}")
    return value


def parse_number(raw: Any, where: str, what: str) -> float:
    if isinstance(raw, bool):
        raise ConfigError(f"{where}: {what} must be a number, got {raw!r}")
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {what} must be a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise ConfigError(f"{where}: {what} must be a finite number, got {raw!r}")
    return value


parse_tolerance = ranged_parser(
    "the tolerance (e.g. 0.01 for 1%; 0 for the noise alone)", ranges.TOLERANCE
)
parse_threshold = ranged_parser(
    "the compare threshold (e.g. 0.005 for 0.5%)", ranges.COMPARE_THRESHOLD
)
parse_loads = count_parser(1, 64, "a number of module loads from 1 to 64")
parse_buffer_sets = count_parser(
    1, 64, "a number of buffer sets from 1 to 64 (1: the test's own buffers only)"
)
parse_code_spread = ranged_parser(
    "the code-object spread (e.g. 0.015 for +-1.5%)", ranges.CODE_SPREAD
)
parse_suite_alarm = ranged_parser(
    "the run's false-alarm budget (e.g. 0.01 for 1% of runs)", ranges.SUITE_ALARM
)


def seconds_parser(what: str) -> Callable[[Any, str], float]:
    def parse(raw: Any, where: str) -> float:
        return _seconds(raw, where, what)

    return parse


parse_budget = seconds_parser("the budget")


def _seconds(raw: Any, where: str, what: str) -> float:
    """A time in (0, MAX_SECONDS]: beyond a day, a budget or a timeout means "never" and
    overflowed where it was used (--gpuperf-budget=1e307: an OverflowError in every test)."""
    value = parse_number(raw, where, f"{what} in seconds")
    if not 0 < value <= MAX_SECONDS:
        raise ConfigError(
            f"{where}: {what} must be a number of seconds in (0, {MAX_SECONDS:g}] (a day at "
            f"most), got {raw!r}"
        )
    return value


def parse_peak_gbps(raw: Any, where: str) -> float:
    """A peak bandwidth in GB/s, in (0, MAX_PEAK_GBPS]."""
    value = parse_number(raw, where, "peak_gbps")
    if not 0 < value <= MAX_PEAK_GBPS:
        raise ConfigError(
            f"{where}: must be GB/s in (0, {MAX_PEAK_GBPS:g}] (100 TB/s at most), got {raw!r}"
        )
    return value


def parse_cache(raw: Any, where: str) -> str:
    mode = str(raw).strip().lower() if isinstance(raw, str) else raw
    if mode not in CACHE_MODES:
        raise ConfigError(f"{where}: {cache_mode_problem(raw)}")
    return str(mode)


def cache_mode_problem(raw: Any) -> str:
    """The one sentence every unknown cache mode gets, wherever it was given."""
    return (
        f"unknown cache mode {raw!r}; valid modes: cold (clean read-eviction before every "
        "timed launch), hot (same buffers back to back), rotate (rotating buffer copies)"
    )


def parse_floor(
    raw: Any,
    where: str,
    *,
    of: str = "the peak bandwidth",
    example: str = "min_bw(0.8)",
) -> float:
    """A floor: a fraction in (0, 1] of `of` (the peak bandwidth; for the roofline's marks
    the peak FLOP/s or the binding roof)."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise ConfigError(
            f"{where}: the floor must be a number, the fraction of {of} the kernel must reach "
            f"(0 < x <= 1), e.g. {example}"
        )
    value = float(raw)
    if not (math.isfinite(value) and 0 < value <= 1):
        hint = f" (a percentage? did you mean {value / 100:g}?)" if 2 <= value <= 100 else ""
        raise ConfigError(f"{where}: the floor is a fraction of {of} and must be in (0, 1]{hint}")
    return value


OUR_MARKERS = ("min_bw", "min_flops", "min_roofline", "gpuperf")
_TYPO_DISTANCE = 2  # `min_bww`, `minbw`, `gpu_perf`, `gpuprf`: a typo, not another marker


def misspelt_marker(name: str, registered: Collection[str]) -> str:
    """The marker of ours that `name` misspells ("" when it is none): a marker pytest does
    not know (not `registered`) within edit distance 2 of one of ours (`min_bw`, `min_flops`,
    `min_roofline`, `gpuperf`). A misspelt
    `@pytest.mark.min_bww(0.9)` set no floor and passed with pytest's generic warning."""
    if name in registered or name in OUR_MARKERS:
        return ""
    for ours in OUR_MARKERS:
        if edit_distance(name.lower(), ours) <= _TYPO_DISTANCE:
            return ours
    return ""


def edit_distance(first: str, second: str) -> int:
    """Levenshtein distance: insertions, deletions and substitutions of one character."""
    previous = list(range(len(second) + 1))
    for row, a in enumerate(first, start=1):
        current = [row]
        for column, b in enumerate(second, start=1):
            current.append(
                min(previous[column] + 1, current[column - 1] + 1, previous[column - 1] + (a != b))
            )
        previous = current
    return previous[-1]
