"""The one conversion of result dataclasses to plain data (dicts, lists, numbers, strings) and
back, used by pytest-xdist (workers send rows to the controller), the JSON report and the
pytest-benchmark export.

Driven by the dataclasses' own type hints, so a field added to `results.Measurement` travels
everywhere without a second place to update; tests/unit/test_plain.py round-trips every field.
Floats that are not finite become None (strict JSON has no NaN); NumPy scalars become Python
numbers.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from functools import cache
from typing import Any, TypeVar

T = TypeVar("T")


def to_plain(value: Any) -> Any:
    """`value` as JSON-compatible data: dataclasses become dicts of their fields."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_plain(v) for v in value]
    item = getattr(value, "item", None)  # NumPy scalars and 0-d arrays
    if callable(item):
        try:
            return to_plain(item())
        except (TypeError, ValueError):
            pass
    return str(value)


def from_plain(cls: type[T], data: Any) -> T:
    """The `cls` instance that `to_plain` turned into `data` (fields it lacks take defaults)."""
    return typing.cast(T, _build(cls, data))


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _build(kind: Any, data: Any) -> Any:
    if data is None:
        return None
    if dataclasses.is_dataclass(kind) and isinstance(kind, type):
        hints = _hints(kind)
        values = {
            f.name: _build(hints[f.name], data[f.name])
            for f in dataclasses.fields(kind)
            if f.init and f.name in data
        }
        return kind(**values)
    origin = typing.get_origin(kind)
    args = typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _build(options[0], data)
        for option in options:  # the first option the data fits
            if _fits(option, data):
                return _build(option, data)
        return data
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_build(args[0], item) for item in data)
        if args:
            return tuple(_build(a, item) for a, item in zip(args, data, strict=True))
        return tuple(data)
    if origin in (list, typing.List):  # noqa: UP006
        return [_build(args[0] if args else Any, item) for item in data]
    if origin in (dict, Mapping) or kind is dict:
        return dict(data)
    if kind is float and isinstance(data, int):
        return float(data)
    return data


def _fits(kind: Any, data: Any) -> bool:
    if dataclasses.is_dataclass(kind):
        return isinstance(data, Mapping)
    origin = typing.get_origin(kind) or kind
    if origin is tuple or origin is list:
        return isinstance(data, (list, tuple))
    if isinstance(origin, type):
        return isinstance(data, origin)
    return True


__all__ = ["from_plain", "to_plain"]
