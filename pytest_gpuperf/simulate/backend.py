"""The simulated device behind the Backend interface: memory, compile, launch, streams, events.

Data really moves (buffers are host arrays behind fake device addresses; what kernels compute
comes from execute.py), while time is modelled (device_model.py): a virtual host clock (every
API call costs host time) and an in-order device queue on which each launch takes

    (launch_overhead_s + miss_bytes / (peak_bps * efficiency)
                       + hit_bytes / (peak_bps * efficiency * cache_speedup))
    * drift(run, buffers, module load) * jitter * slowdown

docs/simulated-device.md explains every part. Everything it reports says "simulated".
"""

from __future__ import annotations

import collections
import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pytest_gpuperf.errors import GpuPerfError, LaunchError, OutOfDeviceMemory
from pytest_gpuperf.runtime.base import (
    Backend,
    DeviceBuffer,
    DeviceInfo,
    Kernel,
    LaunchCall,
    Module,
    SpeedModel,
)
from pytest_gpuperf.runtime.devices import AMD
from pytest_gpuperf.runtime.info import ClockReport
from pytest_gpuperf.simulate import kernel_models
from pytest_gpuperf.simulate.compute_time import ComputeTimes, compute_efficiency
from pytest_gpuperf.simulate.device_model import (
    DEFAULT_EFFICIENCY,
    HOST_EVENT_S,
    HOST_LINK_BPS,
    HOST_SYNC_S,
    MODEL_VERSION,
    REFERENCE_EFFICIENCY,
    THROTTLE_CLOCK_FRACTION,
    THROTTLE_SLOWDOWN,
    Access,
    DriftParts,
    LruCache,
    Noise,
    SimSettings,
    transfer_s,
)
from pytest_gpuperf.simulate.execute import Allocation, Executor, SimKernel
from pytest_gpuperf.simulate.host_memory import (
    HOST_CHECK_FROM_BYTES,
    HOST_MARGIN_BYTES,
    HOST_MARGIN_FRACTION,
    host_available_bytes,
)
from pytest_gpuperf.simulate.source import (
    check_source,
    code_object,
    compute_directives,
    directives,
    fingerprint,
    read_source,
)

ALIGNMENT = 4096
BASE_ADDRESS = 0x7F00_0000_0000
_COPY_FINGERPRINT = "sim:device_copy"  # the runtime's own copy and fill "kernels"
_FILL_FINGERPRINT = "sim:device_fill"


@dataclass(eq=False)
class SimStream:
    """An in-order queue; `free_s` is when its last command ends on the device clock."""

    owner: SimBackend = field(repr=False)
    index: int
    free_s: float = 0.0


def simulated_uuid(device_name: str, device_index: int) -> str:
    """A simulated GPU's board id, spelled as NVML spells a UUID but starting "SIM-": the same
    for the same model and index in every run, so saves made on simulated GPU 0 and a run on
    GPU 1 exercise the gate's between-board path as two real boards would."""
    digest = hashlib.sha256(f"pytest-gpuperf sim {device_name} {device_index}".encode()).hexdigest()
    return f"SIM-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


@dataclass(eq=False)
class SimEvent:
    """A timestamp on the simulated device clock, set when the queue reaches the event."""

    owner: SimBackend = field(repr=False)
    time_s: float | None = None


