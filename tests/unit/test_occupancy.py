"""The CDNA2/CDNA3 occupancy rules (AMD ROCm documentation, "AMD Instinct MI300X workload
optimization", section "Compute the occupancy of a kernel"; VGPR granule and wave limit checked
against LLVM in tests/compile)."""

from __future__ import annotations

import pytest

from pytest_gpuperf.errors import GpuPerfError
from pytest_gpuperf.runtime.amd_codeobject import AmdKernelMetadata
from pytest_gpuperf.runtime.occupancy import (
    CDNA2,
    CDNA3,
    cu_limits,
    kernel_resources,
    occupancy,
    sgpr_waves_per_simd,
    vgpr_waves_per_simd,
)


def test_guide_example_170_vgprs_round_to_176_and_allow_two_waves():
    # "If the current VGPR usage is 170, it will be rounded up to 176 ... the occupancy is
    # limited to 2 waves per EU because 176 x 3 > 512."
    assert vgpr_waves_per_simd(CDNA3, 170) == 2


@pytest.mark.parametrize(
    ("vgprs", "waves"),
    [(0, 8), (1, 8), (64, 8), (65, 7), (72, 7), (73, 6), (80, 6), (96, 5), (128, 4),
     (129, 3), (168, 3), (169, 2), (256, 2), (257, 1), (512, 1), (513, 0)],
)  # fmt: skip
def test_vgpr_waves_per_simd(vgprs, waves):
    assert vgpr_waves_per_simd(CDNA3, vgprs) == waves


@pytest.mark.parametrize(("sgprs", "waves"), [(16, 8), (100, 8), (101, 7), (108, 7)])
def test_sgprs_limit_only_above_100(sgprs, waves):
    assert sgpr_waves_per_simd(CDNA3, sgprs) == waves


def test_guide_formula_workgroups_per_cu():
    # occ = min(floor(occ_vgpr * 4 / nW), occ_lds) * nW / 4 with occ_vgpr = 4 (128 VGPRs),
    # nW = 4 (256 threads), occ_lds = floor(65536 / 20000) = 3  ->  3 * 4 / 4 = 3 waves/EU
    result = occupancy(CDNA3, block_threads=256, vgprs=128, lds_bytes=20000)
    assert result.blocks_by_limit == {"waves": 8, "vgprs": 4, "sgprs": 8, "lds": 3}
    assert (result.blocks_per_cu, result.waves_per_simd, result.limiter) == (3, 3, "lds")
    assert result.fraction == pytest.approx(12 / 32)


def test_a_1024_thread_workgroup_needs_all_waves_on_one_cu():
    # 65 VGPRs allow 7 waves per SIMD = 28 per CU: only one 16-wave workgroup fits
    result = occupancy(CDNA3, block_threads=1024, vgprs=65)
    assert (result.blocks_per_cu, result.waves_per_simd, result.limiter) == (1, 4, "vgprs")
    assert result.fraction == 0.5


def test_a_workgroup_that_cannot_fit_has_zero_occupancy():
    result = occupancy(CDNA3, block_threads=1024, vgprs=170)  # 8 waves per CU < 16
    assert (result.blocks_per_cu, result.fraction, result.limiter) == (0, 0.0, "vgprs")


def test_uneven_workgroups_leave_waves_unused():
    result = occupancy(CDNA3, block_threads=192, vgprs=16)  # 3 waves: 10 workgroups = 30
    assert (result.blocks_per_cu, result.waves_per_simd) == (10, 8)
    assert result.fraction == pytest.approx(30 / 32)
    assert result.limiter == "waves"


def test_single_wave_workgroups_limited_by_lds_spread_over_simds():
    result = occupancy(CDNA3, block_threads=64, vgprs=8, lds_bytes=12000)  # 5 workgroups
    assert (result.blocks_per_cu, result.waves_per_simd, result.limiter) == (5, 2, "lds")


def test_lds_over_64_kb_cannot_run():
    assert occupancy(CDNA3, block_threads=64, vgprs=8, lds_bytes=65537).blocks_per_cu == 0


def test_empty_workgroup_is_refused():
    with pytest.raises(GpuPerfError, match="at least one thread"):
        occupancy(CDNA3, block_threads=0, vgprs=8)


def test_arch_lookup_ignores_features_and_knows_only_cdna2_and_cdna3():
    assert cu_limits("gfx942:sramecc+:xnack-") is CDNA3
    assert cu_limits("amdgcn-amd-amdhsa--gfx90a") is CDNA2
    assert cu_limits("gfx1100") is None
    assert CDNA3.max_waves_per_cu == 32


def kernel(**overrides) -> AmdKernelMetadata:
    fields = dict(name="k", vgpr_count=72, agpr_count=0, sgpr_count=20, lds_bytes=0,
                  scratch_bytes=16, wavefront_size=64, max_flat_workgroup_size=1024,
                  vgpr_spill_count=1, sgpr_spill_count=2)  # fmt: skip
    return AmdKernelMetadata(**{**fields, **overrides})


def test_kernel_resources_report_occupancy_for_the_block():
    resources = kernel_resources(kernel(), "gfx942", block_threads=64)
    assert (resources.registers, resources.sgprs, resources.scratch_bytes) == (72, 20, 16)
    assert resources.spill_count == 3
    assert (resources.waves_per_simd, resources.occupancy_limiter) == (7, "vgprs")
    assert resources.occupancy == pytest.approx(28 / 32)
    assert "occupancy 88% (vgprs)" in resources.summary()


def test_kernel_resources_cap_the_block_and_add_dynamic_lds():
    resources = kernel_resources(
        kernel(max_flat_workgroup_size=256, lds_bytes=1024), "gfx90a", 1024, 31 * 1024
    )
    assert resources.block_threads == 256
    assert resources.blocks_per_cu == 2  # 65536 // 32768
    assert resources.occupancy_limiter == "lds"


def test_kernel_resources_without_rules_for_the_arch_have_no_occupancy():
    resources = kernel_resources(kernel(), "gfx1100")
    assert resources.registers == 72 and resources.occupancy is None
