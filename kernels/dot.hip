#include "gpuperf.h"

// Dot product in two passes, no atomics (so the result does not depend on block timing):
//   dot        <<<blocks, 256>>>  partial[block] = this block's share of sum(a[i] * b[i])
//   dot_finish <<<1, 256>>>       out[0] = sum(partial[0 .. count))
// `partial` holds one float per block of the first launch; pass that block count as `count`.
// Blocks must be a multiple of the warp size (gp_block_sum).
//
// Who adds what (the catalog's NumPy model reproduces it exactly): with 16-byte-aligned
// pointers, global thread g adds the float4s g, g + T, g + 2T, ... (T = all threads), and
// thread g < n % 4 adds element 4 * (n / 4) + g; otherwise thread g adds elements g, g + T, ...

GPUPERF_KERNEL void dot(const float* a, const float* b, float* partial, int n) {
    __shared__ float scratch[GPUPERF_MAX_WARPS];
    const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t count = n > 0 ? (size_t)n : 0;
    float sum = 0.0f;
    if (gp_aligned16(a) && gp_aligned16(b)) {
        const size_t count4 = count / 4;
        const float4* a4 = reinterpret_cast<const float4*>(a);
        const float4* b4 = reinterpret_cast<const float4*>(b);
        for (size_t i = first; i < count4; i += stride) {
            const float4 x = a4[i];
            const float4 y = b4[i];
            sum += x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w;
        }
        const size_t tail = count4 * 4 + first;
        if (tail < count) {
            sum += a[tail] * b[tail];
        }
    } else {
        for (size_t i = first; i < count; i += stride) {
            sum += a[i] * b[i];
        }
    }
    sum = gp_block_sum(sum, scratch);
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = sum;
    }
}

GPUPERF_KERNEL void dot_finish(const float* partial, float* out, int count) {
    __shared__ float scratch[GPUPERF_MAX_WARPS];
    float sum = 0.0f;
    for (int i = threadIdx.x; i < count; i += blockDim.x) {
        sum += partial[i];
    }
    sum = gp_block_sum(sum, scratch);
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        out[0] = sum;
    }
}
