"""The kernel catalog: cases match the kernels' signatures, references and emulation are right."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_gpuperf.runtime.compile import KERNELS_DIR
from pytest_gpuperf.runtime.signature import parse_signatures
from pytest_gpuperf.session import catalog
from pytest_gpuperf.session.catalog import KERNELS, Ref, bind
from pytest_gpuperf.simulate import shipped_kernels
from pytest_gpuperf.simulate.shipped_kernels import CHECK_KERNELS, EMULATED, dot_partials, emulate

SIZES = (1, 7, 1001, 4099, 70001)
# Kernels that give each thread one element: the grid alone must cover the problem.
ONE_PER_THREAD = {"vector_add", "vector_add_bypass", "vector_add_nt", "copy", "scale", "triad"}


def params_of(name: str):
    return parse_signatures((KERNELS_DIR / KERNELS[name].file).read_text())[name]


def copies(args) -> list:
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def each_launch(name: str, case: catalog.KernelCase):
    """(kernel name, case) for the first launch and every follow-up."""
    yield name, case
    for follow in case.follow_ups:
        yield follow.name, follow.case


def test_every_user_facing_kernel_has_a_case():
    shipped = set()
    # gemm.hip's bf16 inputs are bit patterns, outside the catalog's float32 Values: its test
    # (tests/perf/test_gemm.py) launches and checks it directly; the simulated device computes it
    direct = {"gemm_bf16_fp32"}
    for path in KERNELS_DIR.glob("*.hip"):
        if path.name not in ("gpuperf_internal.hip", "bench_variants.hip", "gpuperf_check.hip"):
            shipped |= set(parse_signatures(path.read_text()))
    assert shipped == set(KERNELS) | direct
    check_kernels = set(parse_signatures((KERNELS_DIR / "gpuperf_check.hip").read_text()))
    assert check_kernels == CHECK_KERNELS  # each one emulated on the simulated device
    assert set(KERNELS) | CHECK_KERNELS | direct == EMULATED  # what the simulated device computes
    for name, entry in KERNELS.items():
        assert entry.name == name and entry.description
        assert name in parse_signatures((KERNELS_DIR / entry.file).read_text())


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_case_matches_the_signature_and_is_never_zero(name, size):
    case = KERNELS[name].make_case(size, np.random.default_rng(size))
    for kernel, launch in each_launch(name, case):
        params = params_of(kernel)
        assert len(launch.args) == len(params)
        arrays = []
        for index, (param, value) in enumerate(zip(params, launch.args, strict=True)):
            if isinstance(value, Ref):  # what the first launch wrote
                assert param.is_pointer and value.index in case.outputs
                arrays.append(case.args[value.index])
                continue
            if param.is_pointer:
                assert isinstance(value, np.ndarray) and value.dtype == param.dtype
                assert value.ndim == 1 and value.size >= 1
                arrays.append(value)
                if index in launch.outputs:
                    assert np.isnan(value).all(), "outputs start poisoned"
                else:
                    assert np.isfinite(value).all() and (value != 0).all()
            else:
                assert isinstance(value, (int, float)) and not isinstance(value, bool)
        assert launch.outputs and set(launch.outputs) == set(launch.expected)
        for index in launch.outputs:
            expected = launch.expected[index]
            target = launch.args[index]
            target = case.args[target.index] if isinstance(target, Ref) else target
            assert expected.shape == target.shape
            assert np.isfinite(expected).all() and np.abs(expected).max() > 0
        # declared bytes: every array is read once or written once, and sized exactly
        assert launch.bytes_moved == sum(a.nbytes for a in arrays)
        assert all(v >= 1 for v in (*launch.grid, *launch.block))
        assert launch.block[0] % 64 == 0  # whole wavefronts (gp_block_sum needs them)
    if name in ONE_PER_THREAD:
        assert case.grid[0] * case.block[0] >= case.args[-1]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_emulation_reproduces_the_reference(name, size):
    case = KERNELS[name].make_case(size, np.random.default_rng(size + 1))
    first = copies(case.args)
    assert emulate(name, first, grid=case.grid, block=case.block)
    for kernel, launch in each_launch(name, case):
        args = first if launch is case else copies(bind(launch.args, first))
        if launch is not case:
            assert emulate(kernel, args, grid=launch.grid, block=launch.block)
        for index in launch.outputs:
            np.testing.assert_allclose(
                args[index], launch.expected[index], rtol=launch.rtol, atol=launch.atol
            )


def test_cases_are_reproducible_from_the_seed():
    one = KERNELS["rope"].make_case(5000, np.random.default_rng(3))
    two = KERNELS["rope"].make_case(5000, np.random.default_rng(3))
    for a, b in zip(one.args, two.args, strict=True):
        np.testing.assert_array_equal(a, b)


def test_small_sizes_take_the_odd_shapes_that_exercise_scalar_tails():
    rng = np.random.default_rng(0)
    assert KERNELS["rmsnorm"].make_case(1001, rng).args[3:5] == (1, 1001)
    assert KERNELS["silu_and_mul"].make_case(1001, rng).args[2:] == (1, 1001)
    assert KERNELS["rope"].make_case(1001, rng).args[4:] == (1, 1, 1000)  # half = 500: 500 % 4 == 0
    assert KERNELS["rope"].make_case(1003, rng).args[4:] == (1, 1, 1002)  # half = 501: scalar path
    assert KERNELS["rope"].make_case(3 * 2**20, rng).args[4:] == (3 * 2**20 // 1024, 8, 128)


# -- references against values worked out by hand -------------------------------------------


def f32(*values) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def test_vector_add_and_stream_emulation_by_hand():
    a, b, c = f32(1, 2, 3), f32(10, 20, 30), f32(np.nan, np.nan, np.nan)
    assert emulate("vector_add_vec4", [a, b, c, 2])
    np.testing.assert_array_equal(c[:2], [11, 22])
    assert np.isnan(c[2])  # n = 2: the third element is not the kernel's
    assert emulate("triad", [a, b, c, 0.5, 3])
    np.testing.assert_array_equal(c, [6, 12, 18])
    assert emulate("scale", [a, c, 2.0, 3])
    np.testing.assert_array_equal(c, [2, 4, 6])


def test_rmsnorm_reference_by_hand():
    y = shipped_kernels.rmsnorm_reference(f32(3, 4).reshape(1, 2), f32(1, 2), eps=0.0)
    rms = math.sqrt((9 + 16) / 2)
    np.testing.assert_allclose(y, [[3 / rms, 8 / rms]], rtol=1e-12)


def test_silu_and_mul_reference_by_hand():
    out = shipped_kernels.silu_and_mul_reference(f32(1, -2, 3, 4).reshape(1, 4), d=2)
    expected = [1 / (1 + math.exp(-1)) * 3, -2 / (1 + math.exp(2)) * 4]
    np.testing.assert_allclose(out, [expected], rtol=1e-12)


def test_rope_reference_rotates_halves():
    x = f32(1, 2, 3, 4).reshape(1, 1, 4)  # lo = (1, 2), hi = (3, 4)
    identity = shipped_kernels.rope_reference(x, f32(1, 1).reshape(1, 2), f32(0, 0).reshape(1, 2))
    np.testing.assert_array_equal(identity, x)
    quarter = shipped_kernels.rope_reference(x, f32(0, 0).reshape(1, 2), f32(1, 1).reshape(1, 2))
    np.testing.assert_array_equal(quarter, [[[-3, -4, 1, 2]]])  # (lo, hi) -> (-hi, lo)


def test_dot_partials_follow_the_kernels_thread_layout():
    a, b = np.arange(1, 11, dtype=np.float32), np.ones(10, dtype=np.float32)
    # 2 blocks of 1 thread: float4s 0 and 1 go to threads 0 and 1; the tail (elements 8, 9)
    # to threads 0 and 1 as well.
    np.testing.assert_array_equal(
        dot_partials(a, b, 10, blocks=2, threads=1), [1 + 2 + 3 + 4 + 9, 5 + 6 + 7 + 8 + 10]
    )
    # 40 elements, 4 threads in 2 blocks: float4 j goes to thread j % 4, block (j % 4) // 2.
    a = np.arange(40, dtype=np.float32)
    quads = a.reshape(10, 4).sum(axis=1)
    by_thread = [quads[t::4].sum() for t in range(4)]
    np.testing.assert_array_equal(
        dot_partials(a, np.ones(40, np.float32), 40, blocks=2, threads=2),
        [by_thread[0] + by_thread[1], by_thread[2] + by_thread[3]],
    )


def test_dot_emulation_without_a_grid_still_totals_right():
    a, b = np.arange(1, 1001, dtype=np.float32), np.full(1000, 2, dtype=np.float32)
    partial, out = np.full(3, np.nan, np.float32), np.full(1, np.nan, np.float32)
    assert emulate("dot", [a, b, partial, 1000])
    assert emulate("dot_finish", [partial, out, 3])
    assert out[0] == 2 * 1000 * 1001 / 2


# -- emulate's contract ---------------------------------------------------------------------


def test_emulate_refuses_unknown_and_internal_kernels():
    assert emulate("no_such_kernel", []) is False
    assert emulate("gpuperf_flush", [np.zeros(4, np.uint32), 1, np.zeros(1, np.uint32)]) is False


@pytest.mark.parametrize(
    "name, args",
    [
        ("vector_add", [f32(1, 2), f32(1, 2), f32(0, 0), 3]),
        ("copy", [f32(1, 2, 3), f32(0, 0), 3]),
        ("rmsnorm", [f32(1, 2, 3, 4), f32(1, 1), f32(0, 0, 0, 0), 2, 3, 1e-6]),
        ("silu_and_mul", [f32(1, 2, 3), f32(0), 1, 2]),
        ("dot_finish", [f32(1, 2), np.zeros(0, np.float32), 2]),
    ],
)
def test_emulate_raises_index_error_where_the_kernel_would_overrun(name, args):
    with pytest.raises(IndexError, match="the buffer holds"):
        emulate(name, args)


def test_non_positive_sizes_do_nothing():
    c = f32(np.nan, np.nan)
    assert emulate("vector_add", [f32(1, 2), f32(1, 2), c, 0])
    assert emulate("vector_add", [f32(1, 2), f32(1, 2), c, -5])
    assert np.isnan(c).all()


# -- the launch grid ------------------------------------------------------------------------


def test_covered_elements_follow_each_kernels_thread_layout():
    assert shipped_kernels.covered_elements("vector_add", 1000, None) == 1000
    # one element per thread
    assert shipped_kernels.covered_elements("vector_add", 1000, 512) == 512
    assert shipped_kernels.covered_elements("copy", 100, 512) == 100
    # float4 grid-stride: any grid covers the float4s; threads 0 .. n % 4 - 1 take the tail.
    assert shipped_kernels.covered_elements("vector_add_vec4", 1003, 1) == 1001
    assert shipped_kernels.covered_elements("triad_vec4", 1003, 2) == 1002
    assert shipped_kernels.covered_elements("copy_vec4", 1003, 256) == 1003


@pytest.mark.parametrize("name", sorted(ONE_PER_THREAD))
def test_a_grid_too_small_leaves_the_uncovered_outputs_poisoned(name):
    case = KERNELS[name].make_case(4096, np.random.default_rng(0))
    args = copies(case.args)
    (output,) = case.outputs
    assert emulate(name, args, grid=(8, 1, 1), block=(256, 1, 1))  # 2048 of 4096 elements
    np.testing.assert_allclose(
        args[output][:2048], case.expected[output][:2048], rtol=case.rtol, atol=case.atol
    )
    assert np.isnan(args[output][2048:]).all()


def test_the_float4_kernels_cover_any_grid_but_their_tail_needs_threads():
    case = KERNELS["vector_add_vec4"].make_case(1003, np.random.default_rng(0))
    args = copies(case.args)
    assert emulate("vector_add_vec4", args, grid=(1, 1, 1), block=(1, 1, 1))
    np.testing.assert_allclose(args[2][:1001], case.expected[2][:1001], rtol=1e-6)
    assert np.isnan(args[2][1001:]).all()


def test_a_grid_that_covers_only_what_fits_does_not_fault():
    """n beyond the buffers faults only where a thread reaches past them, as on a GPU."""
    a, b, c = f32(1, 2), f32(3, 4), f32(np.nan, np.nan)
    assert emulate("vector_add", [a, b, c, 1000], grid=(1, 1, 1), block=(2, 1, 1))
    np.testing.assert_array_equal(c, [4, 6])
    with pytest.raises(IndexError):
        emulate("vector_add", [a, b, c, 1000], grid=(1, 1, 1), block=(4, 1, 1))
