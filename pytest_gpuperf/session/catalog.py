"""What every user-facing kernel in kernels/ computes, as concrete problems.

Three users: the perf suite launches a `KernelCase` with inputs made on the device and checks
its outputs on the device against float64 references computed there (`checks`, kernels of
gpuperf_check.hip; session/device_data.py); NumPy explains a failure (`args` and `expected`,
the same inputs bit for bit, made on first use); the simulated device computes the same kernels
with `simulate/shipped_kernels.py`'s `emulate`, whose float64 references (one per kernel,
float64 arithmetic on the float32 inputs) serve the explanation here too. Tolerances cover
float32 rounding and each kernel's own summation order.

A multi-kernel scheme (dot, then dot_finish) describes its further launches as
`KernelCase.follow_ups`: their arguments may be `Ref(i)`, meaning "argument i of the first
launch" (the same device buffer), so the second pass reads what the first one wrote.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_gpuperf.runtime.base import Backend, DeviceBuffer
from pytest_gpuperf.session import device_data
from pytest_gpuperf.session.buffers import poisoned_buffer
from pytest_gpuperf.simulate.input_hash import Values
from pytest_gpuperf.simulate.shipped_kernels import (
    BLOCK,
    dot_partials,
    rmsnorm_reference,
    rope_reference,
    silu_and_mul_reference,
)

MAX_GRID_Y = 65535  # CUDA's grid.y limit; kernels walk further rows grid-stride
DOT_MAX_BLOCKS = 2048  # enough to fill an H100 (132 SMs) or MI300X (304 CUs) about once
EPS32 = float(np.finfo(np.float32).eps)

_F32, _F64 = np.float32, np.float64


@dataclass(frozen=True)
class Poison:
    """An output of `count` float32 elements, NaN until written: an element the kernel leaves
    unwritten fails the check."""

    count: int

    def host(self) -> np.ndarray:
        return np.full(self.count, np.nan, dtype=_F32)


@dataclass(frozen=True)
class Arg:
    """An argument of a device reference launch: argument `index` of the checked launch."""

    index: int


@dataclass(frozen=True)
class Expected:
    """An argument of a device reference launch: the float64 buffer it fills, the reference
    the output is compared with."""


@dataclass(frozen=True)
class Check:
    """How output `output` is checked on the device: `kernel` (gpuperf_check.hip) computes its
    float64 reference from `args` (`Arg`, `Expected`, numbers) over `work_items`."""

    output: int
    kernel: str
    args: tuple
    work_items: int


@dataclass(frozen=True, eq=False)
class KernelCase:
    """One concrete launch of a kernel, made from a size and a seeded RNG.

    `layout` holds the arguments in signature order: `Values` for inputs (random, never zero;
    made by the counter-based hash, on the device or, the same bits, by NumPy), `Poison` for
    outputs, `Ref` in follow-ups, Python numbers for scalars. `bytes_moved` declares each
    input read once and each output written once. `checks` compute each output's reference on
    the device; `reference` computes them with NumPy from `args` (the layout as host arrays).
    """

    layout: tuple
    outputs: tuple[int, ...]
    reference: Callable[[tuple], dict[int, np.ndarray]]
    checks: tuple[Check, ...]
    bytes_moved: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    rtol: float
    atol: float
    follow_ups: tuple[FollowUp, ...] = ()

    @functools.cached_property
    def args(self) -> tuple:
        """The arguments as NumPy arrays (the device's inputs, bit for bit) and numbers."""
        return tuple(a.host() if isinstance(a, (Values, Poison)) else a for a in self.layout)

    @functools.cached_property
    def expected(self) -> dict[int, np.ndarray]:
        """The NumPy reference of each output, from `args`."""
        return self.reference(self.args)

    def count(self, index: int) -> int:
        """Elements of output (or input) `index`."""
        return self.layout[index].count


@dataclass(frozen=True)
class Ref:
    """An argument of a follow-up launch: argument `index` of the first launch."""

    index: int


@dataclass(frozen=True, eq=False)
class FollowUp:
    """A further launch of kernel `name` (same file) that completes the scheme."""

    name: str
    case: KernelCase


@dataclass(frozen=True, eq=False)
class CatalogKernel:
    file: str  # relative to kernels/
    name: str  # the symbol
    description: str
    make_case: Callable[[int, np.random.Generator], KernelCase]  # size in elements (n)


def bind(args: Sequence[Any], first_args: Sequence[Any]) -> list:
    """A follow-up's arguments with each `Ref(i)` replaced by `first_args[i]`."""
    return [first_args[a.index] if isinstance(a, Ref) else a for a in args]


# -- on a device: inputs made there, outputs checked there ---------------------------------


def device_args(
    backend: Backend,
    layout: Sequence[Any],
    first: Sequence[Any] = (),
    allocate: Callable[[int], DeviceBuffer] | None = None,
) -> tuple:
    """A launch's arguments on `backend`: a buffer of NaN for each `Values` (then filled by
    the hash kernel) and `Poison`, `first[i]` for `Ref(i)`, numbers as they are. `allocate`
    makes a NaN-filled float32 buffer of n elements (gpu_bench.empty, which frees it when the
    test ends); by default the caller frees the buffers."""
    data = device_data.device_data(backend)
    make = allocate or (lambda count: poisoned_buffer(backend, count, np.float32, "catalog"))
    args = []
    for item in layout:
        if isinstance(item, (Values, Poison)):
            buffer = make(item.count)
            if isinstance(item, Values):
                data.fill(buffer, item)
            args.append(buffer)
        else:
            args.append(first[item.index] if isinstance(item, Ref) else item)
    return tuple(args)


def check_on_device(
    backend: Backend, case: KernelCase, args: Sequence[Any], keep: bool = False
) -> dict[int, device_data.Mismatch]:
    """Each output of `case`, launched with `args`, compared on the device with its float64
    reference computed there (`case.checks`): what the compare kernel found, per output.
    `keep`: the reference buffers are returned too, as (mismatch, buffer) (the caller frees
    them; tests compare them with NumPy's)."""
    data = device_data.device_data(backend)
    found: dict[int, Any] = {}
    for index in case.outputs:
        count = case.count(index)
        expected = backend.alloc(8 * count)
        try:
            for check in (c for c in case.checks if c.output == index):
                resolved = tuple(
                    args[a.index]
                    if isinstance(a, Arg)
                    else expected
                    if isinstance(a, Expected)
                    else a
                    for a in check.args
                )
                data.launch(check.kernel, check.work_items, resolved)
            mismatch = data.compare(args[index], expected, count, case.rtol, case.atol)
        except BaseException:
            expected.free()
            raise
        if keep:
            found[index] = (mismatch, expected)
        else:
            expected.free()
            found[index] = mismatch
    return found


# -- case builders ------------------------------------------------------------------------


def _values(
    rng: np.random.Generator, count: int, low: float = 0.1, width: float = 1.0, signed: bool = True
) -> Values:
    """float32 inputs with magnitude in [low, low + width): never zero, random sign when
    `signed`; the seed drawn from `rng`. Made by the device's hash kernel (the suite's 32M-
    element inputs once cost 2 s of NumPy draws and the uploads), or by NumPy, the same bits."""
    return Values(count, int(rng.integers(0, 2**32)), low, width, signed)


def _poison(count: int) -> Poison:
    return Poison(count)


def _blocks(work_items: int) -> int:
    return max(1, math.ceil(work_items / BLOCK))


def _nbytes(*arrays: Values | Poison) -> int:
    return sum(4 * a.count for a in arrays)  # float32 elements


def _grid(x: int, y: int = 1) -> tuple[int, int, int]:
    return (x, y, 1)


_BLOCK3 = (BLOCK, 1, 1)


def _axpby(output: int, a: int, b: int, n: int, alpha: float, beta: float) -> tuple[Check, ...]:
    """out = alpha * a + beta * b in float64 on the device: the streaming kernels' check."""
    return (Check(output, "gpuperf_ref_axpby", (Arg(a), Arg(b), Expected(), n, alpha, beta), n),)


def _vector_add_case(vec4: bool) -> Callable[[int, np.random.Generator], KernelCase]:
    def make(size: int, rng: np.random.Generator) -> KernelCase:
        n = max(1, size)
        a, b, c = _values(rng, n), _values(rng, n), _poison(n)
        return KernelCase(
            layout=(a, b, c, n),
            outputs=(2,),
            reference=lambda args: {2: args[0].astype(_F64) + args[1]},
            checks=_axpby(2, 0, 1, n, 1.0, 1.0),
            bytes_moved=_nbytes(a, b, c),
            grid=_grid(_blocks(math.ceil(n / 4) if vec4 else n)),
            block=_BLOCK3,
            rtol=1e-6,
            atol=1e-7,
        )

    return make


def _copy_case(vec4: bool) -> Callable[[int, np.random.Generator], KernelCase]:
    def make(size: int, rng: np.random.Generator) -> KernelCase:
        n = max(1, size)
        a, b = _values(rng, n), _poison(n)
        return KernelCase(
            layout=(a, b, n),
            outputs=(1,),
            reference=lambda args: {1: args[0].astype(_F64)},
            checks=_axpby(1, 0, 0, n, 1.0, 0.0),
            bytes_moved=_nbytes(a, b),
            grid=_grid(_blocks(math.ceil(n / 4) if vec4 else n)),
            block=_BLOCK3,
            rtol=0.0,
            atol=0.0,
        )

    return make


def _scale_case(size: int, rng: np.random.Generator) -> KernelCase:
    n = max(1, size)
    a, b = _values(rng, n), _poison(n)
    s = float(_F32(rng.uniform(0.5, 2.0)))
    return KernelCase(
        layout=(a, b, s, n),
        outputs=(1,),
        reference=lambda args: {1: s * args[0].astype(_F64)},
        checks=_axpby(1, 0, 0, n, s, 0.0),
        bytes_moved=_nbytes(a, b),
        grid=_grid(_blocks(n)),
        block=_BLOCK3,
        rtol=1e-6,
        atol=1e-7,
    )


def _triad_case(vec4: bool) -> Callable[[int, np.random.Generator], KernelCase]:
    def make(size: int, rng: np.random.Generator) -> KernelCase:
        n = max(1, size)
        a, b, c = _values(rng, n), _values(rng, n), _poison(n)
        s = float(_F32(rng.uniform(0.5, 2.0)))
        return KernelCase(
            layout=(a, b, c, s, n),
            outputs=(2,),
            reference=lambda args: {2: args[0].astype(_F64) + s * args[1].astype(_F64)},
            checks=_axpby(2, 0, 1, n, 1.0, s),
            bytes_moved=_nbytes(a, b, c),
            grid=_grid(_blocks(math.ceil(n / 4) if vec4 else n)),
            block=_BLOCK3,
            rtol=1e-6,
            atol=1e-6,  # a + s*b cancels; with or without FMA the error is ~|s*b| * 2^-24
        )

    return make


def _sum_rtol(terms_per_thread: int) -> float:
    """Relative error bound of a float32 sum of positive terms: per-thread sequential adds
    plus the block's shuffle tree, with a factor of 2 to spare."""
    return max(1e-5, EPS32 * (terms_per_thread + 2 * math.log2(BLOCK) + 4))


def _dot_finish_case(
    partial: Values | Ref, total: Callable[[tuple], float], count: int, rtol: float
) -> KernelCase:
    """dot_finish over `count` partials. On the device its output is checked against the sum
    of the partials it was given (dot's own check covers those); NumPy's `total` is the exact
    sum of the products where the partials come from dot."""
    out = _poison(1)
    return KernelCase(
        layout=(partial, out, count),
        outputs=(1,),
        reference=lambda args: {1: np.array([total(args)])},
        checks=(Check(1, "gpuperf_ref_sum", (Arg(0), Expected(), count), 1),),
        bytes_moved=count * 4 + 4,
        grid=_grid(1),
        block=_BLOCK3,
        rtol=rtol,
        atol=0.0,
    )


def _dot_case(size: int, rng: np.random.Generator) -> KernelCase:
    n = max(1, size)
    # Positive inputs: every partial is a sum of positive terms, so a relative tolerance holds.
    a, b = _values(rng, n, 0.5, signed=False), _values(rng, n, 0.5, signed=False)
    blocks = min(DOT_MAX_BLOCKS, _blocks(math.ceil(n / 4)))
    partial = _poison(blocks)
    rtol = _sum_rtol(math.ceil(n / (blocks * BLOCK)))

    def partials(args: tuple) -> np.ndarray:
        return dot_partials(args[0], args[1], n, blocks, BLOCK)

    def total(_args: tuple) -> float:  # the follow-up's args hold Ref(2): use a and b
        return float(dot_partials(a.host(), b.host(), n, blocks, BLOCK).sum())

    finish = _dot_finish_case(Ref(2), total, blocks, max(rtol, _sum_rtol(8)))
    return KernelCase(
        layout=(a, b, partial, n),
        outputs=(2,),
        reference=lambda args: {2: partials(args)},
        checks=(
            Check(
                2,
                "gpuperf_ref_dot_partials",
                (Arg(0), Arg(1), Expected(), n, blocks, BLOCK),
                blocks,
            ),
        ),
        bytes_moved=_nbytes(a, b, partial),
        grid=_grid(blocks),
        block=_BLOCK3,
        rtol=rtol,
        atol=0.0,
        follow_ups=(FollowUp("dot_finish", finish),),
    )


def _dot_finish_alone(size: int, rng: np.random.Generator) -> KernelCase:
    count = max(1, size)
    partial = _values(rng, count, 0.5, signed=False)
    rtol = _sum_rtol(math.ceil(count / BLOCK))
    return _dot_finish_case(partial, lambda args: float(args[0].astype(_F64).sum()), count, rtol)


def _rmsnorm_case(size: int, rng: np.random.Generator) -> KernelCase:
    cols = min(max(1, size), 4096)  # a hidden size; small sizes give one odd-length row
    rows = max(1, size // cols)
    x, w = _values(rng, rows * cols), _values(rng, cols, 0.5, signed=False)
    y, eps = _poison(rows * cols), 1e-6
    return KernelCase(
        layout=(x, w, y, rows, cols, eps),
        outputs=(2,),
        reference=lambda args: {
            2: rmsnorm_reference(args[0].reshape(rows, cols), args[1], eps).ravel()
        },
        checks=(
            Check(
                2,
                "gpuperf_ref_rmsnorm",
                (Arg(0), Arg(1), Expected(), rows, cols, eps),
                rows * BLOCK,  # a block per row
            ),
        ),
        bytes_moved=_nbytes(x, w, y),
        grid=_grid(rows),
        block=_BLOCK3,
        rtol=1e-5,
        atol=1e-7,
    )


def _silu_and_mul_case(size: int, rng: np.random.Generator) -> KernelCase:
    d = min(max(1, size), 2048)  # out elements per row; small sizes give one odd-length row
    rows = max(1, size // d)
    x, out = _values(rng, rows * 2 * d, 0.1, 4.0), _poison(rows * d)
    columns = math.ceil(d / 4) if d % 4 == 0 else d
    return KernelCase(
        layout=(x, out, rows, d),
        outputs=(1,),
        reference=lambda args: {1: silu_and_mul_reference(args[0].reshape(rows, 2 * d), d).ravel()},
        checks=(Check(1, "gpuperf_ref_silu_and_mul", (Arg(0), Expected(), rows, d), rows * d),),
        bytes_moved=_nbytes(x, out),
        grid=_grid(_blocks(columns), min(rows, MAX_GRID_Y)),
        block=_BLOCK3,
        rtol=1e-5,
        atol=1e-6,
    )


def _rope_case(size: int, rng: np.random.Generator) -> KernelCase:
    if size >= 8 * 128:
        heads, head_dim = 8, 128
    else:  # one token, one head of odd half-width: the scalar path
        heads, head_dim = 1, max(2, size - size % 2)
    half = head_dim // 2
    tokens = max(1, size // (heads * head_dim))
    x, y = _values(rng, tokens * heads * head_dim), _poison(tokens * heads * head_dim)
    # cos and sin of random angles would cost the host the transcendentals; the kernel needs
    # only numbers in [-1, 1] (it does not rely on cos^2 + sin^2 = 1)
    cos, sin = _values(rng, tokens * half, 0.0), _values(rng, tokens * half, 0.0)
    pairs = heads * (half // 4 if half % 4 == 0 else half)

    def reference(args: tuple) -> dict[int, np.ndarray]:
        found = rope_reference(
            args[0].reshape(tokens, heads, head_dim),
            args[1].reshape(tokens, half),
            args[2].reshape(tokens, half),
        )
        return {3: found.ravel()}

    return KernelCase(
        layout=(x, cos, sin, y, tokens, heads, head_dim),
        outputs=(3,),
        reference=reference,
        checks=(
            Check(
                3,
                "gpuperf_ref_rope",
                (Arg(0), Arg(1), Arg(2), Expected(), tokens, heads, half),
                tokens * heads * half,
            ),
        ),
        bytes_moved=_nbytes(x, cos, sin, y),
        grid=_grid(_blocks(pairs), min(tokens, MAX_GRID_Y)),
        block=_BLOCK3,
        rtol=1e-5,
        atol=1e-6,
    )


_VECTOR_ADD, _VECTOR_ADD_VEC4 = _vector_add_case(vec4=False), _vector_add_case(vec4=True)

# fmt: off
_TABLE = (
    ("vector_add.hip", "vector_add", "c = a + b, the blog's plain kernel", _VECTOR_ADD),
    ("vector_add.hip", "vector_add_bypass", "c = a + b, loads/stores bypass the L2", _VECTOR_ADD),
    ("vector_add.hip", "vector_add_nt", "c = a + b, nontemporal loads/stores", _VECTOR_ADD),
    ("vector_add.hip", "vector_add_vec4", "c = a + b, float4 loads/stores", _VECTOR_ADD_VEC4),
    ("stream.hip", "copy", "STREAM copy: b = a", _copy_case(vec4=False)),
    ("stream.hip", "scale", "STREAM scale: b = s * a", _scale_case),
    ("stream.hip", "triad", "STREAM triad: c = a + s * b", _triad_case(vec4=False)),
    ("stream.hip", "copy_vec4", "STREAM copy, float4", _copy_case(vec4=True)),
    ("stream.hip", "triad_vec4", "STREAM triad, float4", _triad_case(vec4=True)),
    ("dot.hip", "dot", "dot product, pass 1: a partial sum per block (then dot_finish)", _dot_case),
    ("dot.hip", "dot_finish", "dot product, pass 2: sum of the partials", _dot_finish_alone),
    ("rmsnorm.hip", "rmsnorm", "RMSNorm over the rows of [rows, cols]", _rmsnorm_case),
    ("silu_and_mul.hip", "silu_and_mul", "silu(x[:, :d]) * x[:, d:]", _silu_and_mul_case),
    ("rope.hip", "rope", "rotary position embedding, NeoX style", _rope_case),
)
# fmt: on

KERNELS: dict[str, CatalogKernel] = {
    name: CatalogKernel(file, name, description, make_case)
    for file, name, description, make_case in _TABLE
}
