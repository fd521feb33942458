"""The HIP backend: hip-python (`from hip import hip`) over the ROCm runtime, hiprtc to compile.

Device facts come from hipDeviceGetAttribute, hipDeviceGetName and friends rather than
hipDeviceProp_t, whose layout changed between ROCm 5 and 6 (hipGetDevicePropertiesR0600)
and which a HIP implementation over another vendor cannot reproduce. Only the AMD arch
name ("gfx942:sramecc+:xnack-") needs the struct; `_gcn_arch_name` is the one place that
reads it, and an NVIDIA-named device (a HIP runtime over CUDA) never reaches it: its arch is
"sm_<major><minor>" from the compute-capability attributes. Kernel resources and occupancy
come from the code object's metadata (amd_codeobject.py, occupancy.py).
"""

from __future__ import annotations

import ctypes
import functools
import re
from collections.abc import Callable
from dataclasses import replace
from types import ModuleType
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
from pytest_gpuperf.runtime import amd_codeobject, occupancy
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
from pytest_gpuperf.runtime.hip_compiler import RocmUnavailable, load_hip_python
from pytest_gpuperf.runtime.signature import pack_arguments

# hipModuleLaunchKernel's `extra` markers (hip_runtime_api.h; END is 0x03, unlike CUDA's 0).
HIP_LAUNCH_PARAM_BUFFER_POINTER = 0x01
HIP_LAUNCH_PARAM_BUFFER_SIZE = 0x02
HIP_LAUNCH_PARAM_END = 0x03

# Faults after which the device cannot be used again in this process (hip_runtime_api.h).
_STICKY = {
    "hipErrorIllegalAddress",
    "hipErrorLaunchFailure",
    "hipErrorIllegalState",
    "hipErrorAssert",
    "hipErrorHardwareStackError",
    "hipErrorIllegalInstruction",
    "hipErrorMisalignedAddress",
}

_AMD_NAME_RE = re.compile(r"\b(AMD|ATI|Radeon|Instinct)\b|gfx\d", re.I)
_NVIDIA_NAME_RE = re.compile(r"\b(NVIDIA|GeForce|Tesla|Quadro|TITAN)\b", re.I)


def _unavailable(reason: str) -> DeviceUnavailable:
    return DeviceUnavailable([Attempt("hip", reason)])


def _name(err: Any) -> str:
    return str(getattr(err, "name", err))


@functools.cache
def _codes(hip: Any) -> StatusCodes:
    """How hip-python's status codes read (`hip`: the module the backend loaded)."""
    success = hip.hipError_t.hipSuccess
    return StatusCodes(
        succeeded=lambda err: err == success,
        words=_name,
        sticky=lambda err: _name(err) in _STICKY,
        sticky_advice=(
            "; the device is unusable after this fault: every later GPU test of this "
            "process fails with it. Run the test alone to find the kernel at fault"
        ),
    )


def open(device_index: int = 0, **options: Any) -> HipBackend:  # the registry's entry point
    """Open HIP device `device_index`; `DeviceUnavailable` says precisely why not."""
    hip, count = _initialised_runtime(**options)
    if not 0 <= device_index < count:
        raise _unavailable(f"device index {device_index} out of range: {count} HIP device(s)")
    try:
        return HipBackend(hip, device_index)
    except GpuPerfError as failure:
        raise _unavailable(str(failure)) from None


