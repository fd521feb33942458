"""The simulated device: a documented, seeded model of a GPU, for tests and demos without one.

It implements the whole Backend interface. Data really moves (buffers are host arrays behind
fake device addresses; kernel semantics come from `pytest_gpuperf.catalog.emulate`), while
time is modelled: a virtual host clock (every API call costs host time) and an in-order device
queue on which each launch takes

    (launch_overhead_s + miss_bytes / (peak_bps * efficiency)
                       + hit_bytes / (peak_bps * efficiency * cache_speedup))
    * run_drift(kernel) * jitter * slowdown

with an LRU model of L2 + last-level cache over whole buffers and a seeded noise model (a
per-run drift common to the device plus a per-kernel part, and per-launch jitter).
docs/simulated-device.md explains every parameter and formula. No compiler runs: compile()
only checks the source's structure and reads its kernel signatures. Everything it reports
says "simulated".
"""

from __future__ import annotations

import bisect
import collections
import importlib
import math
import os
import re
import secrets
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pytest_gpuperf.devices import AMD, DeviceSpec, get_device
from pytest_gpuperf.errors import (
    Attempt,
    CompileError,
    ConfigError,
    DeviceUnavailable,
    GpuPerfError,
    LaunchError,
    OutOfDeviceMemory,
)
from pytest_gpuperf.results import ClockReport
from pytest_gpuperf.runtime.base import (
    Backend,
    DeviceBuffer,
    DeviceInfo,
    Kernel,
    Module,
    as_dim3,
)
from pytest_gpuperf.runtime.compile import KERNELS_DIR
from pytest_gpuperf.runtime.signature import KernelParam, parse_signatures

MODEL_VERSION = "1"
SEED_ENV = "GPUPERF_SIM_SEED"

# Efficiency of a kernel at streaming its bytes, as a fraction of the datasheet peak.
DEFAULT_EFFICIENCY = 0.80
REFERENCE_EFFICIENCY = {
    # The seed's rocprof "Bandwidth Efficiency" for 32M fp32 vector add on MI300X
    # (seeds/mi300x-memory-bound-kernels-blog.txt): 71.85% plain, 82.70% L2 bypass.
    "mi300x": {"vector_add": 0.7185, "vector_add_bypass": 0.8270},
    # DESIGN.md, measured on the project's H100: scalar 0.806, float4 0.887 (32M fp32).
    "h100-sxm": {"vector_add": 0.806, "vector_add_vec4": 0.887},
}

HOST_EVENT_S = 0.5e-6  # host time to record an event
HOST_SYNC_S = 1e-6  # host time to return from a synchronisation
HOST_LINK_BPS = 50e9  # host <-> device copies (PCIe Gen5 x16 as achieved, not its 64 GB/s)
THROTTLE_CLOCK_FRACTION = 0.75  # engine clock of a throttled run, as a fraction of its peak
THROTTLE_SLOWDOWN = 1.05  # memory-bound kernels lose little when the engine clock drops
ALIGNMENT = 4096
BASE_ADDRESS = 0x7F00_0000_0000
FLUSH_ELEMENT_BYTES = 16  # gpuperf_flush and gpuperf_copy_ref move uint4 elements

# Element type of pointer parameters NumPy has no scalar for: views are flat arrays of lanes.
_VECTOR_ELEMENTS = {
    "float2": np.float32,
    "float4": np.float32,
    "double2": np.float64,
    "int2": np.int32,
    "int4": np.int32,
    "uint2": np.uint32,
    "uint4": np.uint32,
    "uchar4": np.uint8,
    "half2": np.float16,
    "__half2": np.float16,
}


