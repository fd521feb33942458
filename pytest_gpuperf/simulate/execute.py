"""What a launch on the simulated device computes, and which bytes it touches.

A kernel's semantics come from, in this order: a model registered for its source file and
name (`pytest_gpuperf.simulate`); for the plugin's own kernels only (files in kernels/),
their NumPy version (`shipped_kernels.emulate`, the check kernels of gpuperf_check.hip among
them) and the measurement engine's gpuperf_* kernels. Anything else
is launched without computing its outputs, with one `SimulationWarning` per kernel.

Outputs are not recomputed when nothing changed: every buffer has a write version, and a
launch whose kernel, launch shape, scalars and input versions equal those of the last launch
that wrote the same outputs, which nobody wrote since, leaves them as they are. Outputs are
the non-const pointer parameters; a model that reads them (x *= s, out += ...) says so with
reads_outputs=True and is always recomputed.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pytest_gpuperf.errors import GpuPerfError, LaunchError
from pytest_gpuperf.runtime.base import DeviceBuffer, Kernel
from pytest_gpuperf.runtime.compile import KERNELS_DIR
from pytest_gpuperf.runtime.signature import KernelParam
from pytest_gpuperf.simulate import kernel_models
from pytest_gpuperf.simulate.device_model import Access
from pytest_gpuperf.simulate.shipped_kernels import EMULATED, emulate

FLUSH_ELEMENT_BYTES = 16  # gpuperf_flush and gpuperf_copy_ref move uint4 elements
INTERNAL_SOURCE = "gpuperf_internal.hip"

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
    # bfloat16 has no NumPy type: its bit patterns (simulate/bfloat16.py converts them)
    "__hip_bfloat16": np.uint16,
    "__hip_bfloat162": np.uint16,
    "__nv_bfloat16": np.uint16,
    "__nv_bfloat162": np.uint16,
    "__bf16": np.uint16,
}


_PLUGIN_KERNELS = KERNELS_DIR.resolve()


def is_plugin_source(path: Path | None) -> bool:
    """Whether `path` (absolute, resolved) is one of the plugin's own kernel files."""
    return path is not None and path.parent == _PLUGIN_KERNELS


@dataclass(frozen=True)
class SimKernel:
    """The handle of a simulated kernel: its name, its fingerprint, the source's efficiency
    directive, the file it came from (None for a source string; absolute, resolved), and
    which load of a module it belongs to (0, 1, ... per device, in load order)."""

    name: str
    fingerprint: str
    efficiency: float | None = None
    source: Path | None = None
    load: int = 0
    compute_efficiency: float | None = None  # its gpuperf-sim compute_efficiency directive
    plugin_kernel: bool = field(init=False)  # from the plugin's kernels/
    internal: bool = field(init=False)  # from the measurement engine's gpuperf_internal.hip

    def __post_init__(self) -> None:
        plugin = is_plugin_source(self.source)
        object.__setattr__(self, "plugin_kernel", plugin)
        internal = plugin and self.source is not None and self.source.name == INTERNAL_SOURCE
        object.__setattr__(self, "internal", internal)

    @property
    def code_key(self) -> str:
        """What owns the code part of the run drift: this load of this code object."""
        return f"{self.fingerprint}@load{self.load}"

    def model(self) -> kernel_models.KernelModel | None:
        """The registered model, looked up at every launch (a conftest may register late)."""
        if self.source is None:
            return None
        return kernel_models.lookup(self.source, self.name, resolved=True)


@dataclass(eq=False)
class Allocation:
    """One simulated buffer: host memory behind a fake address, and its bookkeeping."""

    memory: np.ndarray
    reserved: int  # bytes counted against the device's memory (aligned)
    serial: int  # 0, 1, ... in allocation order: the buffer's placement draw
    version: int = 0  # bumped by every write; 0 = never written (still all zeros)

    @property
    def pristine(self) -> bool:
        return self.version == 0


