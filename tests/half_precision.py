"""What the half-precision tests share: LLM-style kernels in bf16 and fp16 (one source for
clang, NVRTC and the simulated device), and the reference for float32 -> bfloat16 and ->
float16 rounding in integer arithmetic on the bits (no NumPy bfloat16, no ml_dtypes) with the
inputs that try it, which the plugin's hip_bf16.h and hip_fp16.h (tests/compile) and the
simulated device's NumPy helpers (tests/unit) are both checked against."""

from __future__ import annotations

import math
import random
import struct

# One source for every compiler: gpuperf.h maps HIP's names onto CUDA's under NVRTC, and
# hip_bf16.h / hip_fp16.h are the static gate's own headers under clang, CUDA's cuda_bf16.h
# / cuda_fp16.h under NVRTC.
HALF_KERNELS = """\
#include "gpuperf.h"
#include <hip/hip_bf16.h>
#include <hip/hip_fp16.h>

// y = x / sqrt(mean(x^2) + eps) * w per row: bf16 in and out, float accumulation.
GPUPERF_KERNEL void rmsnorm_bf16(const __hip_bfloat16* __restrict__ x,
                                 const __hip_bfloat16* __restrict__ w,
                                 __hip_bfloat16* __restrict__ y, int rows, int cols, float eps) {
    __shared__ float scratch[GPUPERF_MAX_WARPS];
    for (int row = blockIdx.x; row < rows; row += gridDim.x) {
        const __hip_bfloat16* in = x + (long long)row * cols;
        float sum = 0.0f;
        for (int c = threadIdx.x; c < cols; c += blockDim.x) {
            const float v = __bfloat162float(in[c]);
            sum += v * v;
        }
        const float scale = rsqrtf(gp_block_sum(sum, scratch) / cols + eps);
        for (int c = threadIdx.x; c < cols; c += blockDim.x) {
            y[(long long)row * cols + c] = __float2bfloat16(__bfloat162float(in[c]) * scale) * w[c];
        }
    }
}

// out = silu(gate) * up on bf16 pairs; x holds n gate pairs, then n up pairs.
GPUPERF_KERNEL void silu_and_mul_bf16x2(const __hip_bfloat162* x, __hip_bfloat162* out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float2 gate = __bfloat1622float2(x[i]);
        const float2 up = __bfloat1622float2(x[i + n]);
        gate.x = gate.x / (1.0f + __expf(-gate.x)) * up.x;
        gate.y = gate.y / (1.0f + __expf(-gate.y)) * up.y;
        const __hip_bfloat16 floor = __hneg(__habs(__high2bfloat16(x[i + n])));
        out[i] = __hmax2(__float22bfloat162_rn(gate), __halves2bfloat162(HIPRT_ZERO_BF16, floor));
    }
}

// y = a * x + y on half pairs: one fused multiply-add per pair.
GPUPERF_KERNEL void axpy_half2(const __half2* x, __half2* y, float a, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = __hfma2(__float2half2_rn(a), x[i], y[i]);
    }
}
"""


def float_bits(value: float) -> int:
    return struct.unpack("<I", struct.pack("<f", value))[0]


def bits_float(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def is_nan_bits(bits: int) -> bool:
    return (bits & 0x7FFFFFFF) > 0x7F800000


def bf16_bits(bits: int) -> int:
    """float32 bits -> bfloat16 bits: the 16 bits kept, rounded to nearest by the 16 dropped,
    a tie to the even one; a NaN keeps its sign and top payload and becomes quiet."""
    if is_nan_bits(bits):
        return (bits >> 16) | 0x0040
    kept, dropped = bits >> 16, bits & 0xFFFF
    if dropped > 0x8000 or (dropped == 0x8000 and kept & 1):
        kept += 1  # a carry into the exponent is right: the next binade, or infinity
    return kept & 0xFFFF


def fp16_bits(bits: int) -> int:
    """float32 bits -> IEEE half bits, to nearest (ties to even), subnormals and overflow to
    infinity included; a NaN gives a NaN (its payload is not compared)."""
    sign = (bits >> 16) & 0x8000
    if is_nan_bits(bits):
        return sign | 0x7E00
    value = abs(bits_float(bits))
    if math.isinf(value) or value >= 65520.0:  # 65504 + half an ulp (32) rounds up to inf
        return sign | 0x7C00
    # value = m * 2^-24 for the subnormal grid, m * 2^(e-10) for normals: round m exactly
    exponent = max(math.frexp(value)[1] - 1, -14) if value else -14
    scale = 2.0 ** (exponent - 10)
    quotient = value / scale  # exact: a float32 over a power of two
    whole = math.floor(quotient)
    rest = quotient - whole
    if rest > 0.5 or (rest == 0.5 and whole & 1):
        whole += 1
    if whole >= 2048:  # rounded up into the next binade
        whole //= 2
        exponent += 1
    if exponent > 15:
        return sign | 0x7C00
    if whole < 1024:  # subnormal (or zero)
        return sign | whole
    return sign | ((exponent + 15) << 10) | (whole - 1024)


def conversion_inputs(count: int = 1500, seed: int = 58) -> list[int]:
    """float32 bit patterns that try a 16-bit rounding: zeros, ones, the limits, infinities
    and NaNs, exact ties to even and odd for both formats and their neighbours, float16's
    subnormals and overflow, and random patterns."""
    chosen = {0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x7F7FFFFF, 0xFF7FFFFF}
    chosen |= {0x00800000, 0x00000001, 0x807FFFFF, 0x7F800000, 0xFF800000}
    chosen |= {0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FBFFFFF, 0xFF812345}
    for value in (65504.0, 65519.99, 65520.0, 6.1035156e-05, 5.9604645e-08, 2.9802322e-08):
        chosen |= {float_bits(value), float_bits(-value)}
    rng = random.Random(seed)
    for _ in range(count // 4):
        high = rng.getrandbits(16) & 0x7F7F  # a finite bfloat16
        for dropped in (0x8000, 0x7FFF, 0x8001):  # a tie, and just below and above it
            chosen.add((high << 16) | dropped)
        half_grid = float_bits(rng.uniform(-60000.0, 60000.0)) & ~0x1FFF
        chosen |= {half_grid | 0x1000, half_grid | 0x0FFF, (half_grid | 0x1000) + 1}
    while len(chosen) < count + 60:
        chosen.add(rng.getrandbits(32))
    return sorted(chosen)
