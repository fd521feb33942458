"""The library front door: open a device and measure a kernel or a callable, no pytest needed.

```python
import numpy as np
import pytest_gpuperf as gp

with gp.open_device() as device:            # hip, then cuda; backend="sim" for the model
    kernel = device.kernel("kernels/vector_add.hip", "vector_add")
    a = np.random.rand(1 << 24).astype(np.float32)
    da, db, dc = device.to_device(a), device.to_device(a), device.empty(a.size)
    m = device.measure(kernel, grid=a.size // 256, block=256, args=(da, db, dc, a.size),
                       bytes=3 * a.nbytes, cache="cold")
    print(f"{m.efficiency:.1%} of {device.spec.peak_bps / 1e12:.2f} TB/s")
```

Everything the pytest plugin measures goes through the same engine (measure.py); this class
only keeps the device, its spec and the buffers it allocated together.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from pytest_gpuperf.engine.launch import Launch
from pytest_gpuperf.engine.measure import (
    MeasureSettings,
    measure_callable,
    measure_launch,
)
from pytest_gpuperf.engine.results import Measurement, PairedComparison
from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.runtime import open_backend
from pytest_gpuperf.runtime.base import Backend, DeviceBuffer, Kernel
from pytest_gpuperf.runtime.devices import DeviceSpec, match_device
from pytest_gpuperf.runtime.info import ReadsBackend
from pytest_gpuperf.session.buffers import poisoned_buffer, shaped


class Device(ReadsBackend):
    """One device, the datasheet spec efficiencies are computed against, and its buffers."""

    backend: Backend

    def __init__(self, backend: Backend, spec: DeviceSpec, warning: str = "") -> None:
        self.backend = backend
        self.spec = spec
        self.warning = warning  # set when the spec was derived rather than known
        self._owned: list[DeviceBuffer] = []
        self._modules: dict[tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]], Any] = {}

    def kernel(
        self,
        path: str | Path,
        name: str,
        options: Sequence[str] = (),
        defines: Mapping[str, str | int] | None = None,
    ) -> Kernel:
        """Kernel `name` from a .hip source file (compiled once per file, options, defines)."""
        source = Path(path)
        pairs = tuple(sorted((k, str(v)) for k, v in (defines or {}).items()))
        key = (str(source.resolve()), tuple(options), pairs)
        if key not in self._modules:
            module = self.backend.compile(source, options=tuple(options), defines=dict(pairs))
            module.source_path, module.options, module.defines = source.resolve(), key[1], pairs
            self._modules[key] = module
        return self._modules[key].kernel(name)

    def to_device(self, array: Any) -> DeviceBuffer:
        buffer = self.backend.to_device(np.ascontiguousarray(array))
        self._owned.append(buffer)
        return buffer

    def empty(self, shape: int | Sequence[int], dtype: Any = np.float32) -> DeviceBuffer:
        """An uninitialised-looking buffer: filled with 0xFF bytes (NaN for floats)."""
        buffer = poisoned_buffer(self.backend, shape, dtype, "empty")
        self._owned.append(buffer)
        return buffer

    def from_device(
        self, buffer: DeviceBuffer, dtype: Any = np.float32, shape: Any = None
    ) -> np.ndarray:
        """The buffer's contents as a host array of `dtype`, `shape` (default: all of it), as
        gpu_bench.from_device reads them."""
        self.backend.synchronize()
        return shaped(buffer.download(dtype), shape, buffer, "from_device")

    def measure(
        self,
        kernel: Kernel,
        *,
        grid: int | Sequence[int],
        block: int | Sequence[int],
        args: Sequence[Any],
        bytes: int,
        cache: str = "cold",
        budget_s: float = 1.0,
        name: str | None = None,
        shared_bytes: int = 0,
        setup: Callable[[], Any] | None = None,
        settings: MeasureSettings | None = None,
    ) -> Measurement:
        """Measure `kernel` (see measure.measure_kernel); `bytes` is what it must move."""
        return measure_launch(
            self.backend,
            kernel,
            Launch.of(grid, block, args, shared_bytes=shared_bytes, setup=setup),
            bytes_moved=_count(bytes),
            device=self.spec,
            settings=settings or MeasureSettings(cache=cache, budget_s=budget_s),
            name=name,
        )

    def measure_callable(
        self,
        fn: Callable[[], Any],
        *,
        bytes: int,
        cache: str = "cold",
        budget_s: float = 1.0,
        name: str | None = None,
        settings: MeasureSettings | None = None,
    ) -> Measurement:
        """Measure what `fn()` launches on the default stream (PyTorch, Triton, CuPy)."""
        return measure_callable(
            self.backend,
            fn,
            bytes_moved=_count(bytes),
            device=self.spec,
            settings=settings or MeasureSettings(cache=cache, budget_s=budget_s),
            name=name,
        )

    def compare(
        self,
        head: Kernel,
        base: Kernel,
        *,
        grid: int | Sequence[int],
        block: int | Sequence[int],
        args: Sequence[Any],
        bytes: int,
        cache: str = "cold",
        budget_s: float = 1.0,
        name: str | None = None,
        threshold: float | None = None,
        code_spread: float | None = None,
        loads: int | None = None,
        confidence: float = 0.95,
        buffer_sets: int | None = None,
        budgets: float | None = None,
        max_pairs: int | None = None,
    ) -> PairedComparison:
        """Two builds of one kernel measured interleaved on the same buffers (an A/B pair),
        sampled by the pairing policy the `gpu_bench` fixture uses (gate/pairing.py): for
        `budgets` times `budget_s` (default PAIR_BUDGETS, as one kernel's budget_s in
        `measure`) and at most `max_pairs` pairs (default PAIR_MAX_SAMPLES). Each side is
        loaded `loads` times (default engine.policy.DEFAULT_PAIR_LOADS) so the interval at
        `confidence` carries the drift between loads; with `threshold`, sampling stops once
        the gate's A/B state is decided (with fewer than 3 loads, for different code, at the
        larger of `threshold` and what `code_spread`, default the backend's, explains;
        gate.ab.check_comparison decides the same way). Load j runs on buffer set j %
        `buffer_sets` (None: one set per load: fresh copies of the buffers, so the interval
        also carries where they landed; 1: the caller's buffers only)."""
        from pytest_gpuperf.gate.pairing import PairPolicy, measure_launch_ab

        defaults = PairPolicy()
        policy = PairPolicy(
            threshold=threshold,
            code_spread=code_spread,
            loads=defaults.loads if loads is None else loads,
            buffer_sets=buffer_sets,
            budgets=defaults.budgets if budgets is None else budgets,
            max_samples=defaults.max_samples if max_pairs is None else max_pairs,
        )
        return measure_launch_ab(
            self.backend,
            head,
            base,
            Launch.of(grid, block, args),
            policy=policy,
            settings=MeasureSettings(cache=cache, budget_s=budget_s),
            confidence=confidence,
            bytes_moved=_count(bytes),
            device=self.spec,
            name=name,
        )

    def close(self) -> None:
        """Free the buffers allocated here and release the device."""
        from pytest_gpuperf.engine.measure import release

        for buffer in self._owned:
            if not buffer.freed:
                buffer.free()
        self._owned.clear()
        release(self.backend)
        self.backend.close()

    def __enter__(self) -> Device:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def open_device(
    backend: str = "auto", index: int = 0, *, device: str | None = None, **options: Any
) -> Device:
    """Open device `index` on `backend` ("auto": hip, then cuda; "sim" for the simulated
    device, whose model options go in `options`). `device` forces a device key (its
    datasheet peak and caches), as --gpuperf-device does."""
    if backend == "sim" and device is not None:
        options.setdefault("device", device)
    opened = open_backend(backend, index, **options)
    try:
        match = match_device(opened.info, key=device)
    except Exception:
        opened.close()
        raise
    return Device(opened, match.spec, match.warning or "")


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) <= 0:
        raise ConfigError(f"bytes must be a positive whole number of bytes, got {value!r}")
    return int(value)


__all__ = ["Device", "open_device"]
