#include "gpuperf.h"

// y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w, for row-major x, y of [rows, cols].
// One block per row (grid-stride over rows, so any grid works; grid = rows is the usual
// launch), blockDim.x a multiple of the warp size (256 suggested). float4 accesses when
// cols % 4 == 0 and x, w, y are 16-byte aligned. The second pass re-reads the row, which a
// block has just read, so it comes from L1/L2 for rows of a few thousand floats.
GPUPERF_KERNEL void rmsnorm(const float* x, const float* w, float* y, int rows, int cols,
                            float eps) {
    __shared__ float scratch[GPUPERF_MAX_WARPS];
    const bool vec4 = cols % 4 == 0 && gp_aligned16(x) && gp_aligned16(w) && gp_aligned16(y);
    for (int row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* xr = x + (size_t)row * cols;
        float* yr = y + (size_t)row * cols;
        float squares = 0.0f;
        if (vec4) {
            const float4* x4 = reinterpret_cast<const float4*>(xr);
            for (int c = threadIdx.x; c < cols / 4; c += blockDim.x) {
                const float4 v = x4[c];
                squares += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
            }
        } else {
            for (int c = threadIdx.x; c < cols; c += blockDim.x) {
                squares += xr[c] * xr[c];
            }
        }
        const float inv_rms = rsqrtf(gp_block_sum(squares, scratch) / cols + eps);
        if (vec4) {
            const float4* x4 = reinterpret_cast<const float4*>(xr);
            const float4* w4 = reinterpret_cast<const float4*>(w);
            float4* y4 = reinterpret_cast<float4*>(yr);
            for (int c = threadIdx.x; c < cols / 4; c += blockDim.x) {
                const float4 v = x4[c];
                const float4 g = w4[c];
                y4[c] = make_float4(v.x * inv_rms * g.x, v.y * inv_rms * g.y,
                                    v.z * inv_rms * g.z, v.w * inv_rms * g.w);
            }
        } else {
            for (int c = threadIdx.x; c < cols; c += blockDim.x) {
                yr[c] = xr[c] * inv_rms * w[c];
            }
        }
    }
}
