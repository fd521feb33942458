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
from collections.abc import Callable, Mapping
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
    return typing.cast(T, _builder(typing.cast(Any, cls))(data))


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


Builder = Callable[[Any], Any]


@cache
def _builder(kind: Any) -> Builder:
    """The function that builds a `kind` from plain data, made once per type: publishing
    1,000 tests x 100 runs reads 100,000 rows, and walking each row's type hints anew (what
    this did before) was most of that time."""
    if dataclasses.is_dataclass(kind) and isinstance(kind, type):
        hints = _hints(kind)
        fields = [(f.name, hints[f.name]) for f in dataclasses.fields(kind) if f.init]

        def build_dataclass(data: Any) -> Any:
            if data is None:
                return None
            return kind(
                **{name: _builder(hint)(data[name]) for name, hint in fields if name in data}
            )

        return build_dataclass
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _builder(options[0])

        def build_union(data: Any) -> Any:
            for option in options:  # the first option the data fits
                if data is not None and _fits(option, data):
                    return _builder(option)(data)
            return data

        return build_union
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = _builder(args[0])
            return lambda data: None if data is None else tuple(item(x) for x in data)
        if args:
            items = [_builder(a) for a in args]
            return lambda data: (
                None if data is None else tuple(b(x) for b, x in zip(items, data, strict=True))
            )
        return lambda data: None if data is None else tuple(data)
    if origin in (list, typing.List):  # noqa: UP006
        item = _builder(args[0] if args else Any)
        return lambda data: None if data is None else [item(x) for x in data]
    if origin in (dict, Mapping) or kind is dict:
        return lambda data: None if data is None else dict(data)
    if kind is float:
        return lambda data: float(data) if isinstance(data, int) else data
    return _same


def _same(data: Any) -> Any:
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
