"""bfloat16 in NumPy, for the models of bf16 kernels on the simulated device.

NumPy has no bfloat16 type (ml_dtypes would be a dependency for two functions), so the
simulated device hands a model a `__hip_bfloat16*` (or `__nv_bfloat16*`, `__bf16*`) buffer
as uint16 bit patterns, and a model converts with these:

    from pytest_gpuperf.simulate.bfloat16 import from_bfloat16, to_bfloat16

    @simulate.model("rmsnorm_bf16.hip", "rmsnorm_bf16")
    def rmsnorm(args, launch):
        x, w, y, rows, cols, eps = args
        ...
        y[: rows * cols] = to_bfloat16(values)

They round as the device does: a float32 becomes the nearest bfloat16, ties to even, and a
NaN stays a (quiet) NaN, as `__float2bfloat16` of HIP's hip_bf16.h and of CUDA's cuda_bf16.h
do; bfloat16 becomes float32 exactly. tests/compile checks the same inputs against the
plugin's hip_bf16.h as clang-19 evaluates it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_QUIET_BIT = np.uint32(0x0040)  # the top mantissa bit of a bfloat16


def to_bfloat16(values: Any) -> np.ndarray:
    """The bfloat16 bit patterns (uint16) nearest to `values`, ties to even.

    `values` are taken as float32 (a float64 is rounded to float32 first, as a kernel's
    `__float2bfloat16(float)` receives it)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    # Adding 0x7FFF plus the bit that becomes the last kept one rounds to nearest, ties to
    # even; a carry into the exponent is right (it rounds up to the next binade or to inf).
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> 16
    nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    quiet = (bits >> np.uint32(16)) | _QUIET_BIT  # a NaN keeps its sign and top payload
    return np.where(nan, quiet, rounded).astype(np.uint16)


def from_bfloat16(bits: Any) -> np.ndarray:
    """bfloat16 bit patterns (uint16) as float32 values (exact)."""
    wide = np.ascontiguousarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)
    return wide.view(np.float32)


__all__ = ["from_bfloat16", "to_bfloat16"]