@dataclass(frozen=True)
class SimSettings:
    """Every parameter of the model; docs/simulated-device.md explains each one."""

    device: DeviceSpec
    seed: int
    run_spread: float = 0.07
    common_fraction: float = 0.75
    jitter: float = 0.004
    launch_overhead_s: float = 2e-6
    host_launch_s: float = 4e-6
    cache_speedup: float = 3.0
    throttle_probability: float = 0.0
    kernel_slowdown: Mapping[str, float] = field(default_factory=dict)
    kernel_efficiency: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        checks = {
            "run_spread": self.run_spread >= 0,
            "common_fraction": 0 <= self.common_fraction <= 1,
            "jitter": self.jitter >= 0,
            "launch_overhead_s": self.launch_overhead_s >= 0,
            "host_launch_s": self.host_launch_s >= 0,
            "cache_speedup": self.cache_speedup >= 1,
            "throttle_probability": 0 <= self.throttle_probability <= 1,
        }
        for option, valid in checks.items():
            if not valid:
                raise ConfigError(
                    f"simulated device option {option}={getattr(self, option)!r} is out of "
                    "range; docs/simulated-device.md gives each option's meaning and range"
                )
        for kernel, factor in self.kernel_slowdown.items():
            if not (math.isfinite(factor) and factor > 0):
                raise ConfigError(
                    f"simulated device option kernel_slowdown[{kernel!r}]={factor!r} must be "
                    "a time factor > 0 (1.10 is 10% slower)"
                )
        for kernel, efficiency in self.kernel_efficiency.items():
            if not 0 < efficiency <= 1:
                raise ConfigError(
                    f"simulated device option kernel_efficiency[{kernel!r}]={efficiency!r} "
                    "must be a fraction in (0, 1]"
                )

    @property
    def run_sigma(self) -> float:
        """Log-sigma of the run drift: "+-7%" is read as a 95% (about 2 sigma) range."""
        return self.run_spread / 2


def resolve_seed(seed: int | str | None) -> int:
    """The seed given, else $GPUPERF_SIM_SEED, else a fresh random one (exposed so a run
    can be reproduced)."""
    if seed is None:
        seed = os.environ.get(SEED_ENV) or None
        where = f"${SEED_ENV}"
    else:
        where = "seed"
    if seed is None:
        return secrets.randbits(32)
    try:
        value = int(seed)
    except (TypeError, ValueError):
        raise ConfigError(f"{where} must be a non-negative integer, got {seed!r}") from None
    if value < 0:
        raise ConfigError(f"{where} must be a non-negative integer, got {seed!r}")
    return value


def open(  # the name every backend module exposes (runtime/__init__.py)
    device_index: int = 0,
    *,
    device: str | DeviceSpec = "mi300x",
    seed: int | str | None = None,
    run_spread: float = 0.07,
    common_fraction: float = 0.75,
    jitter: float = 0.004,
    launch_overhead_s: float = 2e-6,
    host_launch_s: float = 4e-6,
    cache_speedup: float = 3.0,
    throttle_probability: float = 0.0,
    kernel_slowdown: Mapping[str, float] | None = None,
    kernel_efficiency: Mapping[str, float] | None = None,
) -> SimBackend:
    """A simulated `device` (a key of devices.KNOWN_DEVICES, or a DeviceSpec).

    `seed=None` takes $GPUPERF_SIM_SEED, else a fresh random seed; `backend.seed` tells
    which. The other options are the model's parameters (docs/simulated-device.md).
    """
    if int(device_index) < 0:
        raise DeviceUnavailable(
            [Attempt("sim", f"device index {device_index} is negative")],
            hint="simulated devices are numbered 0, 1, ...",
        )
    spec = device if isinstance(device, DeviceSpec) else get_device(str(device))
    settings = SimSettings(
        device=spec,
        seed=resolve_seed(seed),
        run_spread=float(run_spread),
        common_fraction=float(common_fraction),
        jitter=float(jitter),
        launch_overhead_s=float(launch_overhead_s),
        host_launch_s=float(host_launch_s),
        cache_speedup=float(cache_speedup),
        throttle_probability=float(throttle_probability),
        kernel_slowdown={str(k): float(v) for k, v in (kernel_slowdown or {}).items()},
        kernel_efficiency={str(k): float(v) for k, v in (kernel_efficiency or {}).items()},
    )
    return SimBackend(int(device_index), settings)


# -- the model's parts ------------------------------------------------------------------------


