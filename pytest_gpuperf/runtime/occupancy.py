"""Theoretical occupancy of a kernel on AMD CDNA2 (gfx90a) and CDNA3 (gfx940-gfx942) CUs.

The method is the one in the MI300X workload optimization guide ("Compute the occupancy of
a kernel", AMD ROCm documentation): waves per SIMD (EU) allowed by
the VGPRs, workgroups per CU = min(floor(waves_per_simd * 4 / waves_per_workgroup),
floor(65536 / LDS bytes)), occupancy = workgroups * waves_per_workgroup / 4 per SIMD. Its
facts: 4 SIMDs per CU, 512 VGPRs per SIMD lane, 64 KB of LDS per CU (same figures in
the AMD Triton Performance Optimization Guide, ROCm/triton wiki).

Two figures come from LLVM's AMDGPU backend instead, the compiler that allocates the
registers, and tests/compile/test_gfx942_asm.py checks both against clang-19's own
"; Occupancy:" for gfx90a and gfx942:
- at most 8 waves per SIMD (AMDGPUBaseInfo getMaxWavesPerEU for gfx90a and gfx94x), i.e.
  32 waves (2048 threads) per CU. The memory-bound-kernels blog's "1024 threads per CU" is
  the per-workgroup limit, not a per-CU one;
- VGPRs are allocated in blocks of 8 on these unified-register-file targets (the kernel
  descriptor's VGPR count is encoded in units of 8). The guide says "blocks of 16"; its own
  example (170 -> 176 -> 2 waves) holds either way, but 65-72 VGPRs give 7 waves, not 6,
  and 161-168 give 3, not 2.
SGPRs limit waves only above 100 per wave (800 per SIMD; LLVM getOccupancyWithNumSGPRs).
Not modelled: scratch (it limits waves only when the device's scratch pool is exhausted)
and LDS allocation granularity (neither the guide nor LLVM rounds LDS).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from pytest_gpuperf.errors import GpuPerfError
from pytest_gpuperf.runtime.amd_codeobject import AmdKernelMetadata, target_arch
from pytest_gpuperf.runtime.info import KernelResources

DEFAULT_BLOCK_THREADS = 256  # what kernels/ are launched with; reports may recompute


@dataclass(frozen=True)
class CuLimits:
    """The per-CU resources that bound how many waves can be resident."""

    family: str
    simds_per_cu: int = 4
    max_waves_per_simd: int = 8
    vgprs_per_simd_lane: int = 512
    vgpr_granule: int = 8
    lds_bytes_per_cu: int = 64 * 1024
    wave_size: int = 64

    @property
    def max_waves_per_cu(self) -> int:
        return self.simds_per_cu * self.max_waves_per_simd


CDNA2 = CuLimits("CDNA2")
CDNA3 = CuLimits("CDNA3")
CU_LIMITS: dict[str, CuLimits] = {
    "gfx90a": CDNA2,
    "gfx940": CDNA3,
    "gfx941": CDNA3,
    "gfx942": CDNA3,
}

# Waves per SIMD allowed by SGPRs per wave on gfx9 (LLVM getOccupancyWithNumSGPRs).
_SGPR_WAVES = ((80, 10), (88, 9), (100, 8))
_SGPR_WAVES_ABOVE = 7


@dataclass(frozen=True)
class Occupancy:
    """Resident work on one CU for one kernel and workgroup size.

    `waves_per_simd` is the most waves any SIMD holds when the resident waves spread evenly
    (LLVM's "Occupancy"); `fraction` is resident waves over the CU's maximum (32).
    `limiter` names the resource that allows the fewest workgroups: "waves" (the hardware
    maximum), "vgprs", "sgprs" or "lds"; `blocks_by_limit` gives each one's bound ("lds"
    only when the kernel uses LDS).
    """

    waves_per_simd: int
    blocks_per_cu: int
    waves_per_block: int
    fraction: float
    limiter: str
    blocks_by_limit: Mapping[str, int]


def cu_limits(arch: str) -> CuLimits | None:
    """The limits for "gfx942" (feature suffixes allowed), None for an unmodelled arch."""
    return CU_LIMITS.get(target_arch(arch))


def vgpr_waves_per_simd(limits: CuLimits, vgprs: int) -> int:
    """Waves per SIMD that `vgprs` per work-item allow (0: the kernel cannot run)."""
    if vgprs <= limits.vgpr_granule:
        return limits.max_waves_per_simd
    allocated = math.ceil(vgprs / limits.vgpr_granule) * limits.vgpr_granule
    return min(limits.max_waves_per_simd, limits.vgprs_per_simd_lane // allocated)


def sgpr_waves_per_simd(limits: CuLimits, sgprs: int) -> int:
    """Waves per SIMD that `sgprs` per wave allow."""
    for most, waves in _SGPR_WAVES:
        if sgprs <= most:
            return min(limits.max_waves_per_simd, waves)
    return min(limits.max_waves_per_simd, _SGPR_WAVES_ABOVE)


def register_waves_per_simd(limits: CuLimits, vgprs: int, sgprs: int) -> int:
    """Waves per SIMD the registers allow, before workgroups and LDS are considered."""
    return min(vgpr_waves_per_simd(limits, vgprs), sgpr_waves_per_simd(limits, sgprs))


def occupancy(
    limits: CuLimits,
    *,
    block_threads: int,
    vgprs: int,
    sgprs: int = 0,
    lds_bytes: int = 0,
) -> Occupancy:
    """Theoretical occupancy of workgroups of `block_threads` (the guide's method)."""
    if block_threads < 1:
        raise GpuPerfError(f"a workgroup needs at least one thread, got {block_threads}")
    waves_per_block = math.ceil(block_threads / limits.wave_size)
    simds = limits.simds_per_cu

    def blocks_for(waves_per_simd: int) -> int:
        return simds * waves_per_simd // waves_per_block

    blocks_by_limit = {
        "waves": blocks_for(limits.max_waves_per_simd),
        "vgprs": blocks_for(vgpr_waves_per_simd(limits, vgprs)),
        "sgprs": blocks_for(sgpr_waves_per_simd(limits, sgprs)),
    }
    if lds_bytes > 0:
        blocks_by_limit["lds"] = limits.lds_bytes_per_cu // lds_bytes
    limiter = min(blocks_by_limit, key=lambda name: blocks_by_limit[name])  # first of equals
    blocks = blocks_by_limit[limiter]
    resident_waves = blocks * waves_per_block
    return Occupancy(
        waves_per_simd=math.ceil(resident_waves / simds),
        blocks_per_cu=blocks,
        waves_per_block=waves_per_block,
        fraction=resident_waves / limits.max_waves_per_cu,
        limiter=limiter,
        blocks_by_limit=blocks_by_limit,
    )


def kernel_resources(
    kernel: AmdKernelMetadata,
    arch: str,
    block_threads: int = DEFAULT_BLOCK_THREADS,
    dynamic_lds_bytes: int = 0,
) -> KernelResources:
    """A compiled kernel's resource report, with occupancy for `block_threads` when the
    arch is modelled (the block is capped at the kernel's max_flat_workgroup_size)."""
    block = min(block_threads, kernel.max_flat_workgroup_size)
    limits = cu_limits(arch)
    report = KernelResources(
        registers=kernel.vgpr_count,
        sgprs=kernel.sgpr_count,
        shared_bytes=kernel.lds_bytes,
        scratch_bytes=kernel.scratch_bytes,
        spill_count=kernel.spill_count,
        max_threads_per_block=kernel.max_flat_workgroup_size,
        block_threads=block,
    )
    if limits is None:
        return report
    result = occupancy(
        limits,
        block_threads=block,
        vgprs=kernel.vgpr_count,
        sgprs=kernel.sgpr_count,
        lds_bytes=kernel.lds_bytes + dynamic_lds_bytes,
    )
    return replace(
        report,
        occupancy=result.fraction,
        occupancy_limiter=result.limiter,
        waves_per_simd=result.waves_per_simd,
        blocks_per_cu=result.blocks_per_cu,
    )
