#include "gpuperf.h"

// The STREAM kernels as BabelStream runs them (one element per thread, grid = ceil(n / 256)),
// plus float4 variants (grid-stride over float4s, scalar tail, scalar fallback for pointers
// that are not 16-byte aligned; one float4 per thread when grid = ceil(ceil(n / 4) / 256)).

GPUPERF_KERNEL void copy(const float* a, float* b, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        b[i] = a[i];
    }
}

GPUPERF_KERNEL void scale(const float* a, float* b, float s, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        b[i] = s * a[i];
    }
}

// c = a + s * b
GPUPERF_KERNEL void triad(const float* a, const float* b, float* c, float s, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + s * b[i];
    }
}

GPUPERF_KERNEL void copy_vec4(const float* a, float* b, int n) {
    const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t count = n > 0 ? (size_t)n : 0;
    if (!(gp_aligned16(a) && gp_aligned16(b))) {
        for (size_t i = first; i < count; i += stride) {
            b[i] = a[i];
        }
        return;
    }
    const size_t count4 = count / 4;
    const float4* a4 = reinterpret_cast<const float4*>(a);
    float4* b4 = reinterpret_cast<float4*>(b);
    for (size_t i = first; i < count4; i += stride) {
        b4[i] = a4[i];
    }
    const size_t tail = count4 * 4 + first;
    if (tail < count) {
        b[tail] = a[tail];
    }
}

GPUPERF_KERNEL void triad_vec4(const float* a, const float* b, float* c, float s, int n) {
    const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t count = n > 0 ? (size_t)n : 0;
    if (!(gp_aligned16(a) && gp_aligned16(b) && gp_aligned16(c))) {
        for (size_t i = first; i < count; i += stride) {
            c[i] = a[i] + s * b[i];
        }
        return;
    }
    const size_t count4 = count / 4;
    const float4* a4 = reinterpret_cast<const float4*>(a);
    const float4* b4 = reinterpret_cast<const float4*>(b);
    float4* c4 = reinterpret_cast<float4*>(c);
    for (size_t i = first; i < count4; i += stride) {
        const float4 x = a4[i];
        const float4 y = b4[i];
        c4[i] = make_float4(x.x + s * y.x, x.y + s * y.y, x.z + s * y.z, x.w + s * y.w);
    }
    const size_t tail = count4 * 4 + first;
    if (tail < count) {
        c[tail] = a[tail] + s * b[tail];
    }
}
