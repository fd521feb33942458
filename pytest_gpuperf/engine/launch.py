"""`Launch`: how a kernel is launched for a measurement, one value from the test's call down to
the engine's timed launches.

The grid and block (as three dimensions), the arguments in signature order (device buffers
and numbers), the bytes of dynamic shared memory and the `setup` that runs before every timed
launch, untimed. The fixture (`gpu_bench(kernel, grid=..., ...)`), the library
(`Device.measure`) and the engine's keyword functions (`measure_kernel`, `measure_pair`) take
these as keywords, as users write them; each makes one Launch of them, and that is what the
pairs, the confirmation round and the engine's samples launch (cuda.core's `LaunchConfig`
holds the same launch shape).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from pytest_gpuperf.errors import ArgumentError
from pytest_gpuperf.runtime.base import Backend, DeviceBuffer, Dim3, Kernel, as_dim3

# The keywords a Launch is made of, as the keyword functions take them.
FIELDS = ("grid", "block", "args", "shared_bytes", "setup")


@dataclass(frozen=True)
class Launch:
    """One kernel launch's shape and inputs: what a measurement launches again and again."""

    grid: Dim3
    block: Dim3
    args: tuple[Any, ...]
    shared_bytes: int = 0
    setup: Callable[[], Any] | None = None

    @classmethod
    def of(
        cls,
        grid: int | Sequence[int],
        block: int | Sequence[int],
        args: Iterable[Any],
        *,
        shared_bytes: int = 0,
        setup: Callable[[], Any] | None = None,
    ) -> Launch:
        """The Launch of the keywords a user writes: a grid or block as an int or 1-3 ints,
        any iterable of arguments; ArgumentError (one line) for a grid, block or shared size
        no launch could take."""
        if (
            isinstance(shared_bytes, bool)
            or not isinstance(shared_bytes, (int, np.integer))
            or shared_bytes < 0
        ):
            raise ArgumentError(
                f"shared_bytes must be a whole number of bytes >= 0, got {shared_bytes!r}"
            )
        return cls(
            as_dim3(grid, "grid"), as_dim3(block, "block"), tuple(args), int(shared_bytes), setup
        )

    @classmethod
    def split(cls, keywords: Mapping[str, Any]) -> tuple[Launch, dict[str, Any]]:
        """(the Launch of `keywords`' launch fields, the other keywords): for a function whose
        callers pass the launch as keywords among others (gate/pairing.py's `measure_ab`)."""
        launch = cls.of(
            keywords["grid"],
            keywords["block"],
            keywords["args"],
            shared_bytes=keywords.get("shared_bytes", 0),
            setup=keywords.get("setup"),
        )
        return launch, {key: value for key, value in keywords.items() if key not in FIELDS}

    @property
    def buffers(self) -> list[DeviceBuffer]:
        """The buffer arguments, each once (a buffer passed twice is copied once)."""
        seen: dict[int, DeviceBuffer] = {}
        for value in self.args:
            if isinstance(value, DeviceBuffer):
                seen.setdefault(id(value), value)
        return list(seen.values())

    def on(self, args: Iterable[Any]) -> Launch:
        """The same launch with other arguments (fresh copies of the buffers)."""
        return replace(self, args=tuple(args))

    def enqueue(
        self,
        backend: Backend,
        kernel: Kernel,
        args: Sequence[Any] | None = None,
        stream: Any = None,
    ) -> None:
        """Launch `kernel` asynchronously with these arguments (or `args`), without `setup`."""
        backend.launch(
            kernel,
            self.grid,
            self.block,
            self.args if args is None else tuple(args),
            shared_bytes=self.shared_bytes,
            stream=stream,
        )

    def shape(self) -> dict[str, Any]:
        """The launch's shape as a Measurement records it."""
        return {"grid": self.grid, "block": self.block, "shared_bytes": self.shared_bytes}


__all__ = ["FIELDS", "Launch"]
