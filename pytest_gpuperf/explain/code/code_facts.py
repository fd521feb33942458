"""What the compiled code of one kernel says, for one launch shape: `CodeFacts`.

Registers per thread, local memory (the stack frame or scratch that spills land in), static
shared memory, the largest block it can launch, the theoretical occupancy of the launch's
block, and its global loads and stores by width (memory_ops.py). Each group of facts says
where it came from (`sources`): the driver's function attributes where a GPU loaded the
code, else the compiler's own report (ptxas's `-v` report for NVIDIA, the code object's
metadata for AMD) and the occupancy rules of the device's documentation. A fact nobody could
give is None, and `notes` says why: nothing is guessed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_gpuperf.explain.code.memory_ops import (
    DisassemblyFailed,
    Widths,
    count_amd,
    count_sass,
    disassemble,
    sass_function,
)
from pytest_gpuperf.explain.code.nvidia_occupancy import max_threads_per_block, nvidia_occupancy
from pytest_gpuperf.explain.code.ptxas import parse_ptxas_log
from pytest_gpuperf.gate.static.asm import kernel_asm
from pytest_gpuperf.gate.static.build import StaticBuild
from pytest_gpuperf.gate.static.facts import kernel_facts
from pytest_gpuperf.runtime.fingerprint import cubin_launch_bound, kernel_fingerprint
from pytest_gpuperf.runtime.info import KernelResources

# What each group of facts is called in `sources`
RESOURCES, OCCUPANCY, MEMORY = "resources", "occupancy", "memory instructions"
DRIVER_CUDA = "the driver (cuFuncGetAttribute)"
OCCUPANCY_CUDA = "the driver (cuOccupancyMaxActiveBlocksPerMultiprocessor)"
DRIVER_HIP = "the HIP runtime (hipFuncGetAttribute, or the loaded code object's metadata)"


@dataclass(frozen=True)
class CodeFacts:
    """One kernel's compiled facts for a launch of `block_threads`-thread blocks (None:
    unknown, `notes` says why). `local_bytes` is per thread; `spill_bytes` what the compiler
    spilled into it (NVIDIA: ptxas's spill stores; AMD: 4 bytes per spilled VGPR).
    `global_loads`/`global_stores` count instructions in the code by width."""

    kernel: str
    arch: str
    toolchain: str
    fingerprint: str
    registers: int | None = None
    local_bytes: int | None = None
    spill_bytes: int | None = None
    shared_bytes: int | None = None
    max_threads_per_block: int | None = None
    block_threads: int | None = None
    occupancy: float | None = None
    occupancy_limiter: str = ""
    global_loads: Widths | None = None
    global_stores: Widths | None = None
    sources: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values: widths as {"b32": 3}, sources as {"resources": "..."}."""
        out: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name in ("global_loads", "global_stores", "sources"):
                value = None if value is None else dict(value)
            elif isinstance(value, tuple):
                value = list(value)
            out[field.name] = value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CodeFacts:
        """The inverse of `to_dict` (unknown keys ignored, so newer reports stay readable)."""
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            if field.name not in data:
                continue
            value = data[field.name]
            if field.name in ("global_loads", "global_stores", "sources"):
                value = None if value is None else tuple((str(k), v) for k, v in value.items())
            elif field.name == "notes":
                value = tuple(value)
            values[field.name] = value
        return cls(**values)


def nvidia_facts(
    cubin: bytes,
    ptxas_log: str,
    kernel: str,
    arch: str,
    *,
    toolchain: str,
    block_threads: int | None,
    dynamic_shared_bytes: int = 0,
    driver: KernelResources | None = None,
    driver_source: str = DRIVER_CUDA,
) -> CodeFacts:
    """Facts of `kernel` in a CUBIN built with `-Xptxas -v` (`ptxas_log`: NVRTC's log).

    Resources from ptxas's report, or from the driver's attributes (`driver`: the loaded
    kernel's KernelResources) where a GPU loaded it; occupancy from the driver's answer for
    the launch's block where it gave one, else from nvidia_occupancy.py; memory
    instructions from nvdisasm's SASS (left unknown, with the fix, where nvdisasm is not
    installed)."""
    notes: list[str] = []
    sources: dict[str, str] = {}
    report = parse_ptxas_log(ptxas_log).get(kernel)
    registers = local = spills = shared = None
    if report is not None:
        registers, local = report.registers, report.stack_bytes
        spills, shared = report.spill_store_bytes, report.shared_bytes
        sources[RESOURCES] = f"{toolchain}'s ptxas -v report"
    else:
        notes.append(f"ptxas's -v report names no kernel {kernel!r}")
    launch_bound = cubin_launch_bound(cubin, kernel)
    most = max_threads_per_block(arch, registers=registers or 0, launch_bound=launch_bound)
    if driver is not None and driver.registers is not None:
        registers, local = driver.registers, driver.scratch_bytes
        shared, most = driver.shared_bytes, driver.max_threads_per_block or most
        sources[RESOURCES] = driver_source + (", spills from ptxas -v" if report else "")
    occupancy, limiter = None, ""
    launched = driver is not None and driver.occupancy is not None and driver.block_threads
    if launched and driver is not None and block_threads in (None, driver.block_threads):
        block_threads = driver.block_threads
        occupancy, limiter = driver.occupancy, driver.occupancy_limiter or ""
        sources[OCCUPANCY] = OCCUPANCY_CUDA
    if occupancy is None and block_threads and registers is not None:
        found = nvidia_occupancy(
            arch,
            registers=registers,
            shared_bytes=(shared or 0) + dynamic_shared_bytes,
            block_threads=block_threads,
        )
        if found is not None:
            occupancy, limiter = found.fraction, found.limiter
            sources[OCCUPANCY] = f"the {arch} limits of CUDA's occupancy rules"
        else:
            notes.append(f"occupancy unknown: no SM limits for {arch}")
    loads = stores = None
    try:
        sass, tool = disassemble(cubin)
    except DisassemblyFailed as failure:
        notes.append(f"memory instructions unknown: {failure}")
    else:
        text = sass_function(sass, kernel)
        if text:
            loads, stores = count_sass(text)
            sources[MEMORY] = f"SASS ({tool})"
        else:
            notes.append(f"memory instructions unknown: {tool} shows no function {kernel!r}")
    return CodeFacts(
        kernel=kernel,
        arch=arch,
        toolchain=toolchain,
        fingerprint=kernel_fingerprint(cubin, kernel).digest,
        registers=registers,
        local_bytes=local,
        spill_bytes=spills,
        shared_bytes=shared,
        max_threads_per_block=most,
        block_threads=block_threads,
        occupancy=occupancy,
        occupancy_limiter=limiter,
        global_loads=loads,
        global_stores=stores,
        sources=tuple(sources.items()),
        notes=tuple(notes),
    )


def amd_facts(
    build: StaticBuild,
    kernel: str,
    *,
    block_threads: int | None,
    dynamic_shared_bytes: int = 0,
    driver: KernelResources | None = None,
) -> CodeFacts:
    """Facts of `kernel` in a clang build for a gfx arch: the static gate's (gate/static/facts.py:
    the code object's metadata, LLVM's comments, the CDNA occupancy model) and the global
    memory instructions of its assembly. `driver`: hipFuncGetAttributes' resources of the
    kernel a real AMD GPU loaded, which win over the clang build's where given."""
    kwargs = {"block_threads": block_threads} if block_threads else {}
    static = kernel_facts(build, kernel, dynamic_lds_bytes=dynamic_shared_bytes, **kwargs)
    loads, stores = count_amd(kernel_asm(build.asm, kernel).instructions())
    toolchain = static.toolchain
    sources = {
        RESOURCES: f"the code object's metadata ({toolchain})",
        MEMORY: f"{build.arch} assembly ({build.compiler})",
    }
    registers, local = static.vgprs, static.scratch_bytes
    shared, most = static.static_lds_bytes, static.max_block_threads
    if driver is not None and driver.registers is not None:
        registers, local = driver.registers, driver.scratch_bytes
        shared, most = driver.shared_bytes, driver.max_threads_per_block or most
        sources[RESOURCES] = DRIVER_HIP
    notes = []
    if static.occupancy is not None:
        sources[OCCUPANCY] = f"the CDNA occupancy model for {build.arch}"
    else:
        notes.append(f"occupancy unknown: the CDNA model does not cover {build.arch}")
    if static.calls:
        notes.append(
            f"calls {', '.join(static.calls)}: unlinked device-library functions, whose "
            "calling convention costs registers a linked build would not use"
        )
    return CodeFacts(
        kernel=kernel,
        arch=build.arch,
        toolchain=toolchain,
        fingerprint=static.fingerprint,
        registers=registers,
        local_bytes=local,
        spill_bytes=4 * static.vgpr_spills,
        shared_bytes=shared,
        max_threads_per_block=most,
        block_threads=static.block_threads,
        occupancy=static.occupancy,
        occupancy_limiter=static.occupancy_limiter or "",
        global_loads=loads,
        global_stores=stores,
        sources=tuple(sources.items()),
        notes=tuple(notes),
    )
