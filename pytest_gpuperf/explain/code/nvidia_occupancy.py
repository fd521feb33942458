"""Theoretical occupancy of an NVIDIA kernel from its registers, shared memory and block size,
where no GPU answers cuOccupancyMaxActiveBlocksPerMultiprocessor.

The limits per compute capability are those of the CUDA C++ Programming Guide's "Technical
Specifications per Compute Capability" table; the allocation rules (registers per warp in
units of 256, shared memory in units of 128 bytes plus 1 KB the system reserves per block)
are the CUDA occupancy calculator's. On an H100 the driver's own answer is used instead, and
tests/gpu checks that the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SmLimits:
    max_threads: int
    max_blocks: int
    registers: int
    shared_bytes: int  # the most shared memory one SM can give its blocks
    reserved_shared_bytes: int = 1024
    warp: int = 32
    register_unit: int = 256  # registers are allocated per warp in these units
    shared_unit: int = 128


SM_LIMITS = {
    "sm_80": SmLimits(2048, 32, 65536, 167936),
    "sm_86": SmLimits(1536, 16, 65536, 102400),
    "sm_89": SmLimits(1536, 24, 65536, 102400),
    "sm_90": SmLimits(2048, 32, 65536, 233472),
}


@dataclass(frozen=True)
class NvidiaOccupancy:
    fraction: float  # resident warps / the SM's maximum
    blocks_per_sm: int
    limiter: str  # "warps", "blocks", "registers", "shared memory"


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def nvidia_occupancy(
    arch: str, *, registers: int, shared_bytes: int, block_threads: int
) -> NvidiaOccupancy | None:
    """The occupancy of `block_threads`-thread blocks using `registers` per thread and
    `shared_bytes` of shared memory per block (static + dynamic) on `arch` (None for an
    arch the table does not hold, or a block no SM can run)."""
    limits = SM_LIMITS.get(arch)
    if limits is None or block_threads <= 0:
        return None
    warps_per_block = -(-block_threads // limits.warp)
    max_warps = limits.max_threads // limits.warp
    bounds = {
        "warps": max_warps // warps_per_block,
        "blocks": limits.max_blocks,
    }
    if registers > 0:
        per_warp = _round_up(registers * limits.warp, limits.register_unit)
        bounds["registers"] = (limits.registers // per_warp) // warps_per_block
    if shared_bytes > 0:
        per_block = _round_up(shared_bytes, limits.shared_unit) + limits.reserved_shared_bytes
        bounds["shared memory"] = limits.shared_bytes // per_block
    limiter = min(bounds, key=lambda name: bounds[name])
    blocks = bounds[limiter]
    if blocks <= 0:
        return None
    return NvidiaOccupancy(blocks * warps_per_block / max_warps, blocks, limiter)


def max_threads_per_block(arch: str, *, registers: int, launch_bound: int | None) -> int | None:
    """The largest block the kernel can launch with (what the driver's
    CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK says): 1024, its __launch_bounds__, or fewer where
    its registers would not fit one SM."""
    limits = SM_LIMITS.get(arch)
    if limits is None:
        return None
    most = min(1024, launch_bound or 1024)
    if registers > 0:
        per_warp = _round_up(registers * limits.warp, limits.register_unit)
        most = min(most, (limits.registers // per_warp) * limits.warp)
    return most
