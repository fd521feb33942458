"""What every user-facing kernel in kernels/ computes, as concrete NumPy problems.

Two users: the GPU tests launch a `KernelCase` and compare the outputs with `expected`; the
simulated device calls `emulate` so the outputs of its launches are right, for the kernels
of the plugin's own files in kernels/ only (a user's kernel of the same name is not these;
models of users' kernels are registered through `pytest_gpuperf.simulate`). One NumPy
reference per kernel (float64 arithmetic on the float32 inputs) serves both. Tolerances
cover float32 rounding and each kernel's own summation order.

A multi-kernel scheme (dot, then dot_finish) describes its further launches as
`KernelCase.follow_ups`: their arguments may be `Ref(i)`, meaning "argument i of the first
launch" (the same device buffer), so the second pass reads what the first one wrote.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

BLOCK = 256  # threads per block in every case (THREADS_PER_BLOCK of the MI300X blog's vector add)
MAX_GRID_Y = 65535  # CUDA's grid.y limit; kernels walk further rows grid-stride
DOT_MAX_BLOCKS = 2048  # enough to fill an H100 (132 SMs) or MI300X (304 CUs) about once
EPS32 = float(np.finfo(np.float32).eps)

_F32, _F64 = np.float32, np.float64


@dataclass(frozen=True, eq=False)
class KernelCase:
    """One concrete launch of a kernel, made from a size and a seeded RNG.

    `args` are in signature order: NumPy arrays for pointer parameters (inputs random and
    never zero, outputs poisoned with NaN so an element left unwritten fails), Python numbers
    for scalars. `bytes_moved` declares each input read once and each output written once.
    """

    args: tuple
    outputs: tuple[int, ...]
    expected: dict[int, np.ndarray]
    bytes_moved: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    rtol: float
    atol: float
    follow_ups: tuple[FollowUp, ...] = ()


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


# -- NumPy references (float64 arithmetic) ------------------------------------------------


def silu_and_mul_reference(x: np.ndarray, d: int) -> np.ndarray:
    """out = silu(x[:, :d]) * x[:, d:] for x of shape [rows, 2d]."""
    gate, up = x[:, :d].astype(_F64), x[:, d:].astype(_F64)
    return gate / (1.0 + np.exp(-gate)) * up


def rmsnorm_reference(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """y = x / sqrt(mean(x^2) + eps) * w, row by row, for x of shape [rows, cols]."""
    x64 = x.astype(_F64)
    return x64 / np.sqrt(np.mean(x64 * x64, axis=1, keepdims=True) + eps) * w.astype(_F64)


def rope_reference(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """NeoX rotary embedding of x [tokens, heads, head_dim] with cos, sin [tokens, half]."""
    half = x.shape[-1] // 2
    lo, hi = x[..., :half].astype(_F64), x[..., half:].astype(_F64)
    c, s = cos.astype(_F64)[:, None, :], sin.astype(_F64)[:, None, :]
    return np.concatenate([lo * c - hi * s, hi * c + lo * s], axis=-1)


def dot_partials(a: np.ndarray, b: np.ndarray, n: int, blocks: int, threads: int) -> np.ndarray:
    """What each block of `dot` writes to `partial` (16-byte-aligned a and b).

    Mirrors dot.hip: global thread g adds float4 number g, g + T, ... (T = blocks * threads),
    and thread g < n % 4 adds element 4 * (n // 4) + g.
    """
    products = a[:n].astype(_F64) * b[:n].astype(_F64)
    quads = n // 4
    per_quad = products[: 4 * quads].reshape(quads, 4).sum(axis=1)
    owner = (np.arange(quads, dtype=np.intp) % (blocks * threads)) // threads
    # float64 even for n < 4: bincount of nothing is int64, which the tail would truncate
    partials = np.bincount(owner, weights=per_quad, minlength=blocks).astype(_F64, copy=False)
    for thread, value in enumerate(products[4 * quads :]):
        partials[thread // threads] += value
    return partials


# -- case builders ------------------------------------------------------------------------


def _values(
    rng: np.random.Generator, count: int, low: float = 0.1, high: float = 1.0, signed: bool = True
) -> np.ndarray:
    """float32 values with magnitude in [low, high]: never zero, random sign when `signed`.

    One draw of 32 random bits per value, worked in float32 and in place: the top 24 bits give
    the magnitude, the lowest the sign bit. A float64 uniform draw, a separate sign draw and
    a conversion took 2 s for the suite's 32M-element inputs (most of the suite's host time)."""
    bits = rng.integers(0, 2**32, count, dtype=np.uint32)
    values = np.right_shift(bits, 8).astype(_F32)
    values *= _F32((high - low) / 2**24)
    values += _F32(low)
    if signed:
        np.left_shift(bits, 31, out=bits)
        values.view(np.uint32)[...] |= bits
    return values


def _poison(count: int) -> np.ndarray:
    return np.full(count, np.nan, dtype=_F32)


def _blocks(work_items: int) -> int:
    return max(1, math.ceil(work_items / BLOCK))


def _nbytes(*arrays: np.ndarray) -> int:
    return sum(a.nbytes for a in arrays)


def _grid(x: int, y: int = 1) -> tuple[int, int, int]:
    return (x, y, 1)


_BLOCK3 = (BLOCK, 1, 1)


def _vector_add_case(vec4: bool) -> Callable[[int, np.random.Generator], KernelCase]:
    def make(size: int, rng: np.random.Generator) -> KernelCase:
        n = max(1, size)
        a, b, c = _values(rng, n), _values(rng, n), _poison(n)
        return KernelCase(
            args=(a, b, c, n),
            outputs=(2,),
            expected={2: a.astype(_F64) + b},
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
            args=(a, b, n),
            outputs=(1,),
            expected={1: a.astype(_F64)},
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
        args=(a, b, s, n),
        outputs=(1,),
        expected={1: s * a.astype(_F64)},
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
            args=(a, b, c, s, n),
            outputs=(2,),
            expected={2: a.astype(_F64) + s * b.astype(_F64)},
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


def _dot_finish_case(partial: Any, expected_total: float, count: int, rtol: float) -> KernelCase:
    out = _poison(1)
    inputs = count * 4
    return KernelCase(
        args=(partial, out, count),
        outputs=(1,),
        expected={1: np.array([expected_total])},
        bytes_moved=inputs + out.nbytes,
        grid=_grid(1),
        block=_BLOCK3,
        rtol=rtol,
        atol=0.0,
    )


def _dot_case(size: int, rng: np.random.Generator) -> KernelCase:
    n = max(1, size)
    # Positive inputs: every partial is a sum of positive terms, so a relative tolerance holds.
    a, b = _values(rng, n, 0.5, 1.5, signed=False), _values(rng, n, 0.5, 1.5, signed=False)
    blocks = min(DOT_MAX_BLOCKS, _blocks(math.ceil(n / 4)))
    partial = _poison(blocks)
    expected = dot_partials(a, b, n, blocks, BLOCK)
    rtol = _sum_rtol(math.ceil(n / (blocks * BLOCK)))
    finish = _dot_finish_case(Ref(2), float(expected.sum()), blocks, max(rtol, _sum_rtol(8)))
    return KernelCase(
        args=(a, b, partial, n),
        outputs=(2,),
        expected={2: expected},
        bytes_moved=_nbytes(a, b, partial),
        grid=_grid(blocks),
        block=_BLOCK3,
        rtol=rtol,
        atol=0.0,
        follow_ups=(FollowUp("dot_finish", finish),),
    )


def _dot_finish_alone(size: int, rng: np.random.Generator) -> KernelCase:
    count = max(1, size)
    partial = _values(rng, count, 0.5, 1.5, signed=False)
    rtol = _sum_rtol(math.ceil(count / BLOCK))
    return _dot_finish_case(partial, float(partial.astype(_F64).sum()), count, rtol)


def _rmsnorm_case(size: int, rng: np.random.Generator) -> KernelCase:
    cols = min(max(1, size), 4096)  # a hidden size; small sizes give one odd-length row
    rows = max(1, size // cols)
    x, w = _values(rng, rows * cols), _values(rng, cols, 0.5, 1.5, signed=False)
    y, eps = _poison(rows * cols), 1e-6
    return KernelCase(
        args=(x, w, y, rows, cols, eps),
        outputs=(2,),
        expected={2: rmsnorm_reference(x.reshape(rows, cols), w, eps).ravel()},
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
        args=(x, out, rows, d),
        outputs=(1,),
        expected={1: silu_and_mul_reference(x.reshape(rows, 2 * d), d).ravel()},
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
    angles = rng.uniform(0.0, 2 * np.pi, tokens * half)
    cos, sin = np.cos(angles).astype(_F32), np.sin(angles).astype(_F32)
    pairs = heads * (half // 4 if half % 4 == 0 else half)
    expected = rope_reference(
        x.reshape(tokens, heads, head_dim), cos.reshape(tokens, half), sin.reshape(tokens, half)
    )
    return KernelCase(
        args=(x, cos, sin, y, tokens, heads, head_dim),
        outputs=(3,),
        expected={3: expected.ravel()},
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


# -- emulation (the simulated device) -----------------------------------------------------


def _count(value: Any) -> int:
    return max(0, int(value))


def _span(view: np.ndarray, count: int, what: str) -> np.ndarray:
    """The first `count` elements; IndexError where the kernel would read past the buffer."""
    if count > view.size:
        raise IndexError(
            f"{what}: the kernel touches {count} elements, the buffer holds {view.size}"
        )
    return view[:count]


def covered_elements(name: str, count: int, threads_x: int | None) -> int:
    """How many of the first `count` elements an elementwise kernel writes when launched
    with `threads_x` threads along x (gridDim.x * blockDim.x; None: as many as it needs).

    As the sources do it: the scalar kernels give thread i element i (`if (i < n)`), so a
    grid too small leaves the rest unwritten; the float4 kernels walk grid-stride over the
    float4s, so any grid covers them, but only threads 0 .. n % 4 - 1 take the scalar tail.
    """
    if threads_x is None:
        return count
    if name in _ONE_PER_THREAD:
        return min(count, threads_x)
    body = count - count % 4
    return body + min(count - body, threads_x)


def _emulate_elementwise(name: str, args: list, threads_x: int | None) -> None:
    count = _count(args[-1])
    done = covered_elements(name, count, threads_x)
    if name == "copy" or name == "copy_vec4":
        a, b, _ = args
        _span(b, done, "b")[:] = _span(a, done, "a")
    elif name == "scale":
        a, b, s, _ = args
        _span(b, done, "b")[:] = _F32(s) * _span(a, done, "a")
    elif name in ("triad", "triad_vec4"):
        a, b, c, s, _ = args
        _span(c, done, "c")[:] = _span(a, done, "a").astype(_F64) + float(_F32(s)) * _span(
            b, done, "b"
        ).astype(_F64)
    else:  # the vector_add family
        a, b, c, _ = args
        _span(c, done, "c")[:] = _span(a, done, "a") + _span(b, done, "b")


def _emulate_dot(args: list, blocks: int | None, threads: int | None) -> None:
    a, b, partial, n = args
    count = _count(n)
    blocks = blocks or partial.size
    a, b = _span(a, count, "a"), _span(b, count, "b")
    _span(partial, blocks, "partial")[:] = dot_partials(a, b, count, blocks, threads or BLOCK)


def _emulate_dot_finish(args: list) -> None:
    partial, out, count = args
    _span(out, 1, "out")[0] = _span(partial, _count(count), "partial").astype(_F64).sum()


def _emulate_rmsnorm(args: list) -> None:
    x, w, y, rows, cols, eps = args
    rows, cols = _count(rows), _count(cols)
    if rows and cols:
        shaped = _span(x, rows * cols, "x").reshape(rows, cols)
        result = rmsnorm_reference(shaped, _span(w, cols, "w"), float(_F32(eps)))
        _span(y, rows * cols, "y")[:] = result.ravel()


def _emulate_silu_and_mul(args: list) -> None:
    x, out, rows, d = args
    rows, d = _count(rows), _count(d)
    if rows and d:
        shaped = _span(x, rows * 2 * d, "x").reshape(rows, 2 * d)
        _span(out, rows * d, "out")[:] = silu_and_mul_reference(shaped, d).ravel()


def _emulate_rope(args: list) -> None:
    x, cos, sin, y, tokens, heads, head_dim = args
    tokens, heads, half = _count(tokens), _count(heads), _count(head_dim) // 2
    if tokens and heads and half:
        size = tokens * heads * 2 * half
        result = rope_reference(
            _span(x, size, "x").reshape(tokens, heads, 2 * half),
            _span(cos, tokens * half, "cos").reshape(tokens, half),
            _span(sin, tokens * half, "sin").reshape(tokens, half),
        )
        _span(y, size, "y")[:] = result.ravel()


# One element per thread (`if (i < n)`), and float4 grid-stride with a scalar tail.
_ONE_PER_THREAD = {"vector_add", "vector_add_bypass", "vector_add_nt", "copy", "scale", "triad"}
_ELEMENTWISE = _ONE_PER_THREAD | {"vector_add_vec4", "copy_vec4", "triad_vec4"}
_OTHERS: dict[str, Callable[[list], None]] = {
    "dot_finish": _emulate_dot_finish,
    "rmsnorm": _emulate_rmsnorm,
    "silu_and_mul": _emulate_silu_and_mul,
    "rope": _emulate_rope,
}


def emulate(
    name: str,
    args: list,
    *,
    grid: Sequence[int] | int | None = None,
    block: Sequence[int] | int | None = None,
) -> bool:
    """Run kernel `name`'s semantics in place on `args`; False for a kernel not catalogued.

    Pointer parameters come as 1-D NumPy views typed by the signature, scalars as numbers.
    Raises IndexError where the kernel would access past a buffer. With `grid` and `block`
    the launch shape counts as on a GPU: the elementwise kernels write only the elements
    their threads cover (`covered_elements`: a grid too small leaves the rest as it was),
    and `dot` writes one exact partial per block. Without them every element is written,
    and `dot` assumes one block of 256 threads per element of `partial` (the catalog's
    layout), which keeps dot_finish's total right whenever `partial` is exactly one float
    per block. gpuperf_* kernels are not here: the simulated device models them itself.
    """
    if name in _ELEMENTWISE:
        _emulate_elementwise(name, args, _threads_x(grid, block))
    elif name == "dot":
        _emulate_dot(args, _x(grid), _x(block))
    elif name in _OTHERS:
        _OTHERS[name](args)
    else:
        return False
    return True


def _x(shape: Sequence[int] | int | None) -> int | None:
    if shape is None:
        return None
    return int(shape) if isinstance(shape, (int, np.integer)) else int(next(iter(shape)))


def _threads_x(grid: Sequence[int] | int | None, block: Sequence[int] | int | None) -> int | None:
    grid_x, block_x = _x(grid), _x(block)
    return None if grid_x is None or block_x is None else grid_x * block_x
