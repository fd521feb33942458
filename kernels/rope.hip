#include "gpuperf.h"

// Rotary position embedding, NeoX style (rotate halves): for x, y of [tokens, heads,
// head_dim] and cos, sin of [tokens, head_dim / 2], row-major, with h = head_dim / 2:
//   y[t, n, i]     = x[t, n, i] * cos[t, i] - x[t, n, i + h] * sin[t, i]
//   y[t, n, i + h] = x[t, n, i + h] * cos[t, i] + x[t, n, i] * sin[t, i]      (i < h)
// head_dim must be even. grid.y walks tokens (grid-stride, at most 65535), grid.x the
// (head, i) pairs of a token (grid-stride): grid = (ceil(heads * h / 4 / 256),
// min(tokens, 65535)) with 256-thread blocks. Four consecutive i per thread (float4) when
// h % 4 == 0 and every pointer is 16-byte aligned.
GPUPERF_KERNEL void rope(const float* x, const float* cos, const float* sin, float* y,
                         int tokens, int heads, int head_dim) {
    const int half = head_dim / 2;
    const int first = blockIdx.x * blockDim.x + threadIdx.x;
    const int stride = gridDim.x * blockDim.x;
    const bool vec4 = half % 4 == 0 && gp_aligned16(x) && gp_aligned16(cos) &&
                      gp_aligned16(sin) && gp_aligned16(y);
    if (vec4) {
        const int half4 = half / 4;
        for (int t = blockIdx.y; t < tokens; t += gridDim.y) {
            const float4* c4 = reinterpret_cast<const float4*>(cos + (size_t)t * half);
            const float4* s4 = reinterpret_cast<const float4*>(sin + (size_t)t * half);
            for (int p = first; p < heads * half4; p += stride) {
                const int head = p / half4;
                const int i = p - head * half4;
                const size_t row = ((size_t)t * heads + head) * head_dim;
                const float4* lo = reinterpret_cast<const float4*>(x + row);
                float4* out = reinterpret_cast<float4*>(y + row);
                const float4 a = lo[i];
                const float4 b = lo[i + half4];
                const float4 c = c4[i];
                const float4 s = s4[i];
                out[i] = make_float4(a.x * c.x - b.x * s.x, a.y * c.y - b.y * s.y,
                                     a.z * c.z - b.z * s.z, a.w * c.w - b.w * s.w);
                out[i + half4] = make_float4(b.x * c.x + a.x * s.x, b.y * c.y + a.y * s.y,
                                             b.z * c.z + a.z * s.z, b.w * c.w + a.w * s.w);
            }
        }
        return;
    }
    for (int t = blockIdx.y; t < tokens; t += gridDim.y) {
        for (int p = first; p < heads * half; p += stride) {
            const int head = p / half;
            const int i = p - head * half;
            const size_t row = ((size_t)t * heads + head) * head_dim;
            const float a = x[row + i];
            const float b = x[row + i + half];
            const float c = cos[(size_t)t * half + i];
            const float s = sin[(size_t)t * half + i];
            y[row + i] = a * c - b * s;
            y[row + i + half] = b * c + a * s;
        }
    }
}
