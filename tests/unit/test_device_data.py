"""The counter-based hash of kernels/gpuperf_check.hip in NumPy, and the check kernels'
NumPy semantics (what the simulated device runs): the hash against a plain scalar version
written from the kernel source, the values' range and sign, the compare kernel's count and
first bad index."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.session.device_data import NO_INDEX
from pytest_gpuperf.simulate.input_hash import Values, hash_bits, values_from_bits
from pytest_gpuperf.simulate.shipped_kernels import emulate

M32 = 0xFFFFFFFF


def mix32(x: int) -> int:
    x ^= x >> 16
    x = (x * 0x7FEB352D) & M32
    x ^= x >> 15
    x = (x * 0x846CA68B) & M32
    x ^= x >> 16
    return x


def scalar_hash(i: int, seed: int) -> int:
    """gp_hash, line by line from gpuperf_check.hip, on Python ints."""
    stream = mix32(seed ^ mix32(((i >> 32) + 0x9E3779B9) & M32))
    return mix32((i & M32) ^ stream)


@pytest.mark.parametrize("seed", [0, 1, 20250601, M32])
def test_the_numpy_hash_is_the_kernels_hash(seed):
    for start in (0, 1000, 2**32 - 3, 5 * 2**32 + 7):
        got = hash_bits(seed, 6, start)
        assert got.dtype == np.uint32
        assert [int(v) for v in got] == [scalar_hash(i, seed) for i in range(start, start + 6)]


def test_the_same_seed_gives_the_same_bits_and_another_seed_others():
    one, two = Values(100_003, seed=7).host(), Values(100_003, seed=7).host()
    assert one.tobytes() == two.tobytes()
    other = Values(100_003, seed=8).host()
    assert np.mean(one == other) < 0.01


def test_values_span_their_range_with_both_signs_and_never_zero():
    values = Values(1 << 20, seed=3, low=0.1, width=1.0).host()
    magnitude = np.abs(values)
    assert magnitude.min() >= np.float32(0.1) and magnitude.max() < 1.1
    assert 0.49 < np.mean(values < 0) < 0.51
    assert abs(float(magnitude.mean()) - 0.6) < 0.01
    unsigned = Values(1000, seed=3, low=0.5, width=1.0, signed=False).host()
    assert unsigned.min() >= 0.5


def test_values_are_one_rounding_of_the_exact_affine_map():
    """The device may fuse the multiply and the add; with a power-of-two scale the product is
    exact, so both give the correctly rounded low + m * scale."""
    bits = hash_bits(11, 10_000)
    got = values_from_bits(bits, 0.1, 2.0**-24, signed=False)
    exact = np.float32(0.1).astype(np.float64) + (bits >> 8).astype(np.float64) * 2.0**-24
    assert np.array_equal(got, exact.astype(np.float32))


def test_chunks_join_seamlessly(monkeypatch):
    from pytest_gpuperf.simulate import input_hash

    whole = Values(10_000, seed=5).host()
    monkeypatch.setattr(input_hash, "_CHUNK", 999)
    assert np.array_equal(Values(10_000, seed=5).host(), whole)


@pytest.mark.parametrize("width", [0.9, 0.0, -1.0])
def test_a_width_that_is_not_a_power_of_two_is_refused(width):
    with pytest.raises(ConfigError, match="power of two"):
        Values(10, seed=1, width=width)


def test_fill_emulation_writes_the_hash_values_and_nothing_past_count():
    out = np.full(12, -7.0, dtype=np.float32)
    assert emulate("gpuperf_fill_values", [out, 10, 9, 0.25, 2.0**-24, 1])
    assert np.array_equal(out[:10], Values(10, seed=9, low=0.25).host())
    assert (out[10:] == -7.0).all()
    with pytest.raises(IndexError):
        emulate("gpuperf_fill_values", [out, 13, 9, 0.25, 2.0**-24, 1])


def test_compare_counts_wrong_elements_and_the_first_index():
    expected = np.linspace(1, 2, 1000)
    got = expected.astype(np.float32)
    got[[17, 500, 999]] = [0.0, np.nan, 5.0]
    result = np.array([0, NO_INDEX], dtype=np.uint64)
    emulate("gpuperf_compare", [got, expected, 1000, 1e-6, 1e-7, result])
    assert result.tolist() == [3, 17]
    clean = np.array([0, NO_INDEX], dtype=np.uint64)
    emulate("gpuperf_compare", [expected.astype(np.float32), expected, 1000, 1e-6, 1e-7, clean])
    assert clean.tolist() == [0, NO_INDEX]


def test_references_compute_in_float64():
    a = Values(1000, seed=1).host()
    b = Values(1000, seed=2).host()
    out = np.empty(1000)
    emulate("gpuperf_ref_axpby", [a, b, out, 1000, 1.0, 0.5])
    assert np.array_equal(out, a.astype(np.float64) + 0.5 * b.astype(np.float64))
    total = np.empty(1)
    emulate("gpuperf_ref_sum", [a, total, 1000])
    assert total[0] == a.astype(np.float64).sum()
    assert not emulate("gpuperf_no_such_kernel", [a, b, out, 1000])
