"""A callable's pair over several captures a side (engine/measure.py's measure_callable_pair):
one setup and one callable per load, and the Timed launch that calls the callable of its
load. Apart so that measure.py keeps to its pairs and the callable's bookkeeping reads alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pytest_gpuperf.errors import ConfigError


def per_load(
    setup: Callable[[], None] | Sequence[Callable[[], None] | None] | None, loads: int
) -> list[Callable[[], None] | None]:
    """One setup (or None) per load: a sequence as given, a single one for every load."""
    if setup is None or callable(setup):
        return [setup] * loads
    given = list(setup)
    if len(given) != loads:
        raise ConfigError(f"a callable pair needs one setup per load, got {len(given)}")
    return given


def setup_of(setups: Sequence[Callable[[], None] | None]) -> Callable[[], None] | None:
    """The Timed setup of load 0 (the engine's first, untimed call), or a no-op that marks
    the work as having setups where only other loads have one."""
    if all(s is None for s in setups):
        return None
    first = setups[0]
    return first if first is not None else nothing


def setups_of(
    setups: Sequence[Callable[[], None] | None],
) -> list[Callable[[], None]] | None:
    """Per-placement setups for Timed (None: one setup, or none, for every load)."""
    if all(s is None for s in setups) or len(setups) == 1:
        return None
    return [s if s is not None else nothing for s in setups]


def nothing() -> None:
    return None


def called(fns: Sequence[Callable[[], Any]]) -> Callable[[tuple], None]:
    """A Timed launch that calls the callable of its load (placement (load,)): the arguments
    are the callable's own."""

    def launch(args: tuple) -> None:
        fns[args[0]]()

    return launch
