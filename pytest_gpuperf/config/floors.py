"""The floors a test's markers set: `min_bw` (bandwidth efficiency) and the roofline's
`min_flops` (compute efficiency) and `min_roofline` (the fraction of the roof that binds).

The three marks take the same arguments, one fraction and optionally name=, device= and
cache= to limit it to one measurement, device key or cache mode; stacked marks of one kind
give the most specific rule (ties: the closest mark). Each is parsed into a `FloorRule` here;
`settings.py` keeps them in the test's `TestSettings`. No pytest import here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_gpuperf.config.parsing import parse_cache, parse_device_key, parse_floor
from pytest_gpuperf.errors import ConfigError

MIN_BW, MIN_FLOPS, MIN_ROOFLINE = "min_bw", "min_flops", "min_roofline"
FLOOR_MARKS = (MIN_BW, MIN_FLOPS, MIN_ROOFLINE)
FLOOR_KEYWORDS = ("name", "device", "cache")
# What each mark's fraction is of, for its messages.
FRACTION_OF = {
    MIN_BW: "the peak bandwidth",
    MIN_FLOPS: "the device's dense peak FLOP/s for the declared math type",
    MIN_ROOFLINE: "the roof that binds at the kernel's arithmetic intensity",
}


@dataclass(frozen=True)
class MarkerArgs:
    """A marker's arguments, detached from pytest's Mark."""

    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class FloorRule:
    """One floor: `value` applies to the measurements it names (None: any name, device key or
    cache mode); `origin` says where it was written, for messages."""

    value: float
    name: str | None = None
    device: str | None = None
    cache: str | None = None
    origin: str = MIN_BW

    def matches(self, name: str, device: str, cache: str) -> bool:
        return all(
            wanted is None or wanted == actual
            for wanted, actual in ((self.name, name), (self.device, device), (self.cache, cache))
        )

    @property
    def specificity(self) -> int:
        return sum(part is not None for part in (self.name, self.device, self.cache))


def most_specific(
    rules: tuple[FloorRule, ...], name: str, device: str, cache: str
) -> FloorRule | None:
    """The rule of one measurement: the most specific matching one, and among equally
    specific ones the closest marker (rules are listed closest first)."""
    matching = [rule for rule in rules if rule.matches(name, device, cache)]
    if not matching:
        return None
    best = max(rule.specificity for rule in matching)
    return next(rule for rule in matching if rule.specificity == best)


def floor_rule(test_id: str, marker: MarkerArgs, mark: str = MIN_BW) -> FloorRule:
    """One `mark` (min_bw, min_flops or min_roofline) of a test as a rule; ConfigError naming
    the test for bad arguments."""
    where = f"{test_id}: @pytest.mark.{mark}"
    kwargs = dict(marker.kwargs or {})
    unknown = sorted(set(kwargs) - set(FLOOR_KEYWORDS))
    if unknown or len(marker.args) != 1:
        raise ConfigError(
            f"{where} takes one positional fraction and optionally name=, device=, cache= "
            f"(e.g. {mark}(0.8) or {mark}(0.6, name='tiled')); got {call_text(marker)}"
        )
    raw = marker.args[0]
    value = parse_floor(raw, f"{where}({raw!r})", of=FRACTION_OF[mark], example=f"{mark}(0.8)")
    rule = {}
    for key in FLOOR_KEYWORDS:
        if key in kwargs:
            given = kwargs[key]
            if not isinstance(given, str) or not given.strip():
                raise ConfigError(f"{where}({key}=...): must be a non-empty string, got {given!r}")
            rule[key] = parse_cache(given, f"{where}(cache=...)") if key == "cache" else given
    if "device" in rule:
        rule["device"] = parse_device_key(rule["device"], f"{where}(device=...)")
    origin = mark + ("(" + ", ".join(f"{k}={v!r}" for k, v in rule.items()) + ")" if rule else "")
    return FloorRule(value=value, origin=origin, **rule)


def call_text(marker: MarkerArgs) -> str:
    parts = [repr(a) for a in marker.args]
    parts += [f"{k}={v!r}" for k, v in (marker.kwargs or {}).items()]
    return f"({', '.join(parts)})"


__all__ = [
    "FLOOR_MARKS",
    "MIN_BW",
    "MIN_FLOPS",
    "MIN_ROOFLINE",
    "FloorRule",
    "MarkerArgs",
    "floor_rule",
    "most_specific",
]
