"""Code facts of the Triton kernels a callable compiled, head against base.

A `gpu_bench.run(fn)` measurement has no kernel the plugin built, but a Triton kernel it runs
was compiled by Triton, which keeps the result on the `@triton.jit` function: its per-device
cache of compiled kernels (`device_caches` in Triton 3.x, `cache` before), each with the
registers a thread uses (`n_regs`), the registers spilled (`n_spills`), its metadata (the
shared memory it launches with, `shared`, bytes; `num_warps`; the target, `GPUTarget(backend,
arch, warp_size)` in Triton 3.x) and its code (`asm`: "ptx" and "cubin" for NVIDIA, "amdgcn"
and "hsaco" for AMD). From these: the occupancy of its block (`num_warps` warps) by CUDA's
occupancy rules for the arch (nvidia_occupancy.py) or, on AMD, the CDNA model
(runtime/occupancy.py) from the code object's VGPRs, SGPRs and LDS; and its global loads
and stores by width, counted in the PTX or the AMD assembly (memory_ops.py). Head's and
base's functions are different objects (session/callable_base.py loads base's modules apart),
so each side's caches hold that side's builds. Found by looking through the repository
modules' globals for objects that carry such a cache (an autotuner or a heuristics wrapper is
followed to the function it wraps through `.fn`); nothing imports Triton here, and every
attribute is read duck-typed: one a Triton version lacks is unknown ("?"), never an error.
An `@triton.autotune` wrapper also says which configuration it settled on (`best_config`):
tuning is never timed (it happens in a callable's first, untimed call), but where head and
base settle on different configurations the line says so, first.
The words, one line a kernel:
`triton copy_kernel: registers 16 -> 18, spills 0 -> 0, shared memory 0 -> 0 bytes,
occupancy 100% -> 75% (registers), loads 2 b128 -> 3 b128, stores 2 b128 -> 2 b128`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any

from pytest_gpuperf.errors import GpuPerfError
from pytest_gpuperf.explain.code.foreign_kernels import attribute, kernel_lines, moved
from pytest_gpuperf.explain.code.memory_ops import Widths, count_amd, count_ptx, widths_text
from pytest_gpuperf.explain.code.nvidia_occupancy import nvidia_occupancy
from pytest_gpuperf.gate.static.asm import kernel_asm
from pytest_gpuperf.runtime.amd_codeobject import loaded_kernel
from pytest_gpuperf.runtime.occupancy import cu_limits, occupancy

CUDA_WARP, AMD_WAVE = 32, 64  # where a Triton version's target does not say its warp size


@dataclass(frozen=True)
class TritonKernelFacts:
    """What Triton says of one compiled kernel (None: it did not say). `occupancy` is the
    fraction of the SM's (CU's) warps its blocks can hold, `occupancy_limiter` the resource
    that bounds it; `loads`/`stores` count global memory instructions in its code by width."""

    function: str
    registers: int | None = None
    spills: int | None = None
    shared_bytes: int | None = None
    occupancy: float | None = None
    occupancy_limiter: str = ""
    loads: Widths | None = None
    stores: Widths | None = None
    # the configuration an `@triton.autotune` settled on ("BLOCK_N=2048, num_warps=8, ..."):
    # a tile size is a constexpr, which no compiled kernel's metadata keeps; None: not tuned
    config: str | None = None

    def against(self, base: TritonKernelFacts) -> list[str]:
        """This kernel (head) against `base`, fact by fact: the parts of its line."""
        tuned = []
        if base.config is not None or self.config is not None:  # the autotuner's choice
            fixed = "fixed (not autotuned)"
            old, new = base.config or fixed, self.config or fixed
            tuned = [f"autotuned config {old} (same)" if old == new else f"config {old} -> {new}"]
        return [
            *tuned,
            moved("registers", base.registers, self.registers),
            moved("spills", base.spills, self.spills),
            moved("shared memory", base.shared_bytes, self.shared_bytes, "bytes"),
            _occupancy_change(base, self),
            f"loads {_widths(base.loads)} -> {_widths(self.loads)}",
            f"stores {_widths(base.stores)} -> {_widths(self.stores)}",
        ]


def _jit_function(value: Any) -> Any | None:
    """The JIT function behind `value` (itself, or what an autotuner wraps), None if none."""
    for _ in range(4):  # autotune(heuristics(jit(f))) at most a few levels deep
        if _compiled_of(value):
            return value
        value = attribute(value, "fn")
        if value is None:
            return None
    return None


def _tuned_config(value: Any) -> str | None:
    """The configuration the autotuner `value` (or one it wraps) settled on last, in words;
    None where `value` is no autotuner (Triton's `Autotuner` keeps its `configs`, the chosen
    `best_config` and a `cache` of key -> config; FlagGems' tuner is one too)."""
    for _ in range(4):
        configs, cache = attribute(value, "configs"), attribute(value, "cache")
        if isinstance(configs, list | tuple) and isinstance(cache, Mapping):
            chosen = attribute(value, "best_config")
            if chosen is None and cache:
                chosen = list(cache.values())[-1]
            return "not tuned yet" if chosen is None else _config_words(chosen)
        value = attribute(value, "fn")
        if value is None:
            return None
    return None


def _config_words(config: Any) -> str:
    """'BLOCK_N=2048, num_warps=8, num_stages=2' of a triton.Config (its str where it is
    another kind of object)."""
    kwargs = attribute(config, "kwargs")
    if not isinstance(kwargs, Mapping):
        return " ".join(str(config).split())[:80]
    parts = [f"{key}={kwargs[key]}" for key in sorted(kwargs)]
    for name in ("num_warps", "num_stages", "num_ctas", "maxnreg"):
        value = attribute(config, name)
        if value is not None and not (name == "num_ctas" and value == 1):
            parts.append(f"{name}={value}")
    return ", ".join(parts)


def _compiled_of(function: Any) -> list[Any]:
    """The compiled kernels in a JIT function's cache, oldest first."""
    found: list[Any] = []
    caches = attribute(function, "device_caches")
    if isinstance(caches, Mapping):
        for entry in caches.values():
            kernels = entry[0] if isinstance(entry, tuple) and entry else entry
            if isinstance(kernels, Mapping):
                found += list(kernels.values())
    cache = attribute(function, "cache")
    if not found and isinstance(cache, Mapping):
        for per_device in cache.values():
            if isinstance(per_device, Mapping):
                found += [k for k in per_device.values() if attribute(k, "metadata") is not None]
    return [k for k in found if any(attribute(k, a) is not None for a in ("metadata", "n_regs"))]


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _field(holder: Any, name: str) -> Any:
    """`holder.name`, or `holder[name]` for a dict (Triton 2.x kept metadata in one)."""
    if isinstance(holder, Mapping):
        try:
            return holder.get(name)
        except Exception:  # a foreign mapping: unknown, never an error here
            return None
    return attribute(holder, name)


def _target(metadata: Any) -> tuple[str, str, int | None]:
    """(backend "cuda" or "hip", arch "sm_90" or "gfx942", warp size) of a compiled kernel:
    Triton 3.x's `GPUTarget(backend='cuda', arch=90, warp_size=32)`, a (backend, arch,
    warp size) tuple or dict, or a bare compute capability (90); ("", "", None) if none."""
    target = _field(metadata, "target")
    if target is None:
        target = _field(metadata, "capability")
    if isinstance(target, list | tuple):
        backend, arch, warp = (*target, None, None, None)[:3]
    elif isinstance(target, int | str):
        backend, arch, warp = "", target, None
    else:
        backend, arch = _field(target, "backend"), _field(target, "arch")
        warp = _field(target, "warp_size")
    if isinstance(arch, int) or (isinstance(arch, str) and arch.isdigit()):
        return "cuda", f"sm_{arch}", _int(warp)
    if isinstance(arch, str) and arch.startswith("gfx"):
        return "hip", arch.split(":", 1)[0], _int(warp)
    return str(backend or ""), "", _int(warp)


def _text(code: Any) -> str | None:
    if isinstance(code, bytes):
        return code.decode("utf-8", "replace")
    return code if isinstance(code, str) else None


def _memory(asm: Any, name: str) -> tuple[Widths | None, Widths | None]:
    """Global loads and stores of the kernel's PTX, or of its AMD assembly (None: neither)."""
    ptx = _text(_field(asm, "ptx"))
    if ptx:
        return count_ptx(ptx)
    amdgcn = _text(_field(asm, "amdgcn"))
    if amdgcn and name:
        try:
            return count_amd(kernel_asm(amdgcn, name).instructions())
        except GpuPerfError:  # KernelNotFound: the assembly names no such kernel
            return None, None
    return None, None


def _occupancy(
    compiled: Any, metadata: Any, name: str, registers: int | None, shared: int | None
) -> tuple[float | None, str]:
    """(fraction, limiter) for blocks of `num_warps` warps; (None, "") where the arch has
    no model here or a fact it needs is missing."""
    backend, arch, warp = _target(metadata)
    warps = _int(_field(metadata, "num_warps")) or _int(_field(compiled, "num_warps"))
    if not warps:
        return None, ""
    if backend == "cuda" and registers is not None:
        found = nvidia_occupancy(
            arch,
            registers=registers,
            shared_bytes=shared or 0,
            block_threads=warps * (warp or CUDA_WARP),
        )
        return (found.fraction, found.limiter) if found else (None, "")
    hsaco = _field(_field(compiled, "asm"), "hsaco")
    limits = cu_limits(arch) if backend == "hip" and arch else None
    if limits is None or not isinstance(hsaco, bytes) or not name:
        return None, ""
    try:
        kernel = loaded_kernel(hsaco, name)  # the code object's VGPRs, SGPRs and static LDS
        if kernel is None:
            return None, ""
        # Triton passes `shared` as the launch's dynamic LDS; its kernels reach it through an
        # extern array, so the static LDS is 0 or the same memory, never more of it
        amd = occupancy(
            limits,
            block_threads=warps * (warp or kernel.wavefront_size or AMD_WAVE),
            vgprs=kernel.vgpr_count,
            sgprs=kernel.sgpr_count,
            lds_bytes=max(kernel.lds_bytes, shared or 0),
        )
    except GpuPerfError:  # a code object this reader does not know: occupancy unknown
        return None, ""
    return amd.fraction, amd.limiter


def compiled_facts(label: str, compiled: Any) -> TritonKernelFacts:
    """The facts of one compiled kernel (`label`: the JIT function's name)."""
    metadata = _field(compiled, "metadata")
    shared = _int(_field(metadata, "shared"))
    if shared is None:
        shared = _int(_field(compiled, "shared"))  # Triton 2.x kept it on the kernel too
    registers = _int(_field(compiled, "n_regs"))
    name = _field(metadata, "name") or _field(compiled, "name")
    name = name if isinstance(name, str) else ""
    fraction, limiter = _occupancy(compiled, metadata, name, registers, shared)
    loads, stores = _memory(_field(compiled, "asm"), name)
    return TritonKernelFacts(
        function=label,
        registers=registers,
        spills=_int(_field(compiled, "n_spills")),
        shared_bytes=shared,
        occupancy=fraction,
        occupancy_limiter=limiter,
        loads=loads,
        stores=stores,
    )


def triton_facts(modules: Iterable[ModuleType]) -> dict[str, TritonKernelFacts]:
    """{function name: facts of its latest compiled kernel} for every Triton JIT function in
    the modules' globals that has compiled at least once."""
    facts: dict[str, TritonKernelFacts] = {}
    for module in modules:
        for name, value in list(vars(module).items()):
            function = _jit_function(value)
            if function is None:
                continue
            label = str(attribute(attribute(function, "fn"), "__name__") or name)
            found = compiled_facts(label, _compiled_of(function)[-1])
            facts[label] = replace(found, config=_tuned_config(value))
    return facts


def triton_changes(
    head: Mapping[str, TritonKernelFacts], base: Mapping[str, TritonKernelFacts]
) -> list[str]:
    """One line per Triton kernel either side compiled: head against base."""
    return kernel_lines("triton", head, base, TritonKernelFacts.against)


def _occupancy_change(base: TritonKernelFacts, head: TritonKernelFacts) -> str:
    """'occupancy 100% -> 75% (registers)': the limiter is head's, said where the two differ."""
    old, new = base.occupancy, head.occupancy
    text = f"occupancy {_percent(old)} -> {_percent(new)}"
    moved = old is not None and new is not None and round(old, 4) != round(new, 4)
    return text + (f" ({head.occupancy_limiter})" if moved and head.occupancy_limiter else "")


def _percent(value: float | None) -> str:
    return "?" if value is None else f"{value:.0%}"


def _widths(value: Widths | None) -> str:
    return "?" if value is None else widths_text(value)


__all__ = ["TritonKernelFacts", "compiled_facts", "triton_changes", "triton_facts"]