class SimBackend(Backend):
    """One simulated device; see the module docstring and docs/simulated-device.md."""

    name = "sim"
    simulated = True
    supports_graphs = False

    @classmethod
    def device_count(cls, **options: Any) -> int:
        """One simulated GPU per entry of the `gpu_speeds` option (one when not given)."""
        speeds = options.get("gpu_speeds", (1.0,))
        if not speeds:
            raise GpuPerfError("gpu_speeds must name at least one simulated GPU")
        return len(speeds)

    def __init__(self, device_index: int, settings: SimSettings) -> None:
        super().__init__(device_index)
        self.settings = settings
        self.spec = settings.device
        self._noise = Noise(settings, device_index)
        self._cache = LruCache(self.spec.cache_bytes)
        self._allocations: dict[int, Allocation] = {}
        self._executor = Executor(self._allocations, back=self._back)
        self._compute = ComputeTimes(self.spec)  # the compute roof (compute_time.py)
        self._next_address = BASE_ADDRESS
        self._next_serial = 0
        self._loads = 0  # modules loaded so far: each load draws its own code drift
        self._used_bytes = 0
        self._host_s = 0.0
        self._device_free_s = 0.0
        self._default_stream = SimStream(self, 0)
        self._streams = 1
        self.launch_counts: collections.Counter[str] = collections.Counter()
        self._closed = False
        self._pending_fault = ""
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
            uuid=simulated_uuid(self.spec.name, device_index),
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
    def unmodelled_kernels(self) -> frozenset[tuple[str, str]]:
        """(source file, kernel) of kernels launched without a model computing their outputs
        (their outputs were left untouched)."""
        return frozenset(self._executor.unmodelled)

    @property
    def computed_launches(self) -> int:
        """Launches whose outputs were computed; the others found them computed already."""
        return self._executor.computed

    def kernel_fingerprint(self, kernel: Kernel) -> str:
        """The "sha256:<hex>" of the kernel's simulated code object (normalised source,
        headers, options, defines, directives) and name: a comment-only change keeps it."""
        handle: SimKernel = kernel.handle
        return handle.fingerprint

    def drift_parts(self, kernel: Kernel, args: Sequence[Any] = ()) -> DriftParts:
        """The run-drift factors a launch of `kernel` on `args` gets: device-wide, buffer
        placement (weighted by the bytes it touches per buffer) and the module load the
        kernel belongs to (a load, not the code's name or bytes, owns that part)."""
        # Weights: each buffer argument's size. A model's traffic_bytes is spread over the
        # buffers in proportion to their sizes, which gives the same normalised weights.
        touched: dict[int, int] = {}
        for value in args:
            if isinstance(value, DeviceBuffer) and value.ptr in self._allocations:
                serial = self._allocations[value.ptr].serial
                touched[serial] = touched.get(serial, 0) + value.nbytes
        handle: SimKernel = kernel.handle
        return self._noise.parts(handle.code_key, touched, handle.fingerprint)

    def run_drift(self, kernel: Kernel, args: Sequence[Any] = ()) -> float:
        """This run's time factor for `kernel` on `args` (1.0 = nominal)."""
        return self.drift_parts(kernel, args).total

    def efficiency_of(self, kernel: Kernel) -> float:
        """The modelled efficiency, first found of: the kernel_efficiency option (by
        fingerprint, then name), the source directive, the registered model, the reference
        table (the plugin's own kernels only), 0.80."""
        return self._efficiency(kernel)[0]

    def _efficiency(self, kernel: Kernel) -> tuple[float, str]:
        handle: SimKernel = kernel.handle
        option = self.settings.efficiency_option(handle.fingerprint, kernel.name)
        if option is not None:
            return option, "option"
        if handle.efficiency is not None:
            return handle.efficiency, "directive"
        model = handle.model()
        if model is not None and model.efficiency is not None:
            return model.efficiency, "model"
        if handle.plugin_kernel:
            table = REFERENCE_EFFICIENCY.get(self.spec.key, {})
            if kernel.name in table:
                return table[kernel.name], "reference"
        return DEFAULT_EFFICIENCY, "default"

    def speed_model(self, kernel: Kernel) -> SpeedModel:
        """What this kernel's modelled time comes from (its code does not enter it): the
        efficiency and where it was found, the kernel_slowdown factor, the traffic model."""
        handle: SimKernel = kernel.handle
        efficiency, found = self._efficiency(kernel)
        model = handle.model()
        traffic = ""
        if model is not None and model.traffic_bytes is not None:
            name = getattr(model.traffic_bytes, "__qualname__", repr(model.traffic_bytes))
            traffic = f"{model.source}:{model.kernel}:{name}"
        slowdown = self.settings.slowdown(handle.fingerprint, kernel.name)
        return SpeedModel(efficiency, found, slowdown, traffic, compute_efficiency(handle))

    def outputs_computed(self, kernel: Kernel) -> bool:
        """False once `kernel` was launched without a model computing its outputs."""
        handle: SimKernel = kernel.handle
        where = str(handle.source) if handle.source is not None else "<string>"
        return (where, handle.name) not in self._executor.unmodelled

    def declare_work(self, kernel: Kernel, flops: int, math: str) -> None:
        """Time `kernel`'s launches from the FLOPs a test declared (when no model gives them):
        at least flops / (the type's peak x compute efficiency)."""
        self._compute.declare(kernel.handle, flops, math)

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
        self._allocations[ptr] = Allocation(memory, reserved, self._next_serial)
        self._next_serial += 1
        self._used_bytes += reserved
        return DeviceBuffer(self, ptr, nbytes)

    def _back(self, allocation: Allocation) -> None:
        """Before a buffer's first write (upload, fill, copy, a kernel's output), refuse what
        the host cannot back (past it the OOM killer ends the process without a word). One
        never written (the flush scratch: zeros, only read) uses no host memory."""
        nbytes = allocation.memory.nbytes
        if not allocation.pristine or nbytes < HOST_CHECK_FROM_BYTES:
            return
        available = host_available_bytes()
        if available is None:
            return
        margin = max(HOST_MARGIN_BYTES, int(available * HOST_MARGIN_FRACTION))
        if nbytes > available - margin:
            raise OutOfDeviceMemory(
                f"cannot allocate {nbytes} bytes ({nbytes / 2**30:.2f} GiB) on the "
                f"{self._info.name}: its buffers live in host memory, and the host has "
                f"{available} bytes ({available / 2**30:.2f} GiB) available, of which {margin} "
                "are kept free for the rest of the machine; use a smaller problem size, free "
                "buffers you no longer need, or a machine with more memory (cache='rotate' "
                "copies every buffer)"
            )

    def free(self, buffer: DeviceBuffer) -> None:
        self._own(buffer, "free")
        allocation = self._allocations.pop(buffer.ptr)
        self._used_bytes -= allocation.reserved
        self._cache.evict(buffer.ptr)
        self._executor.forget(buffer.ptr)
        self._noise.forget(allocation.serial)
        buffer.freed = True

    def upload(self, buffer: DeviceBuffer, array: np.ndarray) -> None:
        allocation = self._own(buffer, "upload to")
        raw = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
        if raw.size > buffer.nbytes:
            raise GpuPerfError(
                f"cannot upload {raw.size} bytes into a {buffer.nbytes}-byte device buffer; "
                "allocate a larger buffer"
            )
        self._host_transfer(raw.size)
        self._back(allocation)
        allocation.memory[: raw.size] = raw
        allocation.version += 1

    def download(self, out: np.ndarray, buffer: DeviceBuffer) -> None:
        allocation = self._own(buffer, "download from")
        if not (out.flags.c_contiguous and out.flags.writeable):
            raise GpuPerfError("download needs a contiguous, writable host array")
        raw = out.view(np.uint8).reshape(-1)
        if raw.size > buffer.nbytes:
            raise GpuPerfError(
                f"cannot download {raw.size} bytes from a {buffer.nbytes}-byte device buffer"
            )
        self._host_transfer(raw.size)
        raw[:] = allocation.memory[: raw.size]

    def copy(self, dst: DeviceBuffer, src: DeviceBuffer, nbytes: int | None = None) -> None:
        target, source = self._own(dst, "copy to"), self._own(src, "copy from")
        count = src.nbytes if nbytes is None else int(nbytes)
        if not 0 <= count <= min(src.nbytes, dst.nbytes):
            raise GpuPerfError(
                f"cannot copy {count} bytes from a {src.nbytes}-byte buffer to a "
                f"{dst.nbytes}-byte buffer"
            )
        if not (source.pristine and target.pristine):  # zeros copied onto zeros leave zeros
            self._back(target)
            target.memory[:count] = source.memory[:count]
            target.version += 1
        accesses = [self._access(src, count), self._access(dst, count)]
        self._run(_COPY_FINGERPRINT, "device_copy", accesses, DEFAULT_EFFICIENCY, None)

    def fill(self, buffer: DeviceBuffer, byte: int) -> None:
        allocation = self._own(buffer, "fill")
        if not 0 <= int(byte) <= 255:
            raise GpuPerfError(f"fill takes a byte value 0-255, got {byte!r}")
        if not (byte == 0 and allocation.pristine):  # zeros already: skip the memset
            self._back(allocation)
            allocation.memory.fill(int(byte))
            allocation.version += 1
        accesses = [self._access(buffer, buffer.nbytes)]
        self._run(_FILL_FINGERPRINT, "device_fill", accesses, DEFAULT_EFFICIENCY, None)

    def _access(self, buffer: DeviceBuffer, nbytes: int) -> Access:
        return Access(buffer.ptr, self._allocations[buffer.ptr].serial, nbytes, buffer.nbytes)

    def _own(self, buffer: DeviceBuffer, verb: str) -> Allocation:
        self._check_open()
        if not isinstance(buffer, DeviceBuffer) or buffer.backend is not self:
            raise GpuPerfError(
                f"cannot {verb} a buffer that this simulated device did not allocate"
            )
        if buffer.freed or buffer.ptr not in self._allocations:
            raise GpuPerfError(f"cannot {verb} device buffer {buffer.ptr:#x}: it was already freed")
        return self._allocations[buffer.ptr]

    def _host_transfer(self, nbytes: int) -> None:
        """A synchronous host<->device copy: waits for the device, then crosses the link."""
        self._wait_for(self._device_free_s)
        self._host_s = max(self._host_s, self._device_free_s) + HOST_SYNC_S
        self._host_s += nbytes / HOST_LINK_BPS

    # -- code -------------------------------------------------------------------------------
    def _build(
        self,
        source: str | Path,
        options: tuple[str, ...],
        defines: dict[str, str | int] | None,
        name: str | None,
    ) -> Module:
        """Check the source's structure and read its kernels; no compiler runs.

        `options` and `defines` are not applied (there is no preprocessor) but are part of
        the code object, as they are part of a real binary.
        """
        text = read_source(source, name)
        signatures = check_source(text.text, text.name, text.directory)
        found = directives(text.text, text.name)
        compute = compute_directives(text.text, text.name)
        binary = code_object(text, found, options, defines, compute)
        return Module(
            backend=self,
            handle=(text.path, found, self._new_load(), compute),
            source_name=text.name,
            signatures=signatures,
            binary=binary,
            log="simulated device: no compiler ran (structure and signatures checked only)",
        )

    def _new_load(self) -> int:
        self._loads += 1
        return self._loads - 1

    def _load_binary(self, module: Module) -> tuple:
        """A new load of the same code object: the same kernels, their own code drift."""
        path, found, _, compute = module.handle
        return (path, found, self._new_load(), compute)

    def _get_function(self, module: Module, name: str) -> SimKernel:
        """The kernel's handle. Its models are those of the module's file, or, when the
        caller set `module.origin_path` before asking for kernels (an A/B comparison's base
        version, built from another revision's copy of a file), those of that file."""
        path, found, load, compute = module.handle
        origin = module.origin_path
        if origin is not None:
            path = Path(origin).resolve()
        print_ = fingerprint(module.binary, name)
        return SimKernel(name, print_, found.get(name), path, load, compute.get(name))

    # -- execution --------------------------------------------------------------------------
    def _launch(self, call: LaunchCall) -> None:
        kernel, args = call.kernel, call.args
        self._check_config(kernel.name, call.grid, call.block, call.shared_bytes)
        queue = self._stream(call.stream)
        handle: SimKernel = kernel.handle
        if handle.internal and kernel.name == "gpuperf_spin" and len(args) == 1:
            # A busy-wait on the wall clock: its length is its argument, free of drift.
            self._enqueue(queue, self.settings.launch_overhead_s + int(args[0]) * 1e-9)
            self.launch_counts[kernel.name] += 1
            return
        self.last_kernel = kernel.name
        if kernel.name in self.settings.hang_kernels:
            self._enqueue(queue, math.inf)  # never finishes (fault injection)
            return
        if kernel.name in self.settings.fault_kernels:
            self._pending_fault = (
                f"kernel {kernel.name!r} failed on the simulated device: an illegal memory "
                "access (simulated sticky fault); the device is unusable after it"
            )
        shape = kernel_models.LaunchShape(call.grid, call.block, call.shared_bytes)
        accesses = self._executor.launch(kernel, args, shape)
        compute_s = self._compute.seconds(handle, lambda: self._executor.views(kernel, args))
        efficiency = self.efficiency_of(kernel)
        self._run(
            handle.fingerprint, kernel.name, accesses, efficiency, queue, handle.code_key, compute_s
        )

    def _check_config(
        self, kernel: str, grid3: tuple[int, int, int], block3: tuple[int, int, int], shared: int
    ) -> None:
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

    def _run(
        self,
        fingerprint_: str,
        what: str,
        accesses: Sequence[Access],
        efficiency: float,
        queue: SimStream | None,
        code_key: str = "",
        compute_s: float = 0.0,
    ) -> None:
        """Queue a command that touches `accesses`, timed by the model (`code_key`: what
        owns its code drift, the fingerprint for the runtime's own copies and fills); a
        kernel with known FLOPs lasts at least their `compute_s` (the compute roof)."""
        settings = self.settings
        touched: dict[int, int] = {}
        for access in accesses:
            touched[access.allocation] = touched.get(access.allocation, 0) + access.nbytes
        parts = self._noise.parts(code_key or fingerprint_, touched, fingerprint_)
        factor = parts.total * self._noise.launch_jitter()
        factor *= settings.slowdown(fingerprint_, what)
        if self.throttled:
            factor *= THROTTLE_SLOWDOWN
        seconds = transfer_s(
            accesses, self._cache, self.spec.peak_bps, efficiency, settings.cache_speedup
        )
        seconds = max(seconds, compute_s)
        self._enqueue(
            queue or self._default_stream, (settings.launch_overhead_s + seconds) * factor
        )
        self.launch_counts[what] += 1

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

    def _wait_for(self, until_s: float) -> None:
        """What a wait does on a faulted or hung device: the sticky fault surfaces, and a
        queue that never drains trips the watchdog (at once without one)."""
        self._check_open()
        if self._pending_fault:
            self._mark_fault(self._pending_fault)
            self._check_usable()
        if math.isinf(until_s):
            if self.kernel_timeout_s is None:
                self.kernel_timeout_s = 0.0
            self._await(lambda: False, "the queued simulated work")

    def elapsed_s(self, start: Any, end: Any) -> float:
        self._wait_for(end.time_s if isinstance(end, SimEvent) and end.time_s else 0.0)
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
        self._wait_for(until_s)
        self._host_s = max(self._host_s, until_s) + HOST_SYNC_S

    def close(self) -> None:
        self._allocations.clear()
        self._cache.clear()
        self._used_bytes = 0
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise GpuPerfError(f"the {self._info.name} was closed; open a new one")
        self._check_usable()


__all__ = ["SimBackend", "SimEvent", "SimStream", "host_available_bytes"]
