#include "gpuperf.h"

__device__ __forceinline__ float silu(float v) {
    return v / (1.0f + expf(-v));
}

// out[r, j] = silu(x[r, j]) * x[r, d + j] for x of [rows, 2d] and out of [rows, d], row-major
// (the gated MLP activation). grid.y walks rows (grid-stride, at most 65535), grid.x the
// columns (grid-stride): grid = (ceil(d / 4 / 256), min(rows, 65535)) with 256-thread blocks.
// float4 accesses when d % 4 == 0 and x, out are 16-byte aligned.
GPUPERF_KERNEL void silu_and_mul(const float* x, float* out, int rows, int d) {
    const int first = blockIdx.x * blockDim.x + threadIdx.x;
    const int stride = gridDim.x * blockDim.x;
    if (d % 4 == 0 && gp_aligned16(x) && gp_aligned16(out)) {
        const int d4 = d / 4;
        for (int row = blockIdx.y; row < rows; row += gridDim.y) {
            const float4* gate = reinterpret_cast<const float4*>(x + (size_t)row * 2 * d);
            const float4* up = gate + d4;
            float4* o = reinterpret_cast<float4*>(out + (size_t)row * d);
            for (int j = first; j < d4; j += stride) {
                const float4 g = gate[j];
                const float4 u = up[j];
                o[j] = make_float4(silu(g.x) * u.x, silu(g.y) * u.y, silu(g.z) * u.z,
                                   silu(g.w) * u.w);
            }
        }
        return;
    }
    for (int row = blockIdx.y; row < rows; row += gridDim.y) {
        const float* gate = x + (size_t)row * 2 * d;
        const float* up = gate + d;
        float* o = out + (size_t)row * d;
        for (int j = first; j < d; j += stride) {
            o[j] = silu(gate[j]) * up[j];
        }
    }
}
