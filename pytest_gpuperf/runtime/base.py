"""The vendor-neutral runtime interface every backend implements.

Modelled on KernelTuner's backends and cuda.core's nouns: a backend owns one device and
offers the same verbs everywhere (buffers, copies, fills, compile, kernel lookup, launch,
streams, events, synchronize). Vendor types never cross this interface: buffers are
`DeviceBuffer` (an integer address), kernels are `Kernel`, events and streams are opaque.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from pytest_gpuperf.errors import (
    ArgumentError,
    DeviceFault,
    GpuPerfError,
    KernelNotFound,
    KernelTimeout,
    LaunchError,
)
from pytest_gpuperf.runtime.compile import DEFAULT_TIMEOUT_S as DEFAULT_COMPILE_TIMEOUT_S
from pytest_gpuperf.runtime.compile import (
    CompileRequest,
    CompileResult,
    compile_source,
    source_request,
)
from pytest_gpuperf.runtime.device_buffer import DeviceBuffer
from pytest_gpuperf.runtime.info import DeviceInfo, KernelResources
from pytest_gpuperf.runtime.signature import KernelParam, check_arguments, parse_signatures


@dataclass(eq=False)
class Kernel:
    """A kernel looked up in a loaded module, with its parsed signature and resources."""

    name: str
    params: tuple[KernelParam, ...]
    handle: Any = field(repr=False)
    module: Module = field(repr=False)
    resources: KernelResources = field(default_factory=KernelResources)
    fingerprint: str = ""  # filled by Backend.kernel_fingerprint on first use

    @property
    def backend(self) -> Backend:
        return self.module.backend


@dataclass(eq=False)
class Module:
    """A compiled and loaded module: the binary, its kernels' signatures and the log."""

    backend: Backend = field(repr=False)
    handle: Any = field(repr=False)
    source_name: str
    signatures: dict[str, tuple[KernelParam, ...]]
    binary: bytes = field(repr=False, default=b"")
    log: str = ""
    from_cache: bool = False
    # Where it was compiled from, as the session asked for it (the A/B comparison builds the
    # base revision's version of the same file with the same options and defines).
    source_path: Path | None = None
    # The work tree's file a base revision's build stands in for (A/B): the simulated
    # device looks its models up by this path.
    origin_path: Path | None = None
    options: tuple[str, ...] = ()
    defines: tuple[tuple[str, str], ...] = ()
    _kernels: dict[str, Kernel] = field(default_factory=dict, repr=False)

    def kernel(self, name: str) -> Kernel:
        """The kernel `name`; a clear error listing the module's kernels when it is absent."""
        if name in self._kernels:
            return self._kernels[name]
        if name not in self.signatures:
            raise KernelNotFound(name, sorted(self.signatures), self.source_name)
        handle = self.backend._get_function(self, name)
        kernel = Kernel(name, self.signatures[name], handle, self)
        kernel.resources = self.backend._kernel_resources(kernel)
        self._kernels[name] = kernel
        return kernel


Dim3 = tuple[int, int, int]


def as_dim3(value: int | Sequence[int], what: str) -> Dim3:
    """Normalise a grid or block given as an int or a 1-3 tuple of positive ints."""
    problem = ArgumentError(
        f"{what} must be a positive int or a tuple of 1-3 positive ints, got {value!r}"
        + (" (a float: use // or int() for a count of blocks)" if isinstance(value, float) else "")
    )
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        items: tuple = (value,)
    elif isinstance(value, (tuple, list)):
        items = tuple(value)
    else:
        raise problem
    whole = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in items)
    if not whole or not 1 <= len(items) <= 3 or any(int(v) < 1 for v in items):
        raise problem
    padded = (*(int(v) for v in items), 1, 1)
    return (padded[0], padded[1], padded[2])


@dataclass(frozen=True, eq=False)
class LaunchCall:
    """One launch as `Backend.launch` checked and normalised it, handed to the backend's
    `_launch`: the kernel, the arguments as given and as the signature converts them, the
    grid and block as 3 dims, the dynamic shared bytes and the stream."""

    kernel: Kernel
    args: Sequence[Any]
    values: list
    grid: Dim3
    block: Dim3
    shared_bytes: int
    stream: Any

    @property
    def threads(self) -> int:
        """Threads per block."""
        return self.block[0] * self.block[1] * self.block[2]

    def refused(self, shared_memory: str, reason: str) -> LaunchError:
        """The error for a launch the driver did not take (`shared_memory`: the vendor's
        word for it, "shared" or "LDS")."""
        return LaunchError(
            f"kernel {self.kernel.name!r} (grid {self.grid}, block {self.block}, "
            f"{self.shared_bytes} B dynamic {shared_memory}) did not launch: {reason}"
        )