def as_view(memory: np.ndarray, param: KernelParam) -> np.ndarray:
    """A buffer as a flat NumPy view typed by the pointer parameter `param`."""
    dtype = param.dtype or np.dtype(_VECTOR_ELEMENTS.get(param.base_type, np.uint8))
    return memory[: memory.size - memory.size % dtype.itemsize].view(dtype)


def is_input(param: KernelParam) -> bool:
    """A pointer to const data (`const float*`, `float const*`): read, never written."""
    pointee = param.ctype[: param.ctype.rfind("*")] if "*" in param.ctype else param.ctype
    return "const" in pointee.replace("*", " ").split()


@dataclass(frozen=True)
class _Memo:
    key: tuple
    output_versions: tuple[int, ...]


class Executor:
    """Runs launches' semantics on a backend's allocations; returns the bytes they touch."""

    def __init__(
        self,
        allocations: dict[int, Allocation],
        back: Callable[[Allocation], None] = lambda allocation: None,
    ) -> None:
        self.allocations = allocations
        self._back = back  # called before a buffer's first write: the host must back it
        self._memo: dict[tuple[int, ...], _Memo] = {}
        # Launch identities whose second identical launch gave the outputs of the first
        # (True: memoising them is what a GPU would compute) or changed them (False: the
        # model reads its outputs, an in-place update; every launch is computed again).
        self._idempotent: dict[Any, bool] = {}
        # Per output buffers: pairs of launch keys found to write the same outputs from the
        # same inputs (an A/B pair's head and base alternating on one buffer set), so that
        # alternating between them computes neither again; the last few pairs only.
        self._same: dict[tuple[int, ...], list[tuple[tuple, tuple, bool]]] = {}
        self._warned: set[tuple[str, str]] = set()
        self.unmodelled: set[tuple[str, str]] = set()
        self.computed = 0  # launches whose outputs were computed (not memoised)

    def forget(self, ptr: int) -> None:
        """A buffer was freed: drop what the memo knows about it."""
        for outputs in [o for o in self._memo if ptr in o]:
            del self._memo[outputs]
        for outputs in [o for o in self._same if ptr in o]:
            del self._same[outputs]

    def written(self, ptr: int) -> None:
        self.allocations[ptr].version += 1

    def writing(self, ptr: int) -> None:
        """About to write a buffer: its first write makes the host back its pages."""
        allocation = self.allocations[ptr]
        if allocation.pristine:
            self._back(allocation)

    # -- a launch ---------------------------------------------------------------------------
    def launch(
        self, kernel: Kernel, args: Sequence[Any], shape: kernel_models.LaunchShape
    ) -> list[Access]:
        handle: SimKernel = kernel.handle
        if handle.internal and kernel.name in ("gpuperf_flush", "gpuperf_copy_ref"):
            return self._internal(kernel.name, args)
        model = handle.model()
        params = kernel.params
        views: list[Any] | None = None

        def get_views() -> list[Any]:
            nonlocal views
            if views is None:
                views = [self._view(p, v) for p, v in zip(params, args, strict=True)]
            return views

        compute = self._compute_for(handle, model, shape)
        if compute is not None:
            self._run_memoised(kernel, args, shape, model, compute, get_views)
        else:
            self._unmodelled(handle, model, kernel, args)
        buffers = [(p, v) for p, v in zip(params, args, strict=True) if isinstance(v, DeviceBuffer)]
        if model is not None and model.traffic_bytes is not None:
            total = kernel_models.counted(model, "traffic_bytes", get_views())
            return self._spread(total, [b for _, b in buffers])
        return [self._access(b, b.nbytes) for _, b in buffers]

    def views(self, kernel: Kernel, args: Sequence[Any]) -> list[Any]:
        """A launch's arguments as a model sees them (pointers as typed flat views)."""
        return [self._view(p, v) for p, v in zip(kernel.params, args, strict=True)]

    def _view(self, param: KernelParam, value: Any) -> Any:
        if not param.is_pointer:
            return np.asarray(value).astype(param.dtype).item()
        return as_view(self.allocations[value.ptr].memory, param)

    def _compute_for(
        self,
        handle: SimKernel,
        model: kernel_models.KernelModel | None,
        shape: kernel_models.LaunchShape,
    ) -> tuple[Any, Callable[[list[Any]], None]] | None:
        """(identity for the memo, function of the views) that computes the outputs."""
        if model is not None:
            if model.compute is None:
                return None
            compute = model.compute
            return (model, lambda views: compute(views, shape))
        if not handle.plugin_kernel or handle.name not in EMULATED:
            return None
        name = handle.name

        def run(views: list[Any]) -> None:
            emulate(name, views, grid=shape.grid, block=shape.block)

        return ("shipped", run)

    def _run_memoised(
        self,
        kernel: Kernel,
        args: Sequence[Any],
        shape: kernel_models.LaunchShape,
        model: kernel_models.KernelModel | None,
        compute: tuple[Any, Callable[[list[Any]], None]],
        get_views: Callable[[], list[Any]],
    ) -> None:
        identity, run = compute

        def compute_now() -> None:  # the launch's compute, its failures in one clear line
            self._call_compute(kernel, model, run, get_views())

        inputs: dict[int, None] = {}
        outputs: dict[int, None] = {}
        scalars = []
        for param, value in zip(kernel.params, args, strict=True):
            if isinstance(value, DeviceBuffer):
                (inputs if is_input(param) else outputs)[value.ptr] = None
            else:
                scalars.append(value)
        out = tuple(outputs)
        key = (
            identity,
            kernel.handle.fingerprint,
            shape,
            tuple(scalars),
            tuple((ptr, self.allocations[ptr].version) for ptr in inputs),
        )
        reads_outputs = model is not None and model.reads_outputs
        marker = (id(identity), *key[1:4])  # the launch, whatever its inputs' versions
        if self._idempotent.get(marker) is False:
            reads_outputs = True
        previous = self._memo.get(out)
        versions = tuple(self.allocations[ptr].version for ptr in out)

        held = not reads_outputs and previous is not None and previous.output_versions == versions
        same = held and previous is not None and self._writes_the_same(out, previous.key, key)
        if held and previous is not None and (previous.key == key or same):
            if marker not in self._idempotent:
                self._apply_again(compute_now, marker, out)
            if self._idempotent.get(marker) and previous.key != key:
                self._memo[out] = _Memo(key, versions)
            return  # the outputs hold what this launch computes
        # The outputs hold another launch's results from the same buffers: keep them, to
        # learn whether this launch writes the same (then neither is computed again).
        compare = held and previous is not None and same is None
        before = [self.allocations[ptr].memory.copy() for ptr in out] if compare else []
        self._memo.pop(out, None)
        for ptr in out:
            self.writing(ptr)
        try:
            compute_now()
        finally:
            for ptr in out:
                self.written(ptr)
        self.computed += 1
        if compare and previous is not None:
            equal = all(
                np.array_equal(self.allocations[ptr].memory, old)
                for ptr, old in zip(out, before, strict=True)
            )
            self._same[out] = [*self._same.get(out, [])[-7:], (previous.key, key, equal)]
        if not reads_outputs:
            self._memo[out] = _Memo(key, tuple(self.allocations[ptr].version for ptr in out))

    def _writes_the_same(self, out: tuple[int, ...], first: tuple, second: tuple) -> bool | None:
        """Whether launches `first` and `second` were seen to write the same outputs `out`
        (None: not seen). Their keys hold their inputs' versions, so it holds for those."""
        for one, other, equal in self._same.get(out, ()):
            if (one == first and other == second) or (one == second and other == first):
                return equal
        return None

    def _apply_again(
        self, compute_now: Callable[[], None], marker: tuple[Any, ...], out: tuple[int, ...]
    ) -> None:
        """The first repeat of a memoised launch is computed once more, as a GPU runs every
        launch: an in-place update (`y += x`, an accumulation) changes its outputs again and
        is computed at every launch from then on (the memo kept the first result and passed
        a test that fails on a GPU); a launch that gives the same outputs stays memoised."""
        before = [self.allocations[ptr].memory.copy() for ptr in out]
        compute_now()
        self.computed += 1
        same = all(
            np.array_equal(self.allocations[ptr].memory, old)
            for ptr, old in zip(out, before, strict=True)
        )
        self._idempotent[marker] = same
        if not same:
            for ptr in out:
                self.written(ptr)
            self._memo.pop(out, None)

    def _call_compute(
        self,
        kernel: Kernel,
        model: kernel_models.KernelModel | None,
        run: Callable[[list[Any]], None],
        views: list[Any],
    ) -> None:
        try:
            run(views)
        except (IndexError, ValueError) as failure:
            raise LaunchError(
                f"kernel {kernel.name!r} failed on the simulated device: {failure} (on a GPU, "
                "an out-of-bounds access); check the size arguments against the buffers"
                + (f" and the model {model.describe()}" if model is not None else "")
            ) from failure
        except GpuPerfError:
            raise
        except Exception as failure:
            if model is None:
                raise
            raise LaunchError(
                f"the simulated model {model.describe()} raised {type(failure).__name__}: "
                f"{failure}; fix the model (it gets the arguments as NumPy views and numbers, "
                "in the kernel's parameter order)"
            ) from failure

    def _unmodelled(
        self,
        handle: SimKernel,
        model: kernel_models.KernelModel | None,
        kernel: Kernel,
        args: Sequence[Any],
    ) -> None:
        """Outputs left as they are (a GPU would have written them: bump their versions)."""
        for param, value in zip(kernel.params, args, strict=True):
            if isinstance(value, DeviceBuffer) and not is_input(param):
                self.written(value.ptr)
        where = str(handle.source) if handle.source is not None else "<string>"
        key = (where, handle.name)
        self.unmodelled.add(key)
        if key not in self._warned:
            self._warned.add(key)
            traffic = model is not None and model.traffic_bytes is not None
            warnings.warn(
                kernel_models.missing_model_message(handle.name, handle.source, traffic),
                kernel_models.SimulationWarning,
                stacklevel=4,
            )

    # -- bytes ------------------------------------------------------------------------------
    def _access(self, buffer: DeviceBuffer, nbytes: int) -> Access:
        return Access(buffer.ptr, self.allocations[buffer.ptr].serial, nbytes, buffer.nbytes)

    def _spread(self, total: int, buffers: list[DeviceBuffer]) -> list[Access]:
        """`total` bytes over the buffers in proportion to their sizes."""
        size = sum(b.nbytes for b in buffers)
        if not buffers or size == 0:
            return []
        shares = [total * b.nbytes // size for b in buffers]
        shares[-1] += total - sum(shares)
        return [self._access(b, share) for b, share in zip(buffers, shares, strict=True)]

    # -- the measurement engine's kernels ---------------------------------------------------
    def _internal(self, name: str, args: Sequence[Any]) -> list[Access]:
        if name == "gpuperf_flush":
            count = self._internal_bytes(name, args[0], args[1])
            return [self._access(args[0], count)]  # `sink` is written under a condition never met
        source, target = args[0], args[1]
        count = self._internal_bytes(name, source, args[2])
        self._internal_bytes(name, target, args[2])
        key = ("gpuperf_copy_ref", count, source.ptr, self.allocations[source.ptr].version)
        out = (target.ptr,)
        if self._memo.get(out) != _Memo(key, (self.allocations[target.ptr].version,)):
            src, dst = self.allocations[source.ptr], self.allocations[target.ptr]
            if not (src.pristine and dst.pristine):  # zeros onto zeros leave zeros
                self.writing(target.ptr)
                dst.memory[:count] = src.memory[:count]
                self.written(target.ptr)
            self._memo[out] = _Memo(key, (dst.version,))
        return [self._access(source, count), self._access(target, count)]

    @staticmethod
    def _internal_bytes(name: str, source: DeviceBuffer, count: Any) -> int:
        nbytes = int(count) * FLUSH_ELEMENT_BYTES
        if nbytes > source.nbytes:
            raise LaunchError(
                f"{name}: {int(count)} elements of {FLUSH_ELEMENT_BYTES} bytes overrun the "
                f"{source.nbytes}-byte buffer (a memory access fault on a GPU)"
            )
        return nbytes
