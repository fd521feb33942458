"""The CUDA backend: cuda-python's driver API (`cuda.bindings.driver`) and NVRTC.

The same .hip sources as on AMD compile under NVRTC through kernels/gpuperf.h (see
cuda_compiler.py). Kernels run in the device's primary context, so the backend shares it
with anything else in the process (PyTorch, CuPy). Driver types (CUstream, CUevent, graphs)
stay opaque behind the Backend interface.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from pytest_gpuperf.errors import (
    Attempt,
    CompileError,
    DeviceUnavailable,
    GpuPerfError,
    KernelNotFound,
    LaunchError,
    OutOfDeviceMemory,
)
from pytest_gpuperf.runtime.base import (
    Backend,
    DeviceBuffer,
    DeviceInfo,
    Kernel,
    KernelResources,
    LaunchCall,
    Module,
)
from pytest_gpuperf.runtime.compile import CompileRequest, CompileResult
from pytest_gpuperf.runtime.driver_result import StatusCodes, call_values

# Errors after which the context is unusable: every later call fails the same way.
_STICKY = {
    "CUDA_ERROR_ILLEGAL_ADDRESS",
    "CUDA_ERROR_LAUNCH_FAILED",
    "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    "CUDA_ERROR_MISALIGNED_ADDRESS",
    "CUDA_ERROR_HARDWARE_STACK_ERROR",
    "CUDA_ERROR_ASSERT",
}


def _driver():
    from cuda.bindings import driver

    return driver


def _error_name(err: Any) -> str:
    driver = _driver()
    status, name = driver.cuGetErrorName(err)
    if status == driver.CUresult.CUDA_SUCCESS and name:
        return name.decode()
    return getattr(err, "name", str(err))


def _error_text(err: Any) -> str:
    driver = _driver()
    status, text = driver.cuGetErrorString(err)
    detail = text.decode() if status == driver.CUresult.CUDA_SUCCESS and text else ""
    name = _error_name(err)
    return f"{name} ({detail})" if detail else name


# Set by the first sticky error: the primary context is lost for the whole process.
_STICKY_FAULT: list[str] = []


_CODES = StatusCodes(
    succeeded=lambda err: err == _driver().CUresult.CUDA_SUCCESS,
    words=_error_text,
    sticky=lambda err: _error_name(err) in _STICKY,
    sticky_advice=(
        "; the CUDA context is unusable after this error (it is sticky): every later "
        "GPU test of this process fails with it. Run the test alone to find the kernel "
        "at fault (compute-sanitizer names the access)"
    ),
)


def _remember_fault(message: str) -> None:
    if not _STICKY_FAULT:
        _STICKY_FAULT.append(message)


def _ok(result: tuple, what: str, error: type[GpuPerfError] = LaunchError) -> Any:
    """The values of a driver call's result tuple, or `error` naming the call and the code
    (driver_result.py's funnel). A sticky error raises DeviceFault and marks the context lost
    for the whole process."""
    return call_values(result, what, _CODES, error, _remember_fault)


# Device attributes read once at open (CU_DEVICE_ATTRIBUTE_<name>).
_ATTRIBUTES = (
    "COMPUTE_CAPABILITY_MAJOR", "COMPUTE_CAPABILITY_MINOR", "MULTIPROCESSOR_COUNT",
    "L2_CACHE_SIZE", "WARP_SIZE", "MAX_THREADS_PER_BLOCK", "MAX_SHARED_MEMORY_PER_BLOCK",
    "CLOCK_RATE", "MEMORY_CLOCK_RATE", "GLOBAL_MEMORY_BUS_WIDTH",
    "MAX_THREADS_PER_MULTIPROCESSOR", "MAX_BLOCKS_PER_MULTIPROCESSOR",
    "MAX_REGISTERS_PER_MULTIPROCESSOR", "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR",
    "RESERVED_SHARED_MEMORY_PER_BLOCK",
)  # fmt: skip


@dataclass(eq=False)
class _Graph:
    """An instantiated CUDA graph (opaque to callers)."""

    exec_handle: Any


def _unavailable(reason: str) -> DeviceUnavailable:
    return DeviceUnavailable([Attempt("cuda", reason)])


def open(device_index: int = 0, **options: Any) -> CudaBackend:
    """Open CUDA device `device_index`; `DeviceUnavailable` says precisely why not."""
    count = CudaBackend.device_count(**options)
    if not 0 <= device_index < count:
        raise _unavailable(f"device index {device_index} out of range: {count} CUDA device(s)")
    try:
        return CudaBackend(device_index)
    except GpuPerfError as failure:
        raise _unavailable(str(failure)) from None


def _initialised_driver() -> Any:
    """The driver module after cuInit; `DeviceUnavailable` says why there is none."""
    try:
        from cuda.bindings import driver
    except ImportError as missing:
        raise _unavailable(
            f"cuda-bindings is not installed ({missing}); pip install 'pytest-gpuperf[cuda]'"
        ) from None
    try:
        (err,) = driver.cuInit(0)
    except RuntimeError as failure:  # cuda-pathfinder: no libcuda.so.1 on this machine
        raise _unavailable(
            f"libcuda.so not found: the NVIDIA driver is not installed ({failure})"
        ) from None
    if err != driver.CUresult.CUDA_SUCCESS:
        if _error_name(err) == "CUDA_ERROR_NO_DEVICE":
            raise _unavailable("CUDA_ERROR_NO_DEVICE: the NVIDIA driver found no GPU")
        raise _unavailable(f"cuInit failed: {_error_text(err)}")
    return driver


def format_uuid(raw: bytes) -> str:
    """NVML's spelling of a 16-byte GPU UUID: 'GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx'
    (what nvidia-smi -L and CUDA_VISIBLE_DEVICES=GPU-... show)."""
    text = bytes(raw[:16]).hex()
    return f"GPU-{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


class CudaBackend(Backend):
    """One NVIDIA GPU through the CUDA driver API, in its primary context."""

    name = "cuda"
    compiler = "nvrtc"
    supports_graphs = True
    supports_graph_events = True

    @classmethod
    def device_count(cls, **options: Any) -> int:
        """cuDeviceGetCount after cuInit: the driver has applied CUDA_VISIBLE_DEVICES, so
        this counts (and open() numbers) only the GPUs the mask lets this process see."""
        if options:
            raise GpuPerfError(f"the cuda backend takes no options, got {sorted(options)}")
        driver = _initialised_driver()
        err, count = driver.cuDeviceGetCount()
        if err != driver.CUresult.CUDA_SUCCESS:
            raise _unavailable(f"cuDeviceGetCount failed: {_error_text(err)}")
        if int(count) < 1:
            raise _unavailable("CUDA_ERROR_NO_DEVICE: the NVIDIA driver found no GPU")
        return int(count)

    def __init__(self, device_index: int = 0) -> None:
        super().__init__(device_index)
        d = self._d = _driver()
        self._device = _ok(d.cuDeviceGet(device_index), "cuDeviceGet", GpuPerfError)
        self._context = _ok(
            d.cuDevicePrimaryCtxRetain(self._device), "cuDevicePrimaryCtxRetain", GpuPerfError
        )
        _ok(d.cuCtxSetCurrent(self._context), "cuCtxSetCurrent", GpuPerfError)
        self._attrs = {name: self._attribute(name) for name in _ATTRIBUTES}
        self._info = self._query_info()
        self._events: list[Any] = []
        self._streams: list[Any] = []
        self._graphs: list[_Graph] = []
        self._sync_event: Any = None
        self._closed = False

    # -- device -------------------------------------------------------------------------
    @property
    def info(self) -> DeviceInfo:
        return self._info

    def _attribute(self, name: str) -> int:
        """CU_DEVICE_ATTRIBUTE_<name>, 0 where this driver does not know it."""
        attribute = getattr(self._d.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}", None)
        if attribute is None:
            return 0
        err, value = self._d.cuDeviceGetAttribute(attribute, self._device)
        return int(value) if err == self._d.CUresult.CUDA_SUCCESS else 0

    def _query_info(self) -> DeviceInfo:
        d, a = self._d, self._attrs
        name = _ok(d.cuDeviceGetName(256, self._device), "cuDeviceGetName", GpuPerfError)
        err, pci = d.cuDeviceGetPCIBusId(64, self._device)
        uuid_err, uuid = d.cuDeviceGetUuid(self._device)
        driver_version = _ok(d.cuDriverGetVersion(), "cuDriverGetVersion", GpuPerfError)
        from cuda import bindings

        return DeviceInfo(
            backend="cuda",
            index=self.device_index,
            name=name.split(b"\0", 1)[0].decode(errors="replace"),
            arch=f"sm_{a['COMPUTE_CAPABILITY_MAJOR']}{a['COMPUTE_CAPABILITY_MINOR']}",
            compute_units=a["MULTIPROCESSOR_COUNT"],
            l2_bytes=a["L2_CACHE_SIZE"],
            memory_bytes=int(_ok(d.cuDeviceTotalMem(self._device), "cuDeviceTotalMem")),
            warp_size=a["WARP_SIZE"] or 32,
            max_threads_per_block=a["MAX_THREADS_PER_BLOCK"] or 1024,
            shared_bytes_per_block=a["MAX_SHARED_MEMORY_PER_BLOCK"],
            clock_khz=a["CLOCK_RATE"] or None,
            memory_clock_khz=a["MEMORY_CLOCK_RATE"] or None,
            memory_bus_bits=a["GLOBAL_MEMORY_BUS_WIDTH"] or None,
            pci_bus_id=pci.split(b"\0", 1)[0].decode() if err == 0 else None,
            uuid=format_uuid(uuid.bytes) if uuid_err == 0 else None,
            runtime_version=f"cuda-bindings {getattr(bindings, '__version__', '?')}",
            driver_version=f"{driver_version // 1000}.{driver_version % 1000 // 10}",
        )

    def _check_open(self) -> None:
        if self._closed:
            raise GpuPerfError(f"the cuda backend for device {self.device_index} was closed")
        if _STICKY_FAULT:
            self._mark_fault(_STICKY_FAULT[0])
        self._check_usable()

    def _done(self, event: Any) -> bool:
        """Whether the work before `event` has finished (cuEventQuery; never blocks)."""
        (err,) = self._d.cuEventQuery(event)
        if err == self._d.CUresult.CUDA_ERROR_NOT_READY:
            return False
        _ok((err,), "cuEventQuery (an earlier launch failed)")
        return True

    # -- memory -------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> DeviceBuffer:
        self._check_open()
        if int(nbytes) < 0:
            raise GpuPerfError(f"cannot allocate a negative size ({nbytes} bytes)")
        err, pointer = self._d.cuMemAlloc(max(int(nbytes), 1))
        if err == self._d.CUresult.CUDA_ERROR_OUT_OF_MEMORY:
            free_bytes, total_bytes = _ok(self._d.cuMemGetInfo(), "cuMemGetInfo")
            raise OutOfDeviceMemory(
                f"cannot allocate {int(nbytes)} bytes ({int(nbytes) / 2**30:.2f} GiB) on "
                f"{self._info.name}: {free_bytes / 2**30:.2f} GiB free of "
                f"{total_bytes / 2**30:.2f} GiB (CUDA_ERROR_OUT_OF_MEMORY); free buffers "
                "or use a smaller problem"
            )
        _ok((err,), f"cuMemAlloc({int(nbytes)} bytes)")
        return DeviceBuffer(self, int(pointer), int(nbytes))

    def free(self, buffer: DeviceBuffer) -> None:
        if buffer.freed or self._closed or self.fault:
            return  # after a fault or a hang a free may block: the process's exit frees it
        _ok(self._d.cuMemFree(buffer.ptr), "cuMemFree")
        buffer.freed = True

    def upload(self, buffer: DeviceBuffer, array: np.ndarray) -> None:
        host = self._upload_source(buffer, array)
        self.synchronize()  # the copy would block behind queued kernels: wait with the watchdog
        if host.nbytes:
            _ok(self._d.cuMemcpyHtoD(buffer.ptr, host.ctypes.data, host.nbytes), "cuMemcpyHtoD")

    def download(self, out: np.ndarray, buffer: DeviceBuffer) -> None:
        self._check_download(out, buffer)
        self.synchronize()
        if out.nbytes:
            _ok(self._d.cuMemcpyDtoH(out.ctypes.data, buffer.ptr, out.nbytes), "cuMemcpyDtoH")

    def copy(self, dst: DeviceBuffer, src: DeviceBuffer, nbytes: int | None = None) -> None:
        count = self._copy_count(dst, src, nbytes)
        if count:
            _ok(self._d.cuMemcpyDtoDAsync(dst.ptr, src.ptr, count, 0), "cuMemcpyDtoDAsync")

    def fill(self, buffer: DeviceBuffer, byte: int) -> None:
        self._live(buffer, "fill")
        if buffer.nbytes:
            _ok(
                self._d.cuMemsetD8Async(buffer.ptr, int(byte) & 0xFF, buffer.nbytes, 0),
                "cuMemsetD8",
            )

    # -- code ---------------------------------------------------------------------------
    def _load_compiled(self, request: CompileRequest, result: CompileResult) -> Any:
        """Load the CUBIN NVRTC built (compile's last step, Backend._build)."""
        err, handle = self._d.cuModuleLoadData(result.binary)
        if err != self._d.CUresult.CUDA_SUCCESS:
            raise CompileError(
                f"the driver could not load the CUBIN NVRTC built for {self._info.arch}: "
                f"{_error_text(err)} (driver {self._info.driver_version}, "
                f"{result.compiler_version})",
                log=result.log,
                source_path=request.source_name,
            )
        return handle

    def _load_binary(self, module: Module) -> Any:
        """cuModuleLoadData of the same CUBIN: the driver gives a separate module."""
        err, handle = self._d.cuModuleLoadData(module.binary)
        if err != self._d.CUresult.CUDA_SUCCESS:
            raise CompileError(
                f"the driver could not load {module.source_name}'s CUBIN again: "
                f"{_error_text(err)} (driver {self._info.driver_version})",
                source_path=module.source_name,
            )
        return handle

    def _unload_module(self, handle: Any) -> None:
        _ok(self._d.cuModuleUnload(handle), "cuModuleUnload")

    def _get_function(self, module: Module, name: str) -> Any:
        err, function = self._d.cuModuleGetFunction(module.handle, name.encode())
        if err != self._d.CUresult.CUDA_SUCCESS:
            raise KernelNotFound(name, sorted(module.signatures), module.source_name)
        return function

    def _function_attribute(self, kernel: Kernel, attribute: str) -> int:
        enum = getattr(self._d.CUfunction_attribute, attribute)
        return int(_ok(self._d.cuFuncGetAttribute(enum, kernel.handle), "cuFuncGetAttribute"))

    def _kernel_resources(self, kernel: Kernel) -> KernelResources:
        """Registers, static shared and local (spill/stack) bytes, as compiled."""
        return KernelResources(
            registers=self._function_attribute(kernel, "CU_FUNC_ATTRIBUTE_NUM_REGS"),
            shared_bytes=self._function_attribute(kernel, "CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES"),
            scratch_bytes=self._function_attribute(kernel, "CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES"),
            max_threads_per_block=self._function_attribute(
                kernel, "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK"
            ),
        )

    def occupancy(
        self, kernel: Kernel, block_threads: int, shared_bytes: int = 0
    ) -> KernelResources:
        """`kernel.resources` with the theoretical occupancy of `block_threads`-thread blocks.

        The block count per SM is the driver's (cuOccupancyMaxActiveBlocksPerMultiprocessor);
        the limiter is the resource whose own limit is the smallest.
        """
        blocks = int(
            _ok(
                self._d.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                    kernel.handle, int(block_threads), int(shared_bytes)
                ),
                "cuOccupancyMaxActiveBlocksPerMultiprocessor",
            )
        )
        warp = self._info.warp_size
        warps_per_block = -(-int(block_threads) // warp)
        max_warps = self._attrs["MAX_THREADS_PER_MULTIPROCESSOR"] // warp
        return replace(
            kernel.resources,
            block_threads=int(block_threads),
            blocks_per_cu=blocks,
            occupancy=blocks * warps_per_block / max_warps,
            occupancy_limiter=self._limiter(kernel.resources, warps_per_block, shared_bytes),
        )

    def _limiter(self, resources: KernelResources, warps_per_block: int, dynamic: int) -> str:
        a, warp = self._attrs, self._info.warp_size
        limits = {
            "warps": a["MAX_THREADS_PER_MULTIPROCESSOR"] // (warps_per_block * warp),
            "blocks": a["MAX_BLOCKS_PER_MULTIPROCESSOR"],
        }
        if resources.registers:
            per_warp = -(-resources.registers * warp // 256) * 256  # allocated in units of 256
            limits["registers"] = a["MAX_REGISTERS_PER_MULTIPROCESSOR"] // (
                per_warp * warps_per_block
            )
        shared = resources.shared_bytes + int(dynamic)
        if shared:
            per_block = shared + a["RESERVED_SHARED_MEMORY_PER_BLOCK"]
            limits["shared memory"] = a["MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"] // per_block
        return min(limits, key=lambda name: limits[name])

    # -- execution ----------------------------------------------------------------------
    def _launch(self, call: LaunchCall) -> None:
        values = call.values
        pointers = (ctypes.c_void_p * max(len(values), 1))(*(ctypes.addressof(v) for v in values))
        self.last_kernel = call.kernel.name
        err, *_ = self._d.cuLaunchKernel(
            call.kernel.handle,
            *call.grid,
            *call.block,
            call.shared_bytes,
            _stream(call.stream),
            ctypes.addressof(pointers) if values else 0,
            0,
        )
        if err != self._d.CUresult.CUDA_SUCCESS:
            raise call.refused("shared", _error_text(err))
        self._note_launch_shape(call.kernel, call.threads, call.shared_bytes)

    def create_event(self) -> Any:
        self._check_open()
        event = _ok(self._d.cuEventCreate(self._d.CUevent_flags.CU_EVENT_DEFAULT), "cuEventCreate")
        self._events.append(event)
        return event

    def record_event(self, event: Any, stream: Any = None) -> None:
        _ok(self._d.cuEventRecord(event, _stream(stream)), "cuEventRecord")

    def elapsed_s(self, start: Any, end: Any) -> float:
        self._check_open()
        if self.kernel_timeout_s is None:
            _ok(self._d.cuEventSynchronize(end), "cuEventSynchronize (an earlier launch failed)")
        else:
            self._await(lambda: self._done(end), "the timed launches")
        return float(_ok(self._d.cuEventElapsedTime(start, end), "cuEventElapsedTime")) / 1e3

    def profile_start(self) -> None:
        self.synchronize()
        _ok(self._d.cuProfilerStart(), "cuProfilerStart")

    def profile_stop(self) -> None:
        self.synchronize()
        _ok(self._d.cuProfilerStop(), "cuProfilerStop")

    def synchronize(self, stream: Any = None) -> None:
        """Wait for `stream` (None: the legacy default stream, which waits for every blocking
        stream) with the watchdog: an event recorded there, polled."""
        self._check_open()
        if self.kernel_timeout_s is None:  # no watchdog (the library's default): block
            if stream is None:
                _ok(self._d.cuCtxSynchronize(), "cuCtxSynchronize (an earlier launch failed)")
            else:
                _ok(self._d.cuStreamSynchronize(stream), "cuStreamSynchronize")
            return
        if self._sync_event is None:
            self._sync_event = _ok(
                self._d.cuEventCreate(self._d.CUevent_flags.CU_EVENT_DISABLE_TIMING),
                "cuEventCreate",
            )
        _ok(self._d.cuEventRecord(self._sync_event, _stream(stream)), "cuEventRecord")
        event = self._sync_event
        self._await(lambda: self._done(event), "the queued GPU work")

    def create_stream(self) -> Any:
        self._check_open()
        flags = self._d.CUstream_flags.CU_STREAM_DEFAULT
        stream = _ok(self._d.cuStreamCreate(flags), "cuStreamCreate")
        self._streams.append(stream)
        return stream

    # -- graphs -------------------------------------------------------------------------
    def capture_graph(self, fn: Callable[[Any], None], stream: Any = None) -> _Graph:
        """Stream capture: `fn(stream)` launches on `stream`; the launches become a graph.

        The legacy default stream cannot be captured, so without `stream` a private one is
        used. While capturing, nothing may run on other streams (copies and fills use the
        default stream): the driver then fails the capture, and so does this call.
        """
        self._check_open()
        stream = self._stream_to_capture(stream)
        mode = self._d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL
        _ok(self._d.cuStreamBeginCapture(stream, mode), "cuStreamBeginCapture")
        try:
            fn(stream)
        finally:
            err, graph = self._d.cuStreamEndCapture(stream)
        _ok((err,), "cuStreamEndCapture (something ran outside the capturing stream?)")
        try:
            exec_handle = _ok(self._d.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
        finally:
            self._d.cuGraphDestroy(graph)  # the instantiated graph does not need it
        captured = _Graph(exec_handle)
        self._graphs.append(captured)
        return captured

    def record_event_in_graph(self, event: Any, stream: Any) -> None:
        """An external event record node (CU_EVENT_RECORD_EXTERNAL): a plain record on a
        capturing stream only orders the capture and is never replayed."""
        external = self._d.CUevent_record_flags.CU_EVENT_RECORD_EXTERNAL
        _ok(self._d.cuEventRecordWithFlags(event, stream, external), "cuEventRecordWithFlags")

    def launch_graph(self, graph: Any, stream: Any = None) -> None:
        self._check_open()
        if not isinstance(graph, _Graph):
            raise LaunchError(f"launch_graph needs a graph from capture_graph, got {graph!r}")
        _ok(self._d.cuGraphLaunch(graph.exec_handle, _stream(stream)), "cuGraphLaunch", LaunchError)

    def free_graph(self, graph: Any) -> None:
        if graph in self._graphs:
            self._graphs.remove(graph)
            if not self._closed:
                _ok(self._d.cuGraphExecDestroy(graph.exec_handle), "cuGraphExecDestroy")

    # -- teardown -----------------------------------------------------------------------
    def close(self) -> None:
        """Destroy what this backend created and release the primary context."""
        if self._closed:
            return
        self._closed = True
        if self.fault or _STICKY_FAULT:
            # A hung kernel or a lost context: any driver call may block or fail. The
            # process's exit releases the context.
            return
        d = self._d
        d.cuCtxSynchronize()
        for graph in self._graphs:
            d.cuGraphExecDestroy(graph.exec_handle)
        for event in [*self._events, *([self._sync_event] if self._sync_event else [])]:
            d.cuEventDestroy(event)
        for stream in self._streams:
            d.cuStreamDestroy(stream)
        for handle in self._release_modules():
            d.cuModuleUnload(handle)
        d.cuDevicePrimaryCtxRelease(self._device)


def _stream(stream: Any) -> Any:
    """The driver's handle for `stream`: None means the legacy default stream (0)."""
    return 0 if stream is None else stream