class _Noise:
    """Run drift (log-normal, common + per-kernel parts) and per-launch jitter, all seeded.

    log drift(kernel) = c + k(kernel), c ~ N(0, f s^2) once per run (clocks, placement:
    identical for every kernel), k ~ N(0, (1 - f) s^2) seeded by seed + kernel name, where
    s = run_spread / 2 and f = common_fraction. Jitter: exp(jitter * N(0, 1)) per launch.
    """

    def __init__(self, settings: SimSettings, device_index: int) -> None:
        self.settings = settings
        self.device_index = device_index
        sigma, fraction = settings.run_sigma, settings.common_fraction
        run_rng = np.random.default_rng([settings.seed, 0, device_index])
        self.common_log = sigma * math.sqrt(fraction) * float(run_rng.standard_normal())
        self.throttled = bool(run_rng.random() < settings.throttle_probability)
        self._jitter_rng = np.random.default_rng([settings.seed, 2, device_index])
        self._kernel_log: dict[str, float] = {}

    def kernel_log(self, kernel: str) -> float:
        if kernel not in self._kernel_log:
            name_key = zlib.crc32(kernel.encode())
            rng = np.random.default_rng([self.settings.seed, 1, self.device_index, name_key])
            sigma = self.settings.run_sigma * math.sqrt(1 - self.settings.common_fraction)
            self._kernel_log[kernel] = sigma * float(rng.standard_normal())
        return self._kernel_log[kernel]

    def drift(self, kernel: str) -> float:
        return math.exp(self.common_log + self.kernel_log(kernel))

    def launch_jitter(self) -> float:
        return math.exp(self.settings.jitter * float(self._jitter_rng.standard_normal()))


class _LruCache:
    """All caches as one LRU over whole buffers (bytes touched per buffer).

    A buffer at least as large as the caches streams through them and leaves nothing a later
    launch could hit: under LRU, re-reading it sequentially misses everywhere.
    """

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self.resident: collections.OrderedDict[int, int] = collections.OrderedDict()
        self.resident_bytes = 0

    def access(self, ptr: int, nbytes: int) -> int:
        """Touch `nbytes` of buffer `ptr`; returns how many of them were cache hits."""
        held = self.resident.pop(ptr, 0)
        self.resident_bytes -= held
        if nbytes >= self.capacity_bytes:
            self.clear()
            return 0
        self.resident[ptr] = max(held, nbytes)
        self.resident_bytes += self.resident[ptr]
        while self.resident_bytes > self.capacity_bytes:
            _, evicted = self.resident.popitem(last=False)
            self.resident_bytes -= evicted
        return min(held, nbytes)

    def evict(self, ptr: int) -> None:
        self.resident_bytes -= self.resident.pop(ptr, 0)

    def clear(self) -> None:
        self.resident.clear()
        self.resident_bytes = 0


@dataclass(eq=False)
class SimStream:
    """An in-order queue; `free_s` is when its last command ends on the device clock."""

    owner: SimBackend = field(repr=False)
    index: int
    free_s: float = 0.0


@dataclass(eq=False)
class SimEvent:
    """A timestamp on the simulated device clock, set when the queue reaches the event."""

    owner: SimBackend = field(repr=False)
    time_s: float | None = None


@dataclass(frozen=True)
class SimKernel:
    """The handle of a simulated kernel: its name and the source's efficiency directive."""

    name: str
    efficiency: float | None = None


# -- the backend ------------------------------------------------------------------------------


