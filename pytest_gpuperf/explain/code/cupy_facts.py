"""Code facts of the CuPy kernels a callable compiled, head against base.

A `gpu_bench.run(fn)` measurement whose callable launches a `cupy.RawKernel` (or a kernel of
a `cupy.RawModule`) has no kernel the plugin built, but the driver knows the compiled one:
CuPy's RawKernel reads `cuFuncGetAttribute` through its properties `num_regs`,
`local_size_bytes` (per thread: where spilled registers go), `shared_size_bytes` (static,
per block) and `max_threads_per_block` (what the registers leave launchable), the names
CuPy 12 to 14 use. Found by looking through the repository modules' globals for objects
shaped like a RawKernel or a RawModule; nothing imports CuPy here, and every attribute is
read duck-typed: one that a CuPy version lacks or that raises is unknown ("?").

Reading any of those properties compiles a kernel that was never compiled (NVRTC, on the
GPU), and CuPy keeps "compiled" in a field Python cannot read (RawKernel's `_kernel_cache`).
So a kernel is read only when the source it comes from is in CuPy's per-device memo of
compiled modules (`cupy._core.raw._get_raw_module`, reached through the garbage collector's
referents of that memoized function, as CuPy 12 to 14 build it) for the current device: a
kernel the callable launched is there, one it never launched is left alone, and where the
memo cannot be found (another CuPy, no device, CuPy not imported) nothing is read. An
`ElementwiseKernel` or `ReductionKernel` exposes no attributes and is not read.
The words, one line a kernel either side compiled:
`cupy scale_kernel: registers 16 -> 24, local memory 0 -> 64 bytes (spills), shared memory
0 -> 0 bytes, max threads per block 1024 -> 1024` ("(spills)" where head's local memory rose).
"""

from __future__ import annotations

import gc
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from pytest_gpuperf.explain.code.foreign_kernels import attribute, kernel_lines, moved

