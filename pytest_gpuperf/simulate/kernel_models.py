"""Models of users' kernels for the simulated device: what a launch computes and moves.

The registry behind `pytest_gpuperf.simulate`, the public module users import in a
conftest.py (its docstring shows how). A model is keyed by the kernel's source file and name;
the simulated device (execute.py) looks it up at every launch. This module imports neither
pytest nor a GPU runtime, so importing `simulate` stays cheap.
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from pytest_gpuperf.errors import ConfigError, GpuPerfError, LaunchError

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing's from Python 3.11

__all__ = [
    "Compute",
    "FlopCount",
    "KernelModel",
    "LaunchShape",
    "ModelOptions",
    "SimulationWarning",
    "TrafficBytes",
    "check_traffic",
    "counted",
    "lookup",
    "missing_model_message",
    "model",
    "models",
    "register",
    "scoped",
    "unregister",
]


class SimulationWarning(UserWarning):
    """Something the simulated device could not simulate (a kernel without a model)."""


@dataclass(frozen=True)
class LaunchShape:
    """How a kernel was launched: what a model needs to know which elements the grid covers."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0

    @property
    def threads_x(self) -> int:
        """Threads along x (gridDim.x * blockDim.x): the range of the usual
        `blockIdx.x * blockDim.x + threadIdx.x` index."""
        return self.grid[0] * self.block[0]

    @property
    def threads(self) -> int:
        """All threads of the launch."""
        return math.prod(self.grid) * math.prod(self.block)


# compute(args, launch): args in signature order, pointers as flat NumPy views of the device
# buffers typed by the signature (float* -> float32), scalars as Python numbers.
Compute = Callable[[list[Any], LaunchShape], None]
TrafficBytes = Callable[[list[Any]], int]
FlopCount = Callable[[list[Any]], int]
# The math types a model may compute in: runtime/compute_peaks.py's, repeated here so that
# importing `simulate` stays cheap (tests/unit/test_sim_models.py checks they agree).
MATH_TYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")


@dataclass(frozen=True, eq=False)
class KernelModel:
    """What the simulated device knows about one kernel of one source file.

    compute: writes the kernel's outputs in place (None: outputs are not computed).
    traffic_bytes: the bytes a launch really moves, read + written, from its arguments
      (None: every buffer argument once, whole).
    efficiency: the fraction of peak bandwidth it streams at (None: the source directive,
      else the default 0.80).
    reads_outputs: the kernel reads what it writes (x *= s, out += ...): such launches are
      always recomputed, never skipped because nothing changed.
    flops, math: the operations a launch does, from its arguments, and the type it does them
      in (None: the FLOPs the test declares, if any): a launch lasts at least its FLOPs at
      the type's dense peak x `compute_efficiency` (None: the default, 0.70).
    """

    source: Path
    kernel: str
    compute: Compute | None = None
    traffic_bytes: TrafficBytes | None = None
    efficiency: float | None = None
    reads_outputs: bool = False
    flops: FlopCount | None = None
    math: str | None = None
    compute_efficiency: float | None = None

    @property
    def key(self) -> tuple[Path, str]:
        return (self.source, self.kernel)

    def describe(self) -> str:
        what = getattr(self.compute, "__qualname__", None) or "no outputs computed"
        return f"{self.kernel} in {self.source} ({what})"


_MODELS: dict[tuple[Path, str], KernelModel] = {}


def _caller_directory(depth: int) -> Path:
    """The directory of the module `depth` frames up (a conftest.py), else the working one."""
    frame = sys._getframe(depth + 1)
    filename = frame.f_globals.get("__file__")
    return Path(filename).resolve().parent if filename else Path.cwd()


