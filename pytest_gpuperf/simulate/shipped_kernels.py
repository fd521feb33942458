"""What the plugin's shipped kernels (kernels/*.hip) compute, in NumPy.

The simulated device runs the perf suite's kernels and the check kernels of gpuperf_check.hip
through `emulate`, so their outputs are right without a GPU (for the plugin's own files in
kernels/ only: a user's kernel of the same name is not these; models of users' kernels are
registered through `pytest_gpuperf.simulate`). One float64 reference per kernel serves the
emulation and the catalog's explanation of a failure on a GPU (`session/catalog.py`, which
describes the same kernels as concrete problems). This module sits below the session layer
so that the simulated device needs nothing from above it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pytest_gpuperf.simulate.input_hash import Values

BLOCK = 256  # threads per block of the catalog's launches (THREADS_PER_BLOCK of the MI300X
# blog's vector add); `emulate` assumes it for dot's partials when no launch shape is given
CHECK_KERNELS = frozenset(
    {
        "gpuperf_fill_values",
        "gpuperf_ref_axpby",
        "gpuperf_ref_silu_and_mul",
        "gpuperf_ref_rmsnorm",
        "gpuperf_ref_rope",
        "gpuperf_ref_dot_partials",
        "gpuperf_ref_sum",
        "gpuperf_compare",
    }
)  # gpuperf_check.hip's kernels

_F32, _F64 = np.float32, np.float64


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
        _rope_into(x, cos, sin, y, tokens, heads, half)


def _rope_into(x: Any, cos: Any, sin: Any, y: Any, tokens: int, heads: int, half: int) -> None:
    """y = rope(x) over tokens x heads rows of 2 * half (the kernel's and the reference's)."""
    size = tokens * heads * 2 * half
    result = rope_reference(
        _span(x, size, "x").reshape(tokens, heads, 2 * half),
        _span(cos, tokens * half, "cos").reshape(tokens, half),
        _span(sin, tokens * half, "sin").reshape(tokens, half),
    )
    _span(y, size, "y")[:] = result.ravel()


CHECK_CHUNK = 2**18  # elements per pass: the temporaries stay in the CPU's caches


def bf16_values(bits: np.ndarray) -> np.ndarray:
    """bf16 bit patterns (uint16) as the float32 values they are: the top half of a float32."""
    return (np.asarray(bits, dtype=np.uint32) << 16).view(np.float32)


def gemm_reference(a_bits: np.ndarray, b_bits: np.ndarray) -> np.ndarray:
    """C = A @ B in float64 for bf16 A [m, k] and B [k, n] given as their bit patterns."""
    return bf16_values(a_bits).astype(_F64) @ bf16_values(b_bits).astype(_F64)


def _emulate_gemm(args: list, grid: Sequence[int] | int | None) -> None:
    """gemm.hip's gemm_bf16_fp32: each block of the grid writes its 64 x 64 tile of C (fp32
    sums; the grid's uncovered tiles keep what C held)."""
    a, b, c, m, n, k = args
    m, n, k = _count(m), _count(n), _count(k)
    grid3 = tuple(grid) if isinstance(grid, (tuple, list)) else (_x(grid) or 1, 1, 1)
    rows = m if grid is None else min(m, int(grid3[1]) * 64)
    cols = n if grid is None else min(n, int(grid3[0]) * 64)
    a_values = bf16_values(_span(a, m * k, "a")).reshape(m, k)
    b_values = bf16_values(_span(b, k * n, "b")).reshape(k, n)
    out = _span(c, m * n, "c").reshape(m, n)
    out[:rows, :cols] = a_values[:rows] @ b_values[:, :cols]