def _initialised_runtime(**options: Any) -> tuple[ModuleType, int]:
    """hip-python's runtime module after hipInit, and hipGetDeviceCount's answer (>= 1);
    `DeviceUnavailable` says why there is no device."""
    if options:
        raise GpuPerfError(f"the hip backend takes no options, got {sorted(options)}")
    try:
        hip, _, libraries = load_hip_python()
    except RocmUnavailable as missing:
        raise _unavailable(str(missing)) from None
    success = hip.hipError_t.hipSuccess
    try:
        (init_status,) = hip.hipInit(0)
        count_status, count = hip.hipGetDeviceCount()
    except RuntimeError as failure:  # hip-python could not open the library or a symbol
        raise _unavailable(f"the HIP library {libraries.hip} did not load: {failure}") from None
    # ROCm 5.2 answers hipInit with hipErrorInvalidDevice when there is no GPU; the
    # device count says what happened.
    if count_status == hip.hipError_t.hipErrorNoDevice or (count_status == success and count == 0):
        raise _unavailable(
            f"hipErrorNoDevice: the HIP runtime ({libraries.hip}) found no GPU "
            f"(hipInit: {_name(init_status)}); check that the amdgpu driver is loaded and "
            "that this user can open /dev/kfd and /dev/dri"
        )
    if init_status != success:
        raise _unavailable(f"hipInit failed: {_name(init_status)} ({libraries.hip})")
    if count_status != success:
        raise _unavailable(f"hipGetDeviceCount failed: {_name(count_status)}")
    return hip, int(count)


def _uuid_text(raw: bytes) -> str:
    """A HIP device UUID as rocm-smi shows it: ROCm fills the 16 bytes with the unique id's
    hex digits ('GPU-58bc6dc4d1b4f2b2'); anything else (a HIP runtime over CUDA) is spelt as
    NVML spells it."""
    raw = bytes(raw[:16])
    text = raw.rstrip(b"\0")
    if text and all(48 <= c < 58 or 97 <= c < 103 or 65 <= c < 71 for c in text):
        return f"GPU-{text.decode()}"
    from pytest_gpuperf.runtime.cuda import format_uuid

    return format_uuid(raw.ljust(16, b"\0"))