def _resolve(source: str | Path, relative_to: str | Path | None, depth: int) -> Path:
    path = Path(source)
    if not path.is_absolute():
        base = Path(relative_to) if relative_to is not None else _caller_directory(depth + 1)
        path = base / path
    path = path.resolve()
    if not path.is_file():
        raise ConfigError(
            f"simulated kernel model: source file {str(source)!r} not found (looked for {path}); "
            "a relative path is resolved against the directory of the module that registers "
            "the model (or relative_to=); pass an absolute path otherwise"
        )
    return path


def register(
    source: str | Path,
    kernel: str,
    compute: Compute | None = None,
    *,
    traffic_bytes: TrafficBytes | None = None,
    efficiency: float | None = None,
    reads_outputs: bool = False,
    relative_to: str | Path | None = None,
    flops: FlopCount | None = None,
    math: str | None = None,
    compute_efficiency: float | None = None,
) -> KernelModel:
    """Register (or replace) the model of `kernel` in `source`; returns it.

    `source` is the kernel's .hip file: absolute, or relative to `relative_to`, by default
    the directory of the module calling register() (your conftest.py). Registering again for
    the same file and kernel replaces the model (a conftest imported twice is harmless).
    """
    if not kernel or not isinstance(kernel, str):
        raise ConfigError(f"simulated kernel model: kernel must be a kernel name, got {kernel!r}")
    if compute is not None and not callable(compute):
        raise ConfigError(f"simulated kernel model for {kernel!r}: compute must be callable")
    if traffic_bytes is not None and not callable(traffic_bytes):
        raise ConfigError(
            f"simulated kernel model for {kernel!r}: traffic_bytes must be a function of the "
            "arguments, e.g. traffic_bytes=lambda args: args[0].nbytes + args[1].nbytes"
        )
    if efficiency is not None and not 0 < float(efficiency) <= 1:
        raise ConfigError(
            f"simulated kernel model for {kernel!r}: efficiency={efficiency!r} must be a "
            "fraction of peak bandwidth in (0, 1]"
        )
    _check_work(kernel, flops, math, compute_efficiency)
    entry = KernelModel(
        source=_resolve(source, relative_to, 1),
        kernel=kernel,
        compute=compute,
        traffic_bytes=traffic_bytes,
        efficiency=None if efficiency is None else float(efficiency),
        reads_outputs=bool(reads_outputs),
        flops=flops,
        math=math,
        compute_efficiency=None if compute_efficiency is None else float(compute_efficiency),
    )
    _MODELS[entry.key] = entry
    return entry


class ModelOptions(TypedDict, total=False):
    """The keywords of a model that `register` and its decorator form `model` both take."""

    traffic_bytes: TrafficBytes | None
    efficiency: float | None
    reads_outputs: bool
    flops: FlopCount | None
    math: str | None
    compute_efficiency: float | None


def model(
    source: str | Path,
    kernel: str,
    *,
    relative_to: str | Path | None = None,
    **options: Unpack[ModelOptions],
) -> Callable[[Compute], Compute]:
    """Decorator form of `register`, with its keywords: the decorated function
    `(args, launch) -> None` is the model's compute; it is returned unchanged."""
    base = Path(relative_to) if relative_to is not None else _caller_directory(1)

    def decorate(compute: Compute) -> Compute:
        register(source, kernel, compute, relative_to=base, **options)
        return compute

    return decorate


def _check_work(kernel: str, flops: Any, math: Any, compute_efficiency: Any) -> None:
    """A model's compute part: flops a function of the arguments, with the math type it runs
    in; compute_efficiency a fraction of that type's peak."""
    where = f"simulated kernel model for {kernel!r}"
    if flops is not None and not callable(flops):
        raise ConfigError(
            f"{where}: flops must be a function of the arguments, e.g. "
            "flops=lambda args: 2 * args[3] * args[4] * args[5]"
        )
    if (flops is None) != (math is None):
        raise ConfigError(f"{where}: flops= and math= go together (the FLOPs and their type)")
    if math is not None and math not in MATH_TYPES:
        raise ConfigError(
            f"{where}: unknown math type {math!r}; valid types: {', '.join(MATH_TYPES)}"
        )
    if compute_efficiency is not None and not (
        isinstance(compute_efficiency, (int, float)) and 0 < float(compute_efficiency) <= 1
    ):
        raise ConfigError(
            f"{where}: compute_efficiency={compute_efficiency!r} must be a fraction of the "
            "math type's peak FLOP/s in (0, 1]"
        )


