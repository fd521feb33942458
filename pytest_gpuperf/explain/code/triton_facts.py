"""Code facts of the Triton kernels a callable compiled, head against base.

A `gpu_bench.run(fn)` measurement has no kernel the plugin built, but a Triton kernel it runs
was compiled by Triton, which keeps the result on the `@triton.jit` function: its per-device
cache of compiled kernels (`device_caches` in Triton 3.x, `cache` before), each with the
registers a thread uses (`n_regs`), the registers spilled (`n_spills`) and the shared memory
it was compiled for (`metadata.shared`, bytes). Head's and base's functions are different
objects (session/callable_base.py loads base's modules apart), so each side's caches hold
that side's builds. Found by looking through the repository modules' globals for objects that
carry such a cache (an autotuner or a heuristics wrapper is followed to the function it wraps
through `.fn`); nothing imports Triton here. The words:
`triton copy_kernel: registers 16 -> 18, spills 0 -> 0, shared memory 0 -> 0 bytes`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class TritonKernelFacts:
    """What Triton says of one compiled kernel (None: it did not say)."""

    function: str
    registers: int | None = None
    spills: int | None = None
    shared_bytes: int | None = None


def _jit_function(value: Any) -> Any | None:
    """The JIT function behind `value` (itself, or what an autotuner wraps), None if none."""
    for _ in range(4):  # autotune(heuristics(jit(f))) at most a few levels deep
        if _compiled_of(value):
            return value
        value = getattr(value, "fn", None)
        if value is None:
            return None
    return None


def _compiled_of(function: Any) -> list[Any]:
    """The compiled kernels in a JIT function's cache, oldest first."""
    found: list[Any] = []
    caches = getattr(function, "device_caches", None)
    if isinstance(caches, Mapping):
        for entry in caches.values():
            kernels = entry[0] if isinstance(entry, tuple) and entry else entry
            if isinstance(kernels, Mapping):
                found += list(kernels.values())
    cache = getattr(function, "cache", None)
    if not found and isinstance(cache, Mapping):
        for per_device in cache.values():
            if isinstance(per_device, Mapping):
                found += [k for k in per_device.values() if hasattr(k, "metadata")]
    return [k for k in found if hasattr(k, "metadata") or hasattr(k, "n_regs")]


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def triton_facts(modules: Iterable[ModuleType]) -> dict[str, TritonKernelFacts]:
    """{function name: facts of its latest compiled kernel} for every Triton JIT function in
    the modules' globals that has compiled at least once."""
    facts: dict[str, TritonKernelFacts] = {}
    for module in modules:
        for name, value in list(vars(module).items()):
            function = _jit_function(value)
            if function is None:
                continue
            latest = _compiled_of(function)[-1]
            metadata = getattr(latest, "metadata", None)
            shared = getattr(metadata, "shared", None)
            if shared is None and isinstance(metadata, Mapping):
                shared = metadata.get("shared")
            label = str(getattr(getattr(function, "fn", None), "__name__", "") or name)
            facts[label] = TritonKernelFacts(
                function=label,
                registers=_int(getattr(latest, "n_regs", None)),
                spills=_int(getattr(latest, "n_spills", None)),
                shared_bytes=_int(shared),
            )
    return facts


def triton_changes(
    head: Mapping[str, TritonKernelFacts], base: Mapping[str, TritonKernelFacts]
) -> list[str]:
    """One line per Triton kernel either side compiled: head against base."""
    lines = []
    for name in sorted({*head, *base}):
        ours, theirs = head.get(name), base.get(name)
        if ours is None or theirs is None:
            lines.append(
                f"triton {name}: compiled on the {'base' if ours is None else 'head'} side only"
            )
            continue
        parts = [
            f"{what} {_shown(getattr(theirs, field))} -> {_shown(getattr(ours, field))}"
            for what, field in (
                ("registers", "registers"),
                ("spills", "spills"),
                ("shared memory", "shared_bytes"),
            )
        ]
        lines.append(f"triton {name}: {', '.join(parts)} bytes")
    return lines


def _shown(value: int | None) -> str:
    return "?" if value is None else str(value)


__all__ = ["TritonKernelFacts", "triton_changes", "triton_facts"]