@dataclass(frozen=True)
class SpeedModel:
    """What a simulated kernel's time comes from: the efficiency it streams at, a slowdown
    factor and its traffic model. Two kernels with equal SpeedModels run at the same modelled
    speed whatever their code (`efficiency_from` says where the efficiency was found and is
    not compared: the same number from two places is the same speed)."""

    efficiency: float
    efficiency_from: str = field(default="", compare=False)
    slowdown: float = 1.0
    traffic: str = ""  # the registered traffic_bytes model; "" for every buffer once, whole
    compute_efficiency: float = 0.0  # of the declared type's peak FLOP/s (the compute roof)


class Backend(abc.ABC):
    """One device behind one vendor runtime. Subclasses implement the abstract verbs."""

    name: str = ""
    compiler: str = ""  # what compile runs (runtime/compile.py); "" where _build is overridden
    simulated: bool = False
    supports_graphs: bool = False
    # whether record_event_in_graph records an event as a node of a captured graph
    supports_graph_events: bool = False

    def __init__(self, device_index: int = 0) -> None:
        self.device_index = device_index
        self._launch_shapes: dict[int, tuple[int, int]] = {}
        self._capture_stream: Any = None
        # The watchdog: waits for device work never block in the driver longer than this
        # (None: block); the session sets it from --gpuperf-kernel-timeout.
        self.kernel_timeout_s: float | None = None
        self.compile_timeout_s: float = DEFAULT_COMPILE_TIMEOUT_S
        self.fault = ""  # why this device can no longer be used (a sticky fault, a hang)
        self.hung = False  # a kernel is still running that will not finish
        self.last_kernel = ""
        # Every module handle loaded and not yet unloaded (compile and load_again add,
        # unload and close remove): one bookkeeping, the backends only make the driver calls.
        self._module_handles: list[Any] = []

    # -- the watchdog and faults ----------------------------------------------------------
    def _await(self, finished: Callable[[], bool], what: str) -> None:
        """Wait until `finished()` with the watchdog: poll, never block in the driver, so a
        kernel that does not finish ends in a KernelTimeout naming it (and Ctrl-C works)."""
        limit_s = self.kernel_timeout_s
        if limit_s is None:
            while not finished():
                time.sleep(1e-4)
            return
        deadline = time.monotonic() + limit_s
        pause_s = 20e-6
        while not finished():
            if time.monotonic() > deadline:
                self.hung = True
                self.fault = (
                    f"{what} did not finish within the kernel timeout of {limit_s:g} s "
                    f"(--gpuperf-kernel-timeout); the last kernel launched was "
                    f"{self.last_kernel!r}, and it is still running: this process cannot use "
                    "the GPU again"
                )
                raise KernelTimeout(self.fault)
            time.sleep(pause_s)
            pause_s = min(2 * pause_s, 2e-4)

    def _check_usable(self) -> None:
        """Refuse every call once the device has faulted or hung: later tests fail at once
        with the reason instead of hanging or crashing."""
        if self.fault:
            raise DeviceFault(f"the device is unusable: {self.fault}")

    def _mark_fault(self, reason: str) -> None:
        if not self.fault:
            self.fault = reason

    # -- device -----------------------------------------------------------------------
    @classmethod
    @abc.abstractmethod
    def device_count(cls, **options: Any) -> int:
        """How many devices this runtime shows the process, without opening one: the count
        after the runtime applied its visible-device mask (CUDA_VISIBLE_DEVICES,
        HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES), so index k < count opens the k-th GPU
        this process may use. pytest-xdist worker k measures on GPU k mod this count.

        `options` are those `open()` takes (the simulated device's GPUs are an option).
        Raises DeviceUnavailable, with the reason open() would give, when the runtime
        itself cannot be reached; 0 only when it answers that it sees no device.
        """

    @property
    @abc.abstractmethod
    def info(self) -> DeviceInfo: ...

    @property
    def seed(self) -> int | None:
        """The simulated device's noise seed (it reproduces a run); real GPUs have none."""
        return None

    def host_clock(self) -> float:
        """The host's clock in seconds for wall-time budgets: time.perf_counter on a real
        GPU; the simulated device runs a virtual one (its API calls cost modelled time)."""
        return time.perf_counter()

    # -- memory -----------------------------------------------------------------------
    @abc.abstractmethod
    def alloc(self, nbytes: int) -> DeviceBuffer:
        """Allocate device memory; `OutOfDeviceMemory` names the size and what is free."""

    @abc.abstractmethod
    def free(self, buffer: DeviceBuffer) -> None: ...

    @abc.abstractmethod
    def upload(self, buffer: DeviceBuffer, array: np.ndarray) -> None:
        """Copy a host array into the start of `buffer` (synchronous)."""

    @abc.abstractmethod
    def download(self, out: np.ndarray, buffer: DeviceBuffer) -> None:
        """Copy the start of `buffer` into the contiguous host array `out` (synchronous)."""

    @abc.abstractmethod
    def copy(self, dst: DeviceBuffer, src: DeviceBuffer, nbytes: int | None = None) -> None:
        """Device-to-device copy on the default stream (asynchronous)."""

    @abc.abstractmethod
    def fill(self, buffer: DeviceBuffer, byte: int) -> None:
        """Set every byte of `buffer` to `byte` (asynchronous, default stream)."""

    # -- argument checks shared by the vendor backends -----------------------------------
    def _live(self, buffer: DeviceBuffer, what: str) -> None:
        self._check_open()
        if buffer.freed:
            raise ArgumentError(f"{what}: the device buffer was already freed")
        if buffer.backend is not self:
            raise ArgumentError(f"{what}: the buffer belongs to another backend")

    def _upload_source(self, buffer: DeviceBuffer, array: np.ndarray) -> np.ndarray:
        """`array` as the contiguous host memory an upload into `buffer` copies from."""
        self._live(buffer, "upload")
        host = np.ascontiguousarray(array)
        if host.nbytes > buffer.nbytes:
            raise ArgumentError(
                f"upload: the array has {host.nbytes} bytes, the buffer only {buffer.nbytes}"
            )
        return host

    def _check_download(self, out: np.ndarray, buffer: DeviceBuffer) -> None:
        self._live(buffer, "download")
        if not (out.flags.c_contiguous and out.flags.writeable):
            raise ArgumentError("download needs a contiguous, writeable host array")
        if out.nbytes > buffer.nbytes:
            raise ArgumentError(
                f"download: the array wants {out.nbytes} bytes, the buffer has {buffer.nbytes}"
            )

    def _copy_count(self, dst: DeviceBuffer, src: DeviceBuffer, nbytes: int | None) -> int:
        """The bytes a device-to-device copy moves, checked against both buffers."""
        self._live(dst, "copy (destination)")
        self._live(src, "copy (source)")
        count = src.nbytes if nbytes is None else int(nbytes)
        if count > dst.nbytes or count > src.nbytes:
            raise ArgumentError(
                f"copy of {count} bytes: source has {src.nbytes}, destination {dst.nbytes}"
            )
        return count

    def to_device(self, array: np.ndarray) -> DeviceBuffer:
        """A new device buffer holding a copy of `array`."""
        array = np.ascontiguousarray(array)
        buffer = self.alloc(max(array.nbytes, 1))
        buffer.upload(array)
        return buffer

    # -- code -------------------------------------------------------------------------
    def compile(
        self,
        source: str | Path,
        *,
        options: Sequence[str] = (),
        defines: dict[str, str | int] | None = None,
        name: str | None = None,
    ) -> Module:
        """Compile a .hip file or a source string for this device and load it."""
        self._check_open()
        return self._build(source, tuple(options), defines, name)

    def _build(
        self,
        source: str | Path,
        options: tuple[str, ...],
        defines: dict[str, str | int] | None,
        name: str | None,
    ) -> Module:
        """A driver backend's build: its `compiler` in a child process (cached on disk,
        runtime/compile.py), then `_load_compiled` hands the code object to the driver. The
        same steps for cuda (NVRTC) and hip (hiprtc); a backend with no compiler overrides."""
        request = source_request(self.compiler, source, name, self.info.arch, options, defines)
        result = compile_source(request, timeout_s=self.compile_timeout_s)
        return self._loaded_module(request, result, self._load_compiled(request, result))

    def _load_compiled(self, request: CompileRequest, result: CompileResult) -> Any:
        """The driver's handle of the code object `result` holds (driver backends override)."""
        raise GpuPerfError(f"the {self.name} backend has no compiler")

    def load_again(self, module: Module) -> Module:
        """Load `module`'s code object once more, as a separate module: the same bytes at
        another load address, with whatever belongs to a load and not to the code (where it
        landed, how it meets the instruction caches). An A/B pair spreads its pairs over
        several loads per side to measure that drift (docs/measurement.md); nothing is
        compiled again."""
        self._check_open()
        handle = self._hold_module(self._load_binary(module))
        return replace(module, handle=handle, _kernels={})

    def unload(self, module: Module) -> None:
        """Unload a module from load_again now (close unloads the rest). A module this
        backend no longer holds (unloaded already, or another backend's) is left alone, so
        no handle reaches the driver twice."""
        for index, handle in enumerate(self._module_handles):
            if handle is module.handle:
                del self._module_handles[index]
                self._unload_module(handle)
                return

    def _loaded_module(self, request: CompileRequest, result: CompileResult, handle: Any) -> Module:
        """The Module of a compile whose code object the driver loaded as `handle` (held)."""
        return Module(
            backend=self,
            handle=self._hold_module(handle),
            source_name=request.source_name,
            signatures=parse_signatures(request.source),
            binary=result.binary,
            log=result.log,
            from_cache=result.from_cache,
        )

    def _hold_module(self, handle: Any) -> Any:
        """Keep a handle the driver just loaded (compile, load_again) until it is unloaded."""
        self._module_handles.append(handle)
        return handle

    def _release_modules(self) -> list[Any]:
        """The handles still held, for close to unload; none is held afterwards."""
        handles, self._module_handles = self._module_handles, []
        return handles

    def _load_binary(self, module: Module) -> Any:
        """The driver's handle of a new load of `module.binary` (backends that can load
        override; load_again holds it)."""
        raise GpuPerfError(f"the {self.name} backend cannot load a module again")

    def _unload_module(self, handle: Any) -> None:  # noqa: B027 (a backend that holds nothing)
        """The driver's unload of one held handle, its failure raised (backends override)."""

    @abc.abstractmethod
    def _get_function(self, module: Module, name: str) -> Any: ...

    def _kernel_resources(self, kernel: Kernel) -> KernelResources:
        return KernelResources()

    def kernel_fingerprint(self, kernel: Kernel) -> str:
        """'sha256:<hex>' of the kernel's machine code: equal exactly when two builds are
        byte-identical, so an A/B comparison can skip timing and a baseline history can tell
        a save of the same code from a save of edited code. Memoised on the kernel."""
        if not kernel.fingerprint:
            kernel.fingerprint = self._fingerprint(kernel)
        return kernel.fingerprint

    def _fingerprint(self, kernel: Kernel) -> str:
        from pytest_gpuperf.runtime.fingerprint import code_fingerprint

        return str(code_fingerprint(kernel.module.binary, kernel.name))

    def speed_model(self, kernel: Kernel) -> SpeedModel | None:
        """What the kernel's time is computed from, on a device that computes it (the
        simulated one); None on a real device, where the code itself sets the time."""
        return None

    def outputs_computed(self, kernel: Kernel) -> bool:
        """False when the device launched `kernel` without computing its outputs (the
        simulated device, for a kernel it has no model of); True everywhere else."""
        return True

    def declare_work(self, kernel: Kernel, flops: int, math: str) -> None:  # noqa: B027
        """What a test declared `kernel` computes (`flops` operations in `math`): a device
        that computes its times (the simulated one) times the kernel's launches from it; a
        real device ignores it, its code sets the time."""

    def occupancy(
        self, kernel: Kernel, block_threads: int, shared_bytes: int = 0
    ) -> KernelResources:
        """`kernel.resources` with the theoretical occupancy of `block_threads`-thread blocks
        and `shared_bytes` of dynamic shared memory, where the backend can work it out."""
        return kernel.resources

    # -- launch bookkeeping shared by the backends ----------------------------------------
    def _note_launch_shape(self, kernel: Kernel, threads: int, shared_bytes: int) -> None:
        """Work out the occupancy of a launch shape when the kernel first launches with it,
        so reports show the occupancy of the blocks that actually ran."""
        shape = (threads, int(shared_bytes))
        if (
            kernel.resources.block_threads != threads
            or self._launch_shapes.get(id(kernel)) != shape
        ):
            self._launch_shapes[id(kernel)] = shape
            kernel.resources = self.occupancy(kernel, threads, int(shared_bytes))

    def _check_open(self) -> None:  # noqa: B027 (backends that can be closed override it)
        """Raise if the backend was closed."""

    # -- execution --------------------------------------------------------------------
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
        """Launch asynchronously. Refused here, before the launch reaches the driver: a
        kernel or buffer of another backend, arguments that do not fit the signature, a block
        larger than the kernel allows."""
        self._check_open()
        if kernel.backend is not self:
            raise LaunchError(f"kernel {kernel.name!r} was loaded by another backend")
        values = check_arguments(kernel.name, kernel.params, args)
        for position, value in enumerate(args):
            if isinstance(value, DeviceBuffer) and value.backend is not self:
                raise ArgumentError(
                    f"argument {position} of kernel {kernel.name!r} is a buffer of another "
                    "backend; allocate it on this device"
                )
        grid3, block3 = as_dim3(grid, "grid"), as_dim3(block, "block")
        call = LaunchCall(kernel, args, values, grid3, block3, int(shared_bytes), stream)
        limit = kernel.resources.max_threads_per_block
        if limit and call.threads > limit:
            raise LaunchError(
                f"kernel {kernel.name!r}: a block of {call.threads} threads exceeds the {limit} "
                f"this kernel allows ({kernel.resources.summary()}); use smaller blocks"
            )
        self._launch(call)

    @abc.abstractmethod
    def _launch(self, call: LaunchCall) -> None:
        """Submit a launch that `launch` accepted (the backend's one launch verb)."""

    @abc.abstractmethod
    def create_event(self) -> Any: ...

    @abc.abstractmethod
    def record_event(self, event: Any, stream: Any = None) -> None: ...

    @abc.abstractmethod
    def elapsed_s(self, start: Any, end: Any) -> float:
        """Seconds between two recorded events (synchronises on `end`)."""

    @abc.abstractmethod
    def synchronize(self, stream: Any = None) -> None: ...

    def create_stream(self) -> Any:
        """A new stream; backends without streams return None (the default stream)."""
        return None

    def default_stream(self) -> Any:
        return None

    # -- graphs (optional: backends that have them set supports_graphs) ----------------
    def capture_graph(self, fn: Callable[[Any], None], stream: Any = None) -> Any:
        """Record the launches `fn(capture_stream)` makes into a graph that replays them.

        Replaying k launches as one graph keeps the device queue full without k host
        launches. `fn` must launch on the stream it is given (and nothing on others).
        """
        raise NotImplementedError(f"the {self.name or type(self).__name__} backend has no graphs")

    def _stream_to_capture(self, stream: Any) -> Any:
        """`stream`, or without one a private stream: the default stream cannot be captured."""
        if stream is None:
            if self._capture_stream is None:
                self._capture_stream = self.create_stream()
            stream = self._capture_stream
        return stream

    def record_event_in_graph(self, event: Any, stream: Any) -> None:
        """Record `event` on a capturing `stream` as a node of the graph, so that a replay
        records it (backends that can set supports_graph_events): the engine times cold
        samples inside one graph."""
        raise NotImplementedError(
            f"the {self.name or type(self).__name__} backend records no events in a graph"
        )

    def launch_graph(self, graph: Any, stream: Any = None) -> None:
        """Replay a graph from `capture_graph` (asynchronously)."""
        raise NotImplementedError(f"the {self.name or type(self).__name__} backend has no graphs")

    def free_graph(self, graph: Any) -> None:
        """Destroy a graph from `capture_graph` (the engine captures one per measurement)."""
        raise NotImplementedError(f"the {self.name or type(self).__name__} backend has no graphs")

    def profile_start(self) -> None:  # noqa: B027 (a backend no profiler attaches to)
        """Open the range of launches an external profiler records (the explain pass runs
        the test under `ncu --profile-from-start off`); work queued before is finished."""

    def profile_stop(self) -> None:  # noqa: B027
        """Close the range `profile_start` opened, once its launches have finished."""

    def close(self) -> None:  # noqa: B027 (optional: not every backend holds resources)
        """Release the context/device; the backend is unusable afterwards."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