class SimBackend(Backend):
    """One simulated device; see the module docstring and docs/simulated-device.md."""

    name = "sim"
    simulated = True
    supports_graphs = False

    def __init__(self, device_index: int, settings: SimSettings) -> None:
        super().__init__(device_index)
        self.settings = settings
        self.spec = settings.device
        self._noise = _Noise(settings, device_index)
        self._cache = _LruCache(self.spec.cache_bytes)
        self._memory: dict[int, np.ndarray] = {}
        self._reserved: dict[int, int] = {}
        self._pristine: set[int] = set()  # never written since allocation: still all zeros
        self._next_address = BASE_ADDRESS
        self._used_bytes = 0
        self._host_s = 0.0
        self._device_free_s = 0.0
        self._default_stream = SimStream(self, 0)
        self._streams = 1
        self._unemulated: set[str] = set()
        self.launch_counts: collections.Counter[str] = collections.Counter()
        self._closed = False
        self._info = DeviceInfo(
            backend="sim",
            index=device_index,
            name=f"Simulated {self.spec.name}",
            arch=self.spec.arch,
            compute_units=self.spec.compute_units,
            l2_bytes=self.spec.l2_bytes,
            memory_bytes=self.spec.memory_bytes,
            warp_size=self.spec.warp_size,
            max_threads_per_block=1024,
            shared_bytes_per_block=65536 if self.spec.vendor == AMD else 49152,
            clock_khz=int(self.spec.clock_mhz * 1000) if self.spec.clock_mhz else None,
            memory_clock_khz=(
                int(self.spec.memory_clock_mhz * 1000) if self.spec.memory_clock_mhz else None
            ),
            memory_bus_bits=self.spec.memory_bus_bits,
            runtime_version=f"pytest-gpuperf simulated device model {MODEL_VERSION}",
            driver_version="simulated",
            simulated=True,
        )

    # -- what the model exposes -------------------------------------------------------------
    @property
    def info(self) -> DeviceInfo:
        return self._info

    @property
    def seed(self) -> int:
        """The seed of this run: pass it back (seed= or $GPUPERF_SIM_SEED) to reproduce it."""
        return self.settings.seed

    @property
    def throttled(self) -> bool:
        return self._noise.throttled

    @property
    def unemulated_kernels(self) -> frozenset[str]:
        """Kernels launched whose semantics the catalog could not run: outputs untouched."""
        return frozenset(self._unemulated)

    def run_drift(self, kernel: str) -> float:
        """This run's time factor for `kernel` (common x per-kernel part; 1.0 = nominal)."""
        return self._noise.drift(kernel)

    def efficiency_of(self, kernel: Kernel) -> float:
        """The modelled efficiency: option > source directive > reference table > 0.80."""
        handle: SimKernel = kernel.handle
        if kernel.name in self.settings.kernel_efficiency:
            return self.settings.kernel_efficiency[kernel.name]
        if handle.efficiency is not None:
            return handle.efficiency
        return REFERENCE_EFFICIENCY.get(self.spec.key, {}).get(kernel.name, DEFAULT_EFFICIENCY)

    def host_clock(self) -> float:
        """The virtual host clock in seconds; the measurement engine uses it as wall time."""
        return self._host_s

    def read_clocks(self) -> ClockReport:
        peak_mhz = self.spec.clock_mhz
        fraction = THROTTLE_CLOCK_FRACTION if self.throttled else 1.0
        return ClockReport(
            sm_clock_mhz=peak_mhz * fraction if peak_mhz else None,
            sm_clock_max_mhz=peak_mhz,
            memory_clock_mhz=self.spec.memory_clock_mhz,
            throttled=self.throttled,
            throttle_reasons=(
                (f"simulated throttle (throttle_probability={self.settings.throttle_probability})",)
                if self.throttled
                else ()
            ),
            source="sim",
        )

    # -- memory -----------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> DeviceBuffer:
        self._check_open()
        nbytes = int(nbytes)
        if nbytes < 0:
            raise GpuPerfError(f"cannot allocate a negative size ({nbytes} bytes)")
        reserved = -(-max(nbytes, 1) // ALIGNMENT) * ALIGNMENT
        free_bytes = self.spec.memory_bytes - self._used_bytes
        if reserved > free_bytes:
            raise OutOfDeviceMemory(
                f"cannot allocate {nbytes} bytes on the {self._info.name}: {free_bytes} bytes "
                f"free of {self.spec.memory_bytes}; free buffers you no longer need or use a "
                "smaller problem size"
            )
        try:
            memory = np.zeros(nbytes, dtype=np.uint8)  # calloc: pages appear when written
        except MemoryError:
            raise OutOfDeviceMemory(
                f"cannot allocate {nbytes} bytes on the {self._info.name}: the host memory "
                "that backs simulated buffers ran out; use a smaller problem size"
            ) from None
        ptr = self._next_address
        self._next_address += reserved  # addresses are never reused: buffers never overlap
        self._memory[ptr] = memory
        self._reserved[ptr] = reserved
        self._pristine.add(ptr)
        self._used_bytes += reserved
        return DeviceBuffer(self, ptr, nbytes)

    def free(self, buffer: DeviceBuffer) -> None:
        self._own(buffer, "free")
        self._memory.pop(buffer.ptr)
        self._used_bytes -= self._reserved.pop(buffer.ptr)
        self._pristine.discard(buffer.ptr)
        self._cache.evict(buffer.ptr)
        buffer.freed = True

    def upload(self, buffer: DeviceBuffer, array: np.ndarray) -> None:
        memory = self._own(buffer, "upload to")
        raw = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
        if raw.size > buffer.nbytes:
            raise GpuPerfError(
                f"cannot upload {raw.size} bytes into a {buffer.nbytes}-byte device buffer; "
                "allocate a larger buffer"
            )
        self._host_transfer(raw.size)
        memory[: raw.size] = raw
        self._pristine.discard(buffer.ptr)

    def download(self, out: np.ndarray, buffer: DeviceBuffer) -> None:
        memory = self._own(buffer, "download from")
        if not (out.flags.c_contiguous and out.flags.writeable):
            raise GpuPerfError("download needs a contiguous, writable host array")
        raw = out.view(np.uint8).reshape(-1)
        if raw.size > buffer.nbytes:
            raise GpuPerfError(
                f"cannot download {raw.size} bytes from a {buffer.nbytes}-byte device buffer"
            )
        self._host_transfer(raw.size)
        raw[:] = memory[: raw.size]

    def copy(self, dst: DeviceBuffer, src: DeviceBuffer, nbytes: int | None = None) -> None:
        dst_memory, src_memory = self._own(dst, "copy to"), self._own(src, "copy from")
        count = src.nbytes if nbytes is None else int(nbytes)
        if not 0 <= count <= min(src.nbytes, dst.nbytes):
            raise GpuPerfError(
                f"cannot copy {count} bytes from a {src.nbytes}-byte buffer to a "
                f"{dst.nbytes}-byte buffer"
            )
        dst_memory[:count] = src_memory[:count]
        if src.ptr not in self._pristine:  # zeros copied onto zeros leave zeros
            self._pristine.discard(dst.ptr)
        self._run("device_copy", [(src, count), (dst, count)], DEFAULT_EFFICIENCY, None)

    def fill(self, buffer: DeviceBuffer, byte: int) -> None:
        memory = self._own(buffer, "fill")
        if not 0 <= int(byte) <= 255:
            raise GpuPerfError(f"fill takes a byte value 0-255, got {byte!r}")
        if not (byte == 0 and buffer.ptr in self._pristine):  # zeros already: skip the memset
            memory.fill(int(byte))
            self._pristine.discard(buffer.ptr)
        self._run("device_fill", [(buffer, buffer.nbytes)], DEFAULT_EFFICIENCY, None)

    def _own(self, buffer: DeviceBuffer, verb: str) -> np.ndarray:
        self._check_open()
        if not isinstance(buffer, DeviceBuffer) or buffer.backend is not self:
            raise GpuPerfError(
                f"cannot {verb} a buffer that this simulated device did not allocate"
            )
        if buffer.freed or buffer.ptr not in self._memory:
            raise GpuPerfError(f"cannot {verb} device buffer {buffer.ptr:#x}: it was already freed")
        return self._memory[buffer.ptr]

    def _host_transfer(self, nbytes: int) -> None:
        """A synchronous host<->device copy: waits for the device, then crosses the link."""
        self._host_s = max(self._host_s, self._device_free_s) + HOST_SYNC_S
        self._host_s += nbytes / HOST_LINK_BPS

    # -- code -------------------------------------------------------------------------------
    def compile(
        self,
        source: str | Path,
        *,
        options: Sequence[str] = (),
        defines: dict[str, str | int] | None = None,
        name: str | None = None,
    ) -> Module:
        """Check the source's structure and read its kernels; no compiler runs.

        `options` and `defines` are accepted and ignored (there is no preprocessor).
        """
        self._check_open()
        text, source_name, directory = _read_source(source, name)
        signatures = check_source(text, source_name, directory)
        directives = _directives(text, source_name)
        return Module(
            backend=self,
            handle=directives,
            source_name=source_name,
            signatures=signatures,
            binary=text.encode(),
            log="simulated device: no compiler ran (structure and signatures checked only)",
        )

    def _get_function(self, module: Module, name: str) -> SimKernel:
        return SimKernel(name, module.handle.get(name))

    # -- execution --------------------------------------------------------------------------
    def launch(
        self,
        kernel: Kernel,
        grid: int | Sequence[int],
        block: int | Sequence[int],
        args: Sequence[Any],
        *,
        shared_bytes: int = 0,
        stream: Any = None,
    ) -> None:
        self._check_launch(kernel, grid, block, args)
        self._check_config(kernel.name, grid, block, shared_bytes)
        queue = self._stream(stream)
        if kernel.name == "gpuperf_spin" and len(args) == 1:
            # A busy-wait on the wall clock: its length is its argument, free of drift.
            self._enqueue(queue, self.settings.launch_overhead_s + int(args[0]) * 1e-9)
            self.launch_counts[kernel.name] += 1
            return
        accesses = self._execute(kernel, args)
        self._run(kernel.name, accesses, self.efficiency_of(kernel), queue)

    def _check_config(
        self, kernel: str, grid: int | Sequence[int], block: int | Sequence[int], shared: int
    ) -> None:
        grid3, block3 = as_dim3(grid, "grid"), as_dim3(block, "block")
        threads = block3[0] * block3[1] * block3[2]
        if threads > self._info.max_threads_per_block:
            raise LaunchError(
                f"kernel {kernel!r}: a block of {threads} threads exceeds the device's "
                f"{self._info.max_threads_per_block}"
            )
        if grid3[0] >= 2**31 or grid3[1] >= 2**16 or grid3[2] >= 2**16:
            raise LaunchError(f"kernel {kernel!r}: grid {grid3} exceeds the device's limits")
        if not 0 <= int(shared) <= self._info.shared_bytes_per_block:
            raise LaunchError(
                f"kernel {kernel!r}: {shared} bytes of dynamic shared memory exceed the "
                f"device's {self._info.shared_bytes_per_block} per block"
            )

    def _execute(self, kernel: Kernel, args: Sequence[Any]) -> list[tuple[DeviceBuffer, int]]:
        """Run the kernel's semantics on the buffers; return the bytes it touches per buffer."""
        name = kernel.name
        if name == "gpuperf_flush" and len(args) == 3:
            count = self._internal_bytes(name, args[0], args[1])
            return [(args[0], count)]  # reads only: `sink` is written under a condition never met
        if name == "gpuperf_copy_ref" and len(args) == 3:
            count = self._internal_bytes(name, args[0], args[2])
            self._internal_bytes(name, args[1], args[2])
            self._memory[args[1].ptr][:count] = self._memory[args[0].ptr][:count]
            self._pristine.discard(args[1].ptr)
            return [(args[0], count), (args[1], count)]
        buffers = [value for value in args if isinstance(value, DeviceBuffer)]
        self._pristine.difference_update(b.ptr for b in buffers)
        if not self._emulate(kernel, args):
            self._unemulated.add(name)
        return [(buffer, buffer.nbytes) for buffer in buffers]

    def _internal_bytes(self, name: str, source: DeviceBuffer, count: Any) -> int:
        nbytes = int(count) * FLUSH_ELEMENT_BYTES
        if nbytes > source.nbytes:
            raise LaunchError(
                f"{name}: {int(count)} elements of {FLUSH_ELEMENT_BYTES} bytes overrun the "
                f"{source.nbytes}-byte buffer (a memory access fault on a GPU)"
            )
        return nbytes

    def _emulate(self, kernel: Kernel, args: Sequence[Any]) -> bool:
        """Run the catalog's NumPy version of the kernel in place; False when it has none."""
        try:
            catalog = importlib.import_module("pytest_gpuperf.catalog")
        except ImportError:
            return False
        emulate = getattr(catalog, "emulate", None)
        if emulate is None:
            return False
        views = [
            _as_view(self._memory, param, value)
            for param, value in zip(kernel.params, args, strict=True)
        ]
        try:
            return bool(emulate(kernel.name, views))
        except (IndexError, ValueError) as failure:
            raise LaunchError(
                f"kernel {kernel.name!r} failed on the simulated device: {failure} (on a GPU, "
                "an out-of-bounds access); check the size arguments against the buffers"
            ) from failure

    def _run(
        self,
        what: str,
        accesses: Sequence[tuple[DeviceBuffer, int]],
        efficiency: float,
        queue: SimStream | None,
    ) -> None:
        self._enqueue(
            queue or self._default_stream, self._device_time_s(what, accesses, efficiency)
        )
        self.launch_counts[what] += 1

    def _device_time_s(
        self, what: str, accesses: Sequence[tuple[DeviceBuffer, int]], efficiency: float
    ) -> float:
        """The timing model (docs/simulated-device.md, "Kernel time")."""
        hit_bytes = miss_bytes = 0
        for buffer, nbytes in accesses:
            hit = self._cache.access(buffer.ptr, nbytes)
            hit_bytes += hit
            miss_bytes += nbytes - hit
        memory_bps = self.spec.peak_bps * efficiency
        transfer_s = miss_bytes / memory_bps + hit_bytes / (
            memory_bps * self.settings.cache_speedup
        )
        factor = self._noise.drift(what) * self._noise.launch_jitter()
        factor *= self.settings.kernel_slowdown.get(what, 1.0)
        if self.throttled:
            factor *= THROTTLE_SLOWDOWN
        return (self.settings.launch_overhead_s + transfer_s) * factor

    def _enqueue(self, queue: SimStream, device_s: float) -> None:
        """Submit after the host's launch cost; the device runs one command at a time."""
        self._host_s += self.settings.host_launch_s
        start_s = max(self._host_s, queue.free_s, self._device_free_s)
        queue.free_s = self._device_free_s = start_s + device_s

    def _stream(self, stream: Any) -> SimStream:
        if stream is None:
            return self._default_stream
        if not isinstance(stream, SimStream) or stream.owner is not self:
            raise GpuPerfError(f"{stream!r} is not a stream of this simulated device")
        return stream

    def create_stream(self) -> SimStream:
        self._check_open()
        self._streams += 1
        return SimStream(self, self._streams - 1)

    def create_event(self) -> SimEvent:
        self._check_open()
        return SimEvent(self)

    def record_event(self, event: Any, stream: Any = None) -> None:
        self._check_open()
        if not isinstance(event, SimEvent) or event.owner is not self:
            raise GpuPerfError(f"{event!r} is not an event of this simulated device")
        self._host_s += HOST_EVENT_S
        event.time_s = max(self._host_s, self._stream(stream).free_s)

    def elapsed_s(self, start: Any, end: Any) -> float:
        for event in (start, end):
            if not isinstance(event, SimEvent) or event.owner is not self:
                raise GpuPerfError(f"{event!r} is not an event of this simulated device")
            if event.time_s is None:
                raise GpuPerfError("elapsed time asked of an event never recorded; record it first")
        self._host_s = max(self._host_s, end.time_s) + HOST_SYNC_S
        return end.time_s - start.time_s

    def synchronize(self, stream: Any = None) -> None:
        self._check_open()
        until_s = self._device_free_s if stream is None else self._stream(stream).free_s
        self._host_s = max(self._host_s, until_s) + HOST_SYNC_S

    def close(self) -> None:
        self._memory.clear()
        self._reserved.clear()
        self._cache.clear()
        self._used_bytes = 0
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise GpuPerfError(f"the {self._info.name} was closed; open a new one")


def _as_view(memory: dict[int, np.ndarray], param: KernelParam, value: Any) -> Any:
    """A pointer argument as a flat NumPy view typed by the signature; a scalar as a number."""
    if not param.is_pointer:
        return np.asarray(value).astype(param.dtype).item()
    raw = memory[value.ptr]
    dtype = param.dtype or np.dtype(_VECTOR_ELEMENTS.get(param.base_type, np.uint8))
    return raw[: raw.size - raw.size % dtype.itemsize].view(dtype)


# -- compile: structure checks ----------------------------------------------------------------

_LEXEME_RE = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)
_KERNEL_TOKEN_RE = re.compile(r"\b(?:__global__|GPUPERF_KERNEL)\b")
_BOUNDS = r"(?:__launch_bounds__\s*\([^()]*\)\s*)?"
_KERNEL_DECL_RE = re.compile(rf"\s*{_BOUNDS}void\s+{_BOUNDS}[A-Za-z_]\w*\s*\(")
_FUNCTION_RE = re.compile(r"\b(?P<name>[A-Za-z_]\w*)\s*\([^()]*\)\s*\{")
_INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"(?P<name>[^"]+)"', re.M)
_DIRECTIVE_RE = re.compile(r"//[ \t]*gpuperf-sim:(?P<body>[^\n]*)")
_CLOSERS = {")": "(", "]": "[", "}": "{"}
# Headers every compiler gets in memory (runtime/compile.py's portability_headers()).
_BUILTIN_HEADERS = {"gpuperf.h", "hip/hip_runtime.h"}


