#include "gpuperf.h"

// Kernels used only by bench/gate_quality.py: a real slowdown and a real noise source.

// vector_add that also reads the first `extra_n` floats of `extra`: a slowdown made of
// real bytes (extra_n * 4 more than the 12 * n the test declares). The extra value never
// changes the result (`extra` holds zeros; the branch needs 1e30), but the compiler cannot
// know that, so every extra load happens.
GPUPERF_KERNEL void vector_add_extra(const float* a, const float* b, float* c,
                                     const float* extra, int n, int extra_n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float value = a[i] + b[i];
        if (i < extra_n && extra[i] == 1.0e30f) {
            value = 0.0f;
        }
        c[i] = value;
    }
}

// A bandwidth hog for a separate noise process: a grid-stride copy of `count` 16-byte
// elements, `rounds` times over, so one launch keeps the memory busy for a while.
GPUPERF_KERNEL void hog_copy(const uint4* src, uint4* dst, unsigned long long count,
                             int rounds) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (int round = 0; round < rounds; ++round) {
        for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
             i < count; i += stride) {
            dst[i] = src[i];
        }
    }
}
