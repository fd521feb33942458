"""StaticFacts as plain data: through dicts, TOML and JSON and back, with named errors."""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest
import tomli_w

from pytest_gpuperf.gate.static import StaticFacts, StaticFactsError, with_occupancy
from pytest_gpuperf.runtime.amd_codeobject import read_code_object

# the synthetic code objects of the metadata reader's own tests (same folder)
from test_amd_codeobject import KERNEL, code_object, metadata  # isort: skip

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

FACTS = with_occupancy(
    StaticFacts(
        kernel="rmsnorm",
        arch="gfx942",
        compiler="clang 19.1.7",
        hip_runtime="gpuperf",
        block_threads=256,
        dynamic_lds_bytes=1024,
        vgprs=64,
        arch_vgprs=64,
        agprs=0,
        sgprs=88,
        static_lds_bytes=64,
        scratch_bytes=0,
        vgpr_spills=0,
        sgpr_spills=0,
        max_block_threads=1024,
        fingerprint="sha256:" + "ab" * 32,
        fingerprint_scope="kernel",
        calls=("__ocml_rsqrt_f32",),
    )
)


def test_occupancy_follows_the_launch_shape():
    assert (FACTS.waves_per_simd, FACTS.occupancy, FACTS.occupancy_limiter) == (8, 1.0, "waves")
    assert FACTS.lds_bytes == 1088
    big_block = with_occupancy(dataclasses.replace(FACTS, vgprs=72, block_threads=1024))
    assert big_block.occupancy_limiter == "vgprs"  # 7 waves/SIMD hold one 16-wave block
    assert big_block.waves_per_simd == 4 and big_block.occupancy == 0.5


def test_dict_round_trip_through_toml_and_json():
    data = FACTS.to_dict()
    assert data["calls"] == ["__ocml_rsqrt_f32"]
    assert StaticFacts.from_dict(tomllib.loads(tomli_w.dumps(data))) == FACTS
    assert StaticFacts.from_dict(json.loads(json.dumps(data))) == FACTS


def test_unknown_occupancy_is_left_out_not_written_as_none():
    unmodelled = dataclasses.replace(FACTS, arch="gfx1100", waves_per_simd=None, occupancy=None,
                                     occupancy_limiter=None)  # fmt: skip
    data = unmodelled.to_dict()
    assert not {"waves_per_simd", "occupancy", "occupancy_limiter"} & set(data)
    assert StaticFacts.from_dict(tomllib.loads(tomli_w.dumps(data))) == unmodelled


def test_newer_fields_are_ignored_and_integral_occupancy_reads_as_a_float():
    data = {**FACTS.to_dict(), "occupancy": 1, "from_the_future": True}
    restored = StaticFacts.from_dict(data)
    assert restored == FACTS and isinstance(restored.occupancy, float)


def test_a_missing_field_is_named():
    data = FACTS.to_dict()
    del data["vgprs"]
    with pytest.raises(StaticFactsError, match="static facts lack the field 'vgprs'"):
        StaticFacts.from_dict(data)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("vgprs", "64", "'vgprs' must be an integer, not '64'"),
        ("vgprs", True, "'vgprs' must be an integer"),
        ("occupancy", "full", "'occupancy' must be a number"),
        ("calls", "__ocml_exp_f32", "'calls' must be a list of names"),
        ("kernel", 3, "'kernel' must be a string, not 3"),
    ],
)
def test_a_mistyped_field_is_named(field, value, message):
    with pytest.raises(StaticFactsError, match=message):
        StaticFacts.from_dict({**FACTS.to_dict(), field: value})


def test_metadata_without_spill_counts_says_so_for_the_assembly_fallback():
    entry = {key: value for key, value in KERNEL.items() if not key.endswith("spill_count")}
    kernel = read_code_object(code_object(metadata(kernels=[entry]))).kernels["vector_add"]
    assert not kernel.spill_counts_known and kernel.vgpr_spill_count == 0
    assert read_code_object(code_object()).kernels["vector_add"].spill_counts_known