# `__global__ void name(` in a RawModule's source (after `extern "C"`, the symbol itself)
_GLOBAL_NAME = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(\w+)\s*\(")
Source = tuple[Any, Any, Any, Any, Any]  # code, file path, options, backend, cooperative groups


@dataclass(frozen=True)
class CupyKernelFacts:
    """What the driver says of one compiled CuPy kernel (None: it did not say)."""

    kernel: str
    registers: int | None = None
    local_bytes: int | None = None  # per thread
    shared_bytes: int | None = None  # static, per block
    max_threads_per_block: int | None = None

    def against(self, base: CupyKernelFacts) -> list[str]:
        """This kernel (head) against `base`, fact by fact: the parts of its line."""
        rose = (self.local_bytes or 0) > (base.local_bytes or 0)
        return [
            moved("registers", base.registers, self.registers),
            moved("local memory", base.local_bytes, self.local_bytes, "bytes")
            + (" (spills)" if rose else ""),
            moved("shared memory", base.shared_bytes, self.shared_bytes, "bytes"),
            moved("max threads per block", base.max_threads_per_block, self.max_threads_per_block),
        ]


def _count(value: Any) -> int | None:
    """A non-negative int, else None (CuPy gives -1 for an attribute the CUDA lacks)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _has_property(value: Any, name: str) -> bool:
    """Whether `value`'s class defines `name`, without reading it (reading compiles)."""
    return not isinstance(value, type) and any(name in vars(k) for k in type(value).__mro__)


def _is_raw_kernel(value: Any) -> bool:
    return _has_property(value, "num_regs") and _has_property(value, "attributes")


def _is_raw_module(value: Any) -> bool:
    return _has_property(value, "get_function") and _has_property(value, "get_global")


def _source(value: Any) -> Source:
    """What CuPy's module memo is keyed by that a RawKernel or RawModule lets Python read."""
    return (
        attribute(value, "code"),
        attribute(value, "file_path"),
        attribute(value, "options"),
        attribute(value, "backend"),
        bool(attribute(value, "enable_cooperative_groups")),
    )


def compiled_sources() -> frozenset[Source] | None:
    """The sources CuPy compiled (or loaded) on the current device in this process, from its
    module memo: {(device, (code, path, options, backend, translate_cucomplex, cooperative
    groups, jitify, name expressions, log stream)): module}. None where it cannot be read."""
    raw = sys.modules.get("cupy._core.raw")
    runtime = sys.modules.get("cupy_backends.cuda.api.runtime")  # cupy.cuda.runtime
    getter = attribute(raw, "_get_raw_module")
    if getter is None or runtime is None:
        return None
    try:
        device = runtime.getDevice()
        return frozenset(
            (args[0], args[1], args[2], args[3], bool(args[5]))
            for memo in _memos(getter)
            for place, args in list(memo)
            if place == device and args[8] is None  # a log stream makes another key
        )
    except Exception:  # CuPy's internals, a device error: unknown, so nothing is read
        return None


def _memos(getter: Any) -> list[dict[Any, Any]]:
    """The non-empty dicts keyed as CuPy's memo that `getter` holds within three steps of
    the garbage collector's referents: the memoizing closure (a Cython scope, or a Python
    closure's cells) and what it holds; dictionaries, strings, types and modules are not
    followed (a function's globals would lead everywhere)."""
    found: list[dict[Any, Any]] = []
    frontier = [getter]
    for _ in range(3):
        following = []
        for held in (r for holder in frontier for r in gc.get_referents(holder)):
            if isinstance(held, dict):
                if held and all(_memo_key(key) for key in list(held)):
                    found.append(held)
            elif not isinstance(held, str | type | ModuleType):
                following.append(held)
        frontier = following
    return found


def _memo_key(key: Any) -> bool:
    """(device, the nine arguments of _get_raw_module), as CuPy 12 to 14 memoize it."""
    return (
        isinstance(key, tuple)
        and len(key) == 2
        and isinstance(key[0], int)
        and isinstance(key[1], tuple)
        and len(key[1]) == 9
    )


def kernel_facts(label: str, kernel: Any) -> CupyKernelFacts:
    """The facts of one compiled RawKernel (`label`: its name)."""
    return CupyKernelFacts(
        kernel=label,
        registers=_count(attribute(kernel, "num_regs")),
        local_bytes=_count(attribute(kernel, "local_size_bytes")),
        shared_bytes=_count(attribute(kernel, "shared_size_bytes")),
        max_threads_per_block=_count(attribute(kernel, "max_threads_per_block")),
    )


def _module_kernels(module: Any) -> Iterable[tuple[str, Any]]:
    """(name, RawKernel) of each kernel of a compiled RawModule: its name expressions, or the
    `__global__` functions of its source; a name the module lacks is left out."""
    names = attribute(module, "name_expressions")
    if not isinstance(names, tuple):
        code = attribute(module, "code")
        names = tuple(dict.fromkeys(_GLOBAL_NAME.findall(code))) if isinstance(code, str) else ()
    for name in names:
        try:
            yield str(name), module.get_function(name)
        except Exception:  # a C++ name not exported as such: not a fact here
            continue


def cupy_facts(
    modules: Iterable[ModuleType], compiled: frozenset[Source] | None = None
) -> dict[str, CupyKernelFacts]:
    """{kernel name: facts} for every RawKernel (and RawModule kernel) in the modules' globals
    whose source CuPy compiled in this process (`compiled`: compiled_sources()'s)."""
    compiled = compiled_sources() if compiled is None else compiled
    facts: dict[str, CupyKernelFacts] = {}
    if not compiled:
        return facts
    for module in modules:
        for value in list(vars(module).values()):
            if _is_raw_kernel(value) and _source(value) in compiled:
                label = str(attribute(value, "name") or "?")
                facts[label] = kernel_facts(label, value)
            elif _is_raw_module(value) and _source(value) in compiled:
                for label, kernel in _module_kernels(value):
                    facts[label] = kernel_facts(label, kernel)
    return facts


def cupy_changes(
    head: Mapping[str, CupyKernelFacts], base: Mapping[str, CupyKernelFacts]
) -> list[str]:
    """One line per CuPy kernel either side compiled: head against base."""
    return kernel_lines("cupy", head, base, CupyKernelFacts.against)


__all__ = ["CupyKernelFacts", "compiled_sources", "cupy_changes", "cupy_facts", "kernel_facts"]