def _read_source(source: str | Path, name: str | None) -> tuple[str, str, Path | None]:
    """(text, name for messages, directory for includes) of a file or a source string."""
    is_path = isinstance(source, Path) or (
        "\n" not in source and source.endswith((".hip", ".cu", ".cpp", ".cc", ".h"))
    )
    if not is_path:
        return str(source), name or "<string>", None
    path = Path(source)
    try:
        return path.read_text(), name or str(path), path.parent
    except OSError as failure:
        raise CompileError(
            f"cannot read the kernel source: {failure}", source_path=str(path)
        ) from None


def _blank(text: str, *, strings: bool) -> str:
    """Comments (and string literals when `strings`) replaced by spaces, newlines kept."""

    def spaces(match: re.Match[str]) -> str:
        lexeme = match.group()
        if not strings and lexeme[0] in "\"'":
            return lexeme
        return re.sub(r"[^\n]", " ", lexeme)

    return _LEXEME_RE.sub(spaces, text)


def _blank_preprocessor(text: str) -> str:
    lines, continued = text.split("\n"), False
    for number, line in enumerate(lines):
        if continued or line.lstrip().startswith("#"):
            continued = line.rstrip().endswith("\\")
            lines[number] = " " * len(line)
    return "\n".join(lines)


class _Lines:
    def __init__(self, text: str) -> None:
        self.starts = [m.end() for m in re.finditer("\n", text)]

    def of(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset) + 1