def unregister(source: str | Path, kernel: str, *, relative_to: str | Path | None = None) -> bool:
    """Remove the model of `kernel` in `source` (resolved as `register` does); False when
    there was none."""
    path = Path(source)
    if not path.is_absolute():
        base = Path(relative_to) if relative_to is not None else _caller_directory(1)
        path = base / path
    return _MODELS.pop((path.resolve(), kernel), None) is not None


def lookup(source: str | Path, kernel: str, *, resolved: bool = False) -> KernelModel | None:
    """The model registered for `kernel` in the file `source` (made absolute), or None.

    `resolved=True` says `source` is already an absolute, resolved Path: the simulated
    device looks models up at every launch and skips the file system."""
    path = source if resolved and isinstance(source, Path) else Path(source).resolve()
    return _MODELS.get((path, kernel))


def models() -> tuple[KernelModel, ...]:
    """Every registered model, in registration order."""
    return tuple(_MODELS.values())


@contextlib.contextmanager
def scoped() -> Iterator[None]:
    """Models registered, replaced or removed inside the block are undone on exit (tests)."""
    saved = dict(_MODELS)
    try:
        yield
    finally:
        _MODELS.clear()
        _MODELS.update(saved)


def missing_model_message(name: str, source: Path | None, traffic_declared: bool) -> str:
    """The warning for a kernel launched without a model that computes its outputs."""
    where = str(source) if source is not None else "a source string (no file)"
    timing = (
        "its time comes from the bytes its model declares"
        if traffic_declared
        else "its time assumes it reads or writes every buffer argument once, whole"
    )
    if source is None:
        how = "compile it from a file and register a model for that file"
    else:
        how = (
            f"register a model in a conftest.py: `@simulate.model({str(source)!r}, {name!r})` "
            "on a function (args, launch) that writes the outputs with NumPy "
            "(from pytest_gpuperf import simulate)"
        )
    return (
        f"simulated device: kernel {name!r} of {where} has no model that computes its outputs, "
        f"so they are NOT computed (they keep what the buffers held) and {timing}; {how}. "
        'See "Models of your kernels" in pytest-gpuperf\'s docs/simulated-device.md.'
    )


# What a model's count functions give, as their errors word it
_COUNTS = {"flops": "an operation count", "traffic_bytes": "a byte count"}


def counted(entry: KernelModel, part: Literal["flops", "traffic_bytes"], views: list[Any]) -> int:
    """What the model's `part` (a function of the arguments) counts for one launch, given its
    argument `views`: a failure of the function is one LaunchError naming the model, a result
    that is not a whole count >= 0 one ConfigError."""
    function = getattr(entry, part)
    assert function is not None
    try:
        value = function(views)
    except GpuPerfError:
        raise
    except Exception as failure:
        raise LaunchError(
            f"{part} of the simulated model {entry.describe()} raised "
            f"{type(failure).__name__}: {failure}"
        ) from failure
    return _checked(value, entry, part)


def check_traffic(value: Any, entry: KernelModel) -> int:
    """A traffic_bytes result as a byte count; ConfigError naming the model otherwise."""
    return _checked(value, entry, "traffic_bytes")


def _checked(value: Any, entry: KernelModel, part: str) -> int:
    try:
        count = int(value)
    except (TypeError, ValueError):
        count = -1
    if isinstance(value, bool) or count < 0 or count != value:
        raise ConfigError(
            f"simulated kernel model {entry.describe()}: {part} returned {value!r}, not "
            f"{_COUNTS[part]} >= 0"
        )
    return count
