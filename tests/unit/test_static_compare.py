"""The static gate's rules and its renderers, on hand-made facts (no compiler)."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_gpuperf.gate.static import (
    StaticFacts,
    StaticFactsError,
    StaticMargins,
    StaticStatus,
    compare_facts,
    render_failure,
    render_markdown,
    with_occupancy,
)


def facts(**changes) -> StaticFacts:
    base = StaticFacts(
        kernel="k",
        arch="gfx942",
        compiler="clang 19.1.7",
        hip_runtime="gpuperf",
        block_threads=256,
        dynamic_lds_bytes=0,
        vgprs=32,
        arch_vgprs=32,
        agprs=0,
        sgprs=20,
        static_lds_bytes=0,
        scratch_bytes=0,
        vgpr_spills=0,
        sgpr_spills=0,
        max_block_threads=1024,
        fingerprint="sha256:aa",
        fingerprint_scope="kernel",
    )
    if "fingerprint" not in changes and changes:  # other code: another fingerprint
        changes["fingerprint"] = f"sha256:{sorted(changes.items())}"
    return with_occupancy(dataclasses.replace(base, **changes))


def test_same_fingerprint_and_launch_is_unchanged_whatever_else():
    result = compare_facts(facts(), facts())
    assert result.status is StaticStatus.UNCHANGED and result.changes == ()
    assert not result.failed and not result.code_changed


def test_new_code_with_the_same_resources_passes_as_changed():
    result = compare_facts(facts(), facts(fingerprint="sha256:bb"))
    assert result.status is StaticStatus.CHANGED
    assert [c.quantity for c in result.changes] == ["fingerprint"]
    assert "machine code changed; resources and occupancy are the same" in render_failure(result)


def test_vgprs_doubling_past_an_occupancy_step_fails_and_names_the_limiter():
    result = compare_facts(facts(vgprs=64, arch_vgprs=64), facts(vgprs=128, arch_vgprs=128))
    assert result.failed
    assert result.change("occupancy").rule == "occupancy-drop"
    assert result.change("waves_per_simd").before == 8
    assert result.change("waves_per_simd").after == 4
    assert result.limiter_moved == ("waves", "vgprs")
    assert result.change("vgprs").relative == pytest.approx(1.0)
    text = render_failure(result, "re-save with --gpuperf-save")
    assert "occupancy 100% -> 50% (8 -> 4 waves per SIMD), limited by vgprs (was waves)" in text
    assert "VGPRs 64 -> 128 (+100%)" in text
    assert "arch VGPRs" not in text  # no AGPRs on either side: the split says nothing
    assert text.endswith("if this is intended: re-save with --gpuperf-save")


@pytest.mark.parametrize(
    ("before", "after", "fails"),
    [
        (16, 24, False),  # one allocation granule: never a failure on its own
        (16, 32, True),  # two granules, +100%
        (100, 120, False),  # +20% of allocated (104 -> 120 is +15%)
        (100, 136, True),  # 104 -> 136 allocated: +31%
        (14, 20, False),  # same granule after rounding up (16 -> 24)
    ],
)
def test_vgpr_growth_margin_counts_allocated_registers(before, after, fails):
    result = compare_facts(facts(vgprs=before), facts(vgprs=after))
    assert (result.change("vgprs").rule == "vgpr-growth") is fails


def test_vgpr_margin_is_configurable():
    before, after = facts(vgprs=100), facts(vgprs=120)
    assert not compare_facts(before, after).change("vgprs").fails
    strict = compare_facts(before, after, StaticMargins(vgpr_growth=0.1))
    assert strict.change("vgprs").rule == "vgpr-growth"


@pytest.mark.parametrize(
    ("before", "after", "fails"),
    [
        (0, 512, False),  # a small reduction buffer appears: below the byte floor
        (0, 4096, True),
        (8192, 9216, False),  # +12.5%
        (8192, 12288, True),  # +50%
    ],
)
def test_lds_growth_needs_the_margin_and_the_byte_floor(before, after, fails):
    result = compare_facts(facts(static_lds_bytes=before), facts(static_lds_bytes=after))
    assert (result.change("lds_bytes").rule == "lds-growth") is fails


def test_lds_that_costs_occupancy_fails_as_an_occupancy_drop_with_the_lds_limiter():
    result = compare_facts(facts(static_lds_bytes=8192), facts(static_lds_bytes=9216))
    assert result.change("lds_bytes").rule is None
    assert result.change("occupancy").rule == "occupancy-drop"  # 8 -> 7 blocks of 4 waves
    assert result.limiter_moved == ("waves", "lds")


def test_scratch_and_spills_appearing_fail_but_growing_spills_only_change():
    result = compare_facts(facts(), facts(scratch_bytes=16, vgpr_spills=3, sgpr_spills=1))
    assert [c.rule for c in result.failures] == [
        "scratch-appeared",
        "vgpr-spill-appeared",
        "sgpr-spill-appeared",
    ]
    text = render_failure(result)
    assert "scratch (B per work-item) 0 -> 16: new scratch" in text
    assert "VGPR spills 0 -> 3: new VGPR spills" in text
    grew = compare_facts(
        facts(scratch_bytes=16, vgpr_spills=3), facts(scratch_bytes=32, vgpr_spills=5)
    )
    assert grew.status is StaticStatus.CHANGED


def test_better_occupancy_is_a_change_not_a_failure():
    result = compare_facts(facts(vgprs=128), facts(vgprs=64))
    assert result.status is StaticStatus.CHANGED
    assert result.change("occupancy").relative == pytest.approx(1.0)


def test_a_new_launch_shape_is_judged_even_with_the_same_code():
    before = facts()
    after = with_occupancy(dataclasses.replace(before, dynamic_lds_bytes=40000))
    result = compare_facts(before, after)
    assert result.launch_changed and not result.code_changed
    assert result.failed and result.limiter_moved == ("waves", "lds")


def test_a_toolchain_change_is_flagged_in_the_text():
    result = compare_facts(facts(), facts(compiler="clang 20.1.0", vgprs=40))
    assert result.toolchain_changed
    assert "the toolchain changed (clang 19.1.7, gpuperf HIP header -> clang 20.1.0" in (
        render_failure(result)
    )


def test_an_unmodelled_arch_compares_resources_without_occupancy():
    before = facts(arch="gfx1100", fingerprint="sha256:aa")
    after = facts(arch="gfx1100", vgprs=200)
    assert before.occupancy is None
    result = compare_facts(before, after)
    assert result.change("vgprs").rule == "vgpr-growth"
    assert "occupancy" not in render_failure(result)


def test_different_kernels_or_arches_do_not_compare():
    with pytest.raises(StaticFactsError, match=r"cannot compare k \(gfx942\) with k \(gfx90a\)"):
        compare_facts(facts(), facts(arch="gfx90a"))


def test_negative_margins_are_refused():
    with pytest.raises(StaticFactsError, match="vgpr_growth must be >= 0"):
        StaticMargins(vgpr_growth=-0.1)


def test_markdown_says_nothing_changed_in_one_sentence():
    same = compare_facts(facts(), facts())
    text = render_markdown([same, same], arch="gfx942")
    assert "This pull request does not change the gfx942 code of any kernel (2 checked)." in text
    assert "|" not in text


def test_markdown_lists_changed_kernels_failures_first_by_test_id():
    failing = compare_facts(facts(vgprs=64), facts(vgprs=128))
    changed = compare_facts(facts(), facts(sgprs=24))
    same = compare_facts(facts(), facts())
    text = render_markdown({"test_b[k]": changed, "test_a[k]": failing, "test_c": same})
    assert "1 failed, 1 changed within the rules, 1 unchanged." in text
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert rows[0].startswith("| `test_a[k]` | **failed** | 100% → 50% (waves → vgprs) | 64 → 128")
    assert "occupancy dropped, VGPR growth beyond the margin" in rows[0]
    assert rows[1].startswith("| `test_b[k]` | changed | 100% | 32 | 20 → 24 |")
    assert rows[1].endswith("| SGPRs |")