def check_source(
    text: str, source_name: str, directory: Path | None = None
) -> dict[str, tuple[KernelParam, ...]]:
    """The kernels' signatures, after the checks a compiler would fail first.

    Raises CompileError naming source:line for: an unterminated comment, unbalanced
    (), [] or {}, a quoted #include that cannot be found, a `__global__`/GPUPERF_KERNEL that
    is not `void name(...)`, and a source with no kernel at all.
    """
    lines = _Lines(text)

    def fail(message: str, offset: int) -> CompileError:
        return CompileError(message, source_path=source_name, line=lines.of(offset))

    no_comments = _blank(text, strings=False)
    if "/*" in (code := _blank(text, strings=True)):
        raise fail("unterminated /* comment", code.index("/*"))
    for include in _INCLUDE_RE.finditer(no_comments):
        header = include.group("name")
        places = [p for p in (directory, KERNELS_DIR) if p is not None]
        if header not in _BUILTIN_HEADERS and not any((p / header).is_file() for p in places):
            raise fail(f"'{header}' file not found", include.start())
    code = _blank_preprocessor(code)
    opened: list[tuple[str, int]] = []
    for bracket in re.finditer(r"[()\[\]{}]", code):
        char = bracket.group()
        if char in "([{":
            opened.append((char, bracket.start()))
        elif not opened or opened[-1][0] != _CLOSERS[char]:
            raise fail(
                f"unbalanced '{char}': no '{_CLOSERS[char]}' opened before it", bracket.start()
            )
        else:
            opened.pop()
    if opened:
        char, offset = opened[-1]
        raise fail(f"'{char}' is never closed", offset)
    for token in _KERNEL_TOKEN_RE.finditer(code):
        if not _KERNEL_DECL_RE.match(code, token.end()):
            raise fail(
                f"{token.group()} must declare a kernel as `{token.group()} void name(...)`",
                token.start(),
            )
    signatures = parse_signatures(text)
    if not signatures:
        function = next(
            (m for m in _FUNCTION_RE.finditer(code) if m.group("name") not in _KEYWORDS), None
        )
        where = f"function {function.group('name')!r} is not a kernel: " if function else ""
        raise fail(
            f"{where}no __global__ or GPUPERF_KERNEL kernel in the source; declare kernels as "
            '`GPUPERF_KERNEL void name(...)` after #include "gpuperf.h"',
            function.start() if function else 0,
        )
    return signatures


_KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "catch"}


def _directives(text: str, source_name: str) -> dict[str, float]:
    """`// gpuperf-sim: efficiency=0.55` before a kernel sets that kernel's efficiency."""
    lines = _Lines(text)
    found: dict[str, float] = {}
    for directive in _DIRECTIVE_RE.finditer(text):
        line = lines.of(directive.start())
        following = parse_signatures(text[directive.end() :])
        if not following:
            raise CompileError(
                "a gpuperf-sim directive must precede the kernel it applies to",
                source_path=source_name,
                line=line,
            )
        kernel = next(iter(following))
        for item in directive.group("body").replace(",", " ").split():
            key, _, value = item.partition("=")
            if key != "efficiency":
                raise CompileError(
                    f"unknown gpuperf-sim setting {item!r}; the one setting is efficiency=<0..1>",
                    source_path=source_name,
                    line=line,
                )
            try:
                efficiency = float(value)
            except ValueError:
                efficiency = math.nan
            if not 0 < efficiency <= 1:
                raise CompileError(
                    f"gpuperf-sim efficiency must be a fraction in (0, 1], got {value!r}",
                    source_path=source_name,
                    line=line,
                )
            found[kernel] = efficiency
    return found
