"""The one funnel of a driver call's result, for both vendor APIs.

cuda-python's driver API and hip-python return the same shape from every call: a tuple of the
status and the call's values. Both backends end it the same way, here: the values when the
call succeeded, else one error naming the call and the status; a sticky fault (an illegal
address, a failed launch) also says that the device is unusable for the rest of the process,
is recorded by the backend (`on_fault`) and raises DeviceFault, so every later test fails
with the first fault's facts rather than a driver's traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_gpuperf.errors import DeviceFault, GpuPerfError, LaunchError


@dataclass(frozen=True)
class StatusCodes:
    """How one vendor API's status codes read: which one is success, the words a message
    quotes for one, which leave the device unusable, and what a message then adds."""

    succeeded: Callable[[Any], bool]
    words: Callable[[Any], str]
    sticky: Callable[[Any], bool]
    sticky_advice: str


def call_values(
    result: tuple[Any, ...],
    what: str,
    codes: StatusCodes,
    error: type[GpuPerfError] = LaunchError,
    on_fault: Callable[[str], None] | None = None,
) -> Any:
    """The values of a driver call's `result` tuple (None, one value, or a tuple of them), or
    `error` saying '`what` failed: <status>'; a sticky status calls `on_fault` with the
    message and raises DeviceFault."""
    status, *values = result
    if not codes.succeeded(status):
        message = f"{what} failed: {codes.words(status)}"
        if codes.sticky(status):
            message += codes.sticky_advice
            if on_fault is not None:
                on_fault(message)
            raise DeviceFault(message)
        raise error(message)
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)