def wrong_elements(got: np.ndarray, expected: Any, rtol: float, atol: float) -> np.ndarray:
    """Flat indices of the elements outside |got - expected| <= atol + rtol |expected| (NaN,
    the poison, counts as wrong), as gpuperf_compare counts them. Worked in chunks with
    in-place arithmetic: the whole-array expression made five 32M-element float64
    temporaries and cost more host time than the measurement it guards."""
    flat_got = got.reshape(-1)
    flat_expected = np.broadcast_to(np.asarray(expected), got.shape).reshape(-1)
    bad = []
    for start in range(0, flat_got.size, CHECK_CHUNK):
        part = slice(start, start + CHECK_CHUNK)
        want = flat_expected[part]
        diff = np.subtract(flat_got[part], want, dtype=np.float64)
        np.abs(diff, out=diff)
        bound = np.abs(want, dtype=np.float64)
        bound *= rtol
        bound += atol
        wrong = ~(diff <= bound)
        if wrong.any():
            bad.append(np.flatnonzero(wrong) + start)
    return np.concatenate(bad) if bad else np.empty(0, dtype=np.intp)


def _emulate_check(name: str, args: list) -> bool:
    """Check kernel `name` of gpuperf_check.hip in place on `args`: the hash as Values.host
    makes it, the references as NumPy computes them, the compare kernel's count and first
    index. None of them depends on the launch shape (grid-stride, or a loop over blocks)."""
    f64 = np.float64
    if name == "gpuperf_fill_values":
        out, count, seed, low, scale, signed = args
        count = int(count)
        _span(out, count, "out")[:] = Values(
            count, int(seed), float(low), scale * 2**24, bool(signed)
        ).host()
    elif name == "gpuperf_ref_axpby":
        a, b, out, n, alpha, beta = args
        n = int(n)
        _span(out, n, "out")[:] = alpha * _span(a, n, "a").astype(f64) + beta * _span(
            b, n, "b"
        ).astype(f64)
    elif name == "gpuperf_ref_silu_and_mul":
        x, out, rows, d = (args[0], args[1], int(args[2]), int(args[3]))
        shaped = _span(x, rows * 2 * d, "x").reshape(rows, 2 * d)
        _span(out, rows * d, "out")[:] = silu_and_mul_reference(shaped, d).ravel()
    elif name == "gpuperf_ref_rmsnorm":
        x, w, y, rows, cols, eps = args
        rows, cols = int(rows), int(cols)
        shaped = _span(x, rows * cols, "x").reshape(rows, cols)
        result = rmsnorm_reference(shaped, _span(w, cols, "w"), float(eps))
        _span(y, rows * cols, "y")[:] = result.ravel()
    elif name == "gpuperf_ref_rope":
        x, cos, sin, y, tokens, heads, half = args
        _rope_into(x, cos, sin, y, int(tokens), int(heads), int(half))
    elif name == "gpuperf_ref_dot_partials":
        a, b, partial, n, blocks, threads = args
        n, blocks, threads = int(n), int(blocks), int(threads)
        found = dot_partials(_span(a, n, "a"), _span(b, n, "b"), n, blocks, threads)
        _span(partial, blocks, "partial")[:] = found
    elif name == "gpuperf_ref_sum":
        values, out, count = args
        _span(out, 1, "out")[0] = _span(values, int(count), "values").astype(f64).sum()
    elif name == "gpuperf_compare":
        got, expected, count, rtol, atol, result = args
        count = int(count)
        bad = wrong_elements(
            _span(got, count, "got"), _span(expected, count, "expected"), rtol, atol
        )
        _span(result, 2, "result")
        if bad.size:
            result[0] += np.uint64(bad.size)
            result[1] = min(int(result[1]), int(bad[0]))
    else:
        return False
    return True


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
    per block. The check kernels of gpuperf_check.hip (CHECK_KERNELS) run as
    device_data.emulate; the measurement engine's gpuperf_* kernels are not here: the
    simulated device models them itself.
    """
    if name in CHECK_KERNELS:
        return _emulate_check(name, args)
    if name in _ELEMENTWISE:
        _emulate_elementwise(name, args, _threads_x(grid, block))
    elif name == "dot":
        _emulate_dot(args, _x(grid), _x(block))
    elif name == "gemm_bf16_fp32":
        _emulate_gemm(args, grid)
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


# Every kernel `emulate` computes: the catalog's kernels and the check kernels.
EMULATED = frozenset(_ELEMENTWISE | {"dot", "gemm_bf16_fp32"} | set(_OTHERS) | CHECK_KERNELS)