class HipBackend(Backend):
    """One GPU through the HIP runtime (ROCm, or any library that speaks HIP's C API)."""

    name = "hip"
    compiler = "hiprtc"
    supports_graphs = True

    @classmethod
    def device_count(cls, **options: Any) -> int:
        """hipGetDeviceCount after hipInit: the runtime has applied HIP_VISIBLE_DEVICES (and
        ROCm's ROCR_VISIBLE_DEVICES), so this counts only the GPUs this process may use."""
        return _initialised_runtime(**options)[1]

    def __init__(self, hip: ModuleType, device_index: int) -> None:
        super().__init__(device_index)
        self._hip = hip
        self._ok(hip.hipSetDevice(device_index), "hipSetDevice", GpuPerfError)
        self._info = self._query_info()
        self._events: list[Any] = []
        self._streams: list[Any] = []
        self._graphs: list[Any] = []
        self._sync_event: Any = None
        self._closed = False

    # -- errors -------------------------------------------------------------------------
    def _ok(self, result: tuple, what: str, error: type[GpuPerfError] = LaunchError) -> Any:
        """The values of a hip-python result tuple, or `error` naming the call and the code
        (driver_result.py's funnel). A device fault (an illegal address, a failed launch)
        raises DeviceFault and marks the device unusable for the rest of the process."""
        return call_values(result, what, _codes(self._hip), error, self._mark_fault)

    # -- device -------------------------------------------------------------------------
    @property
    def info(self) -> DeviceInfo:
        return self._info

    def _attribute(self, name: str) -> int | None:
        """hipDeviceAttribute<name>, None where this runtime does not answer it."""
        hip = self._hip
        attribute = getattr(hip.hipDeviceAttribute_t, f"hipDeviceAttribute{name}", None)
        if attribute is None:
            return None
        err, value = hip.hipDeviceGetAttribute(attribute, self.device_index)
        return int(value) if err == hip.hipError_t.hipSuccess else None

    def _query_info(self) -> DeviceInfo:
        hip, index = self._hip, self.device_index
        name = str(self._ok(hip.hipDeviceGetName(256, index), "hipDeviceGetName", GpuPerfError))
        err, pci = hip.hipDeviceGetPCIBusId(64, index)
        uuid = self._uuid()
        total = self._ok(hip.hipDeviceTotalMem(index), "hipDeviceTotalMem", GpuPerfError)
        runtime = self._ok(hip.hipRuntimeGetVersion(), "hipRuntimeGetVersion", GpuPerfError)
        driver = self._ok(hip.hipDriverGetVersion(), "hipDriverGetVersion", GpuPerfError)
        attr = self._attribute
        return DeviceInfo(
            backend="hip",
            index=index,
            name=name,
            arch=self._arch(name),
            compute_units=attr("MultiprocessorCount") or 0,
            l2_bytes=attr("L2CacheSize") or 0,
            memory_bytes=int(total),
            warp_size=attr("WarpSize") or 64,
            max_threads_per_block=attr("MaxThreadsPerBlock") or 1024,
            shared_bytes_per_block=attr("MaxSharedMemoryPerBlock") or 0,
            clock_khz=attr("ClockRate") or None,
            memory_clock_khz=attr("MemoryClockRate") or None,
            memory_bus_bits=attr("MemoryBusWidth") or None,
            pci_bus_id=str(pci) if err == hip.hipError_t.hipSuccess else None,
            uuid=uuid,
            runtime_version=_hip_version(int(runtime)),
            driver_version=_hip_version(int(driver)),
        )

    def _uuid(self) -> str | None:
        """hipDeviceGetUuid's answer, None where the runtime has none (it is a beta call:
        a library without the symbol fails in hip-python with RuntimeError)."""
        hip = self._hip
        try:
            err, uuid = hip.hipDeviceGetUuid(self.device_index)
        except RuntimeError:
            return None
        if err != hip.hipError_t.hipSuccess:
            return None
        try:  # the struct's 16 bytes (hip-python's `bytes` property stops at a NUL)
            raw = ctypes.string_at(int(uuid), 16)
        except TypeError:
            raw = bytes(uuid.bytes)
        return _uuid_text(raw)

    def _arch(self, name: str) -> str:
        """ "gfx942" for an AMD device (feature suffixes dropped), "sm_90" for an NVIDIA one.

        An NVIDIA-named device never touches hipDeviceProp_t; an AMD-named one must answer
        through it; for any other name the struct is tried, then the compute capability.
        """
        if not _NVIDIA_NAME_RE.search(name):
            full = self._gcn_arch_name()
            if full:
                return amd_codeobject.target_arch(full)
            if _AMD_NAME_RE.search(name):
                raise GpuPerfError(
                    f"cannot read the architecture of {name!r} (hipGetDeviceProperties "
                    "failed); install the hip-python release matching your ROCm version"
                )
        major = self._attribute("ComputeCapabilityMajor")
        minor = self._attribute("ComputeCapabilityMinor")
        if major is None or minor is None:
            raise GpuPerfError(f"cannot read the compute capability of {name!r}")
        return f"sm_{major}{minor}"

    def _gcn_arch_name(self) -> str | None:
        """hipDeviceProp_t.gcnArchName: the only read of that struct (see the module doc)."""
        hip = self._hip
        try:
            props = hip.hipDeviceProp_t()
            (err,) = hip.hipGetDeviceProperties(props, self.device_index)
        except RuntimeError:  # the runtime lacks hip-python's hipGetDeviceProperties symbol
            return None
        if err != hip.hipError_t.hipSuccess:
            return None
        arch = props.gcnArchName
        arch = arch.decode(errors="replace") if isinstance(arch, bytes) else str(arch)
        return arch.split("\0", 1)[0] or None

    def _check_open(self) -> None:
        if self._closed:
            raise GpuPerfError(f"the hip backend for device {self.device_index} was closed")
        self._check_usable()

    def _done(self, event: Any) -> bool:
        """Whether the work before `event` has finished (hipEventQuery; never blocks)."""
        hip = self._hip
        (err,) = hip.hipEventQuery(event)
        if err == hip.hipError_t.hipErrorNotReady:
            return False
        self._ok((err,), "hipEventQuery (an earlier launch failed)")
        return True

    # -- memory -------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> DeviceBuffer:
        self._check_open()
        nbytes = int(nbytes)
        if nbytes < 0:
            raise GpuPerfError(f"cannot allocate a negative size ({nbytes} bytes)")
        if nbytes > self._info.memory_bytes:
            raise self._out_of_memory(nbytes, "more than the device has")
        hip = self._hip
        err, pointer = hip.hipMalloc(max(nbytes, 1))
        if err == hip.hipError_t.hipErrorOutOfMemory:
            raise self._out_of_memory(nbytes, _name(err))
        self._ok((err,), f"hipMalloc({nbytes} bytes)")
        return DeviceBuffer(self, int(pointer), nbytes)

    def _out_of_memory(self, nbytes: int, why: str) -> OutOfDeviceMemory:
        hip = self._hip
        err, free_bytes, total_bytes = hip.hipMemGetInfo()
        if err != hip.hipError_t.hipSuccess:
            free_bytes, total_bytes = 0, self._info.memory_bytes
        return OutOfDeviceMemory(
            f"cannot allocate {nbytes} bytes ({nbytes / 2**30:.2f} GiB) on {self._info.name}: "
            f"{free_bytes / 2**30:.2f} GiB free of {total_bytes / 2**30:.2f} GiB ({why}); "
            "free buffers or use a smaller problem"
        )

    def free(self, buffer: DeviceBuffer) -> None:
        hip = self._hip
        if buffer.freed or self._closed or self.fault:
            return  # after a fault or a hang a free may block: the process's exit frees it
        self._ok(hip.hipFree(buffer.ptr), "hipFree")
        buffer.freed = True

    def upload(self, buffer: DeviceBuffer, array: np.ndarray) -> None:
        hip = self._hip
        host = self._upload_source(buffer, array)
        self.synchronize()  # the copy would block behind queued kernels: wait with the watchdog
        if host.nbytes:
            kind = hip.hipMemcpyKind.hipMemcpyHostToDevice
            self._ok(
                hip.hipMemcpy(buffer.ptr, host.ctypes.data, host.nbytes, kind),
                "hipMemcpy (host to device)",
            )

    def download(self, out: np.ndarray, buffer: DeviceBuffer) -> None:
        hip = self._hip
        self._check_download(out, buffer)
        self.synchronize()
        if out.nbytes:
            kind = hip.hipMemcpyKind.hipMemcpyDeviceToHost
            self._ok(
                hip.hipMemcpy(out.ctypes.data, buffer.ptr, out.nbytes, kind),
                "hipMemcpy (device to host; an earlier launch may have failed)",
            )

    def copy(self, dst: DeviceBuffer, src: DeviceBuffer, nbytes: int | None = None) -> None:
        hip = self._hip
        count = self._copy_count(dst, src, nbytes)
        if count:
            kind = hip.hipMemcpyKind.hipMemcpyDeviceToDevice
            self._ok(
                hip.hipMemcpyAsync(dst.ptr, src.ptr, count, kind, None),
                "hipMemcpyAsync (device to device)",
            )

    def fill(self, buffer: DeviceBuffer, byte: int) -> None:
        hip = self._hip
        self._live(buffer, "fill")
        if buffer.nbytes:
            self._ok(
                hip.hipMemsetAsync(buffer.ptr, int(byte) & 0xFF, buffer.nbytes, None),
                "hipMemsetAsync",
            )

    # -- code ---------------------------------------------------------------------------
    def _load_compiled(self, request: CompileRequest, result: CompileResult) -> Any:
        """Load the code object hiprtc built (compile's last step, Backend._build)."""
        hip = self._hip
        err, handle = hip.hipModuleLoadData(result.binary)
        if err != hip.hipError_t.hipSuccess:
            raise CompileError(
                f"the HIP runtime could not load the code object hiprtc built for "
                f"{self._info.arch}: {_name(err)} (runtime {self._info.runtime_version}, "
                f"{result.compiler_version})",
                log=result.log,
                source_path=request.source_name,
            )
        return handle

    def _load_binary(self, module: Module) -> Any:
        """hipModuleLoadData of the same code object: the runtime gives a separate module."""
        hip = self._hip
        err, handle = hip.hipModuleLoadData(module.binary)
        if err != hip.hipError_t.hipSuccess:
            raise CompileError(
                f"the HIP runtime could not load {module.source_name}'s code object again: "
                f"{_name(err)} (runtime {self._info.runtime_version})",
                source_path=module.source_name,
            )
        return handle

    def _unload_module(self, handle: Any) -> None:
        self._ok(self._hip.hipModuleUnload(handle), "hipModuleUnload")

    def _get_function(self, module: Module, name: str) -> Any:
        hip = self._hip
        err, function = hip.hipModuleGetFunction(module.handle, name.encode())
        if err != hip.hipError_t.hipSuccess:
            raise KernelNotFound(name, sorted(module.signatures), module.source_name)
        return function

    def _kernel_resources(self, kernel: Kernel) -> KernelResources:
        """From the code object's metadata on AMD; hipFuncGetAttribute where it is not one."""
        metadata = amd_codeobject.loaded_kernel(kernel.module.binary, kernel.name)
        if metadata is not None:
            return occupancy.kernel_resources(metadata, self._info.arch)
        return self._function_attributes(kernel)

    def _function_attributes(self, kernel: Kernel) -> KernelResources:
        hip = self._hip

        def attribute(which: str) -> int | None:
            enum = getattr(hip.hipFunction_attribute, f"HIP_FUNC_ATTRIBUTE_{which}")
            err, value = hip.hipFuncGetAttribute(enum, kernel.handle)
            return int(value) if err == hip.hipError_t.hipSuccess else None

        try:
            return KernelResources(
                registers=attribute("NUM_REGS"),
                shared_bytes=attribute("SHARED_SIZE_BYTES") or 0,
                scratch_bytes=attribute("LOCAL_SIZE_BYTES") or 0,
                max_threads_per_block=attribute("MAX_THREADS_PER_BLOCK"),
            )
        except RuntimeError:  # a runtime without hipFuncGetAttribute
            return KernelResources()

    def occupancy(
        self, kernel: Kernel, block_threads: int, shared_bytes: int = 0
    ) -> KernelResources:
        """`kernel.resources` with the theoretical occupancy of `block_threads`-thread
        workgroups and `shared_bytes` of dynamic LDS (AMD code objects only)."""
        metadata = amd_codeobject.loaded_kernel(kernel.module.binary, kernel.name)
        if metadata is None:
            return replace(kernel.resources, block_threads=int(block_threads))
        return occupancy.kernel_resources(
            metadata, self._info.arch, int(block_threads), int(shared_bytes)
        )

    # -- execution ----------------------------------------------------------------------
    def _launch(self, call: LaunchCall) -> None:
        hip = self._hip
        # The arguments travel as one buffer laid out like the C ABI, through `extra`.
        blob = pack_arguments(call.values)
        buffer = ctypes.create_string_buffer(blob, max(len(blob), 1))
        size = ctypes.c_size_t(len(blob))
        extra = (ctypes.c_void_p * 5)(
            HIP_LAUNCH_PARAM_BUFFER_POINTER,
            ctypes.addressof(buffer),
            HIP_LAUNCH_PARAM_BUFFER_SIZE,
            ctypes.addressof(size),
            HIP_LAUNCH_PARAM_END,
        )
        self.last_kernel = call.kernel.name
        (err,) = hip.hipModuleLaunchKernel(
            call.kernel.handle, *call.grid, *call.block, call.shared_bytes, call.stream, None, extra
        )
        if err != hip.hipError_t.hipSuccess:
            raise call.refused("LDS", _name(err))
        self._note_launch_shape(call.kernel, call.threads, call.shared_bytes)

    def _create_kept(self, create: Callable[[], tuple], what: str, kept: list[Any]) -> Any:
        """A new event or stream from `create` (the HIP call named `what`), added to `kept`
        so that close() destroys it."""
        self._check_open()
        handle = self._ok(create(), what)
        kept.append(handle)
        return handle

    def create_event(self) -> Any:
        hip = self._hip
        return self._create_kept(hip.hipEventCreate, "hipEventCreate", self._events)

    def record_event(self, event: Any, stream: Any = None) -> None:
        hip = self._hip
        self._ok(hip.hipEventRecord(event, stream), "hipEventRecord")

    def elapsed_s(self, start: Any, end: Any) -> float:
        hip = self._hip
        self._check_open()
        if self.kernel_timeout_s is None:
            self._ok(hip.hipEventSynchronize(end), "hipEventSynchronize (a launch failed?)")
        else:
            self._await(lambda: self._done(end), "the timed launches")
        return float(self._ok(hip.hipEventElapsedTime(start, end), "hipEventElapsedTime")) / 1e3

    def synchronize(self, stream: Any = None) -> None:
        """Wait for `stream` (None: the null stream, which waits for every blocking stream)
        with the watchdog: an event recorded there, polled."""
        hip = self._hip
        self._check_open()
        if self.kernel_timeout_s is None:  # no watchdog (the library's default): block
            if stream is None:
                self._ok(hip.hipDeviceSynchronize(), "hipDeviceSynchronize (a launch failed?)")
            else:
                self._ok(hip.hipStreamSynchronize(stream), "hipStreamSynchronize")
            return
        if self._sync_event is None:
            self._sync_event = self._ok(hip.hipEventCreate(), "hipEventCreate")
        self._ok(hip.hipEventRecord(self._sync_event, stream), "hipEventRecord")
        event = self._sync_event
        self._await(lambda: self._done(event), "the queued GPU work")

    def create_stream(self) -> Any:
        hip = self._hip
        return self._create_kept(hip.hipStreamCreate, "hipStreamCreate", self._streams)

    # -- graphs -------------------------------------------------------------------------
    def capture_graph(self, fn: Callable[[Any], None], stream: Any = None) -> Any:
        """Stream capture: `fn(stream)` launches on `stream`; the launches become a graph.

        The null stream cannot be captured, so without `stream` a private one is used; while
        capturing, nothing may run on other streams (the runtime then fails the capture)."""
        hip = self._hip
        self._check_open()
        stream = self._stream_to_capture(stream)
        mode = hip.hipStreamCaptureMode.hipStreamCaptureModeGlobal
        self._ok(hip.hipStreamBeginCapture(stream, mode), "hipStreamBeginCapture")
        try:
            fn(stream)
        finally:
            err, graph = hip.hipStreamEndCapture(stream)
        self._ok((err,), "hipStreamEndCapture (something ran outside the capturing stream?)")
        try:
            executable, _ = self._ok(hip.hipGraphInstantiate(graph, None, 0), "hipGraphInstantiate")
        finally:
            hip.hipGraphDestroy(graph)  # the executable graph does not need it
        self._graphs.append(executable)
        return executable

    def launch_graph(self, graph: Any, stream: Any = None) -> None:
        hip = self._hip
        self._check_open()
        if not any(graph is known for known in self._graphs):
            raise LaunchError(f"launch_graph needs a graph from capture_graph, got {graph!r}")
        self._ok(hip.hipGraphLaunch(graph, stream), "hipGraphLaunch")

    def free_graph(self, graph: Any) -> None:
        hip = self._hip
        for index, known in enumerate(self._graphs):
            if graph is known:
                del self._graphs[index]
                if not self._closed:
                    self._ok(hip.hipGraphExecDestroy(graph), "hipGraphExecDestroy")
                return

    # -- teardown -----------------------------------------------------------------------
    def close(self) -> None:
        """Destroy the graphs, events, streams and modules this backend created."""
        if self._closed:
            return
        self._closed = True
        if self.fault:
            return  # a hung kernel or a lost device: the process's exit releases it
        hip = self._hip
        hip.hipDeviceSynchronize()
        for graph in self._graphs:
            hip.hipGraphExecDestroy(graph)
        for event in [*self._events, *([self._sync_event] if self._sync_event else [])]:
            hip.hipEventDestroy(event)
        for stream in self._streams:
            hip.hipStreamDestroy(stream)
        for handle in self._release_modules():
            hip.hipModuleUnload(handle)


def _hip_version(value: int) -> str:
    """HIP_VERSION-style integers (major * 10^7 + minor * 10^5 + patch) as "6.2.41133"."""
    if value >= 10_000_000:
        return f"{value // 10_000_000}.{value // 100_000 % 100}.{value % 100_000}"
    return str(value)
