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

// gate-quality kernel: begin
// (bench/gate_quality.py copies this block into the kernel files of its throwaway project,
// each with its own #define EXTRA_PERMILLE / GQ_SALT above it.)
//
// c = a + b over n floats, reading EXTRA_PERMILLE per mille more bytes than the 12 n it
// declares: the first 3 n x EXTRA_PERMILLE / 1000 floats of `extra` (at most n: 333 per mille).
// `extra` holds zeros and the branch needs 1e30, so c never changes, but the compiler cannot
// know that, so every extra load happens. Raising EXTRA_PERMILLE in a file is a real code
// change that moves more memory while the launch, the arguments and the declared bytes stay
// the same: what a regressing pull request looks like to an A/B comparison.
// GQ_SALT changes the code object without changing the work (a compare with a constant that
// a sum of two floats in [0, 1) never equals): the A/A' control, other code of equal speed.
#ifndef EXTRA_PERMILLE
#define EXTRA_PERMILLE 0
#endif
#ifndef GQ_SALT
#define GQ_SALT 1
#endif
static_assert(EXTRA_PERMILLE >= 0 && EXTRA_PERMILLE <= 333,
              "vector_add_more reads at most one extra float per element");
GPUPERF_KERNEL void vector_add_more(const float* a, const float* b, float* c,
                                    const float* extra, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float value = a[i] + b[i];
        // i < 3 n P / 1000 without a 64-bit division per thread: a division's instructions
        // cost a short kernel about 1% on its own, a fixed step no byte count could undo.
        if (1000LL * i < 3LL * n * EXTRA_PERMILLE && extra[i] == 1.0e30f) {
            value = 0.0f;
        }
        if (value == -1.0e30f * GQ_SALT) {
            value = 1.0f;
        }
        c[i] = value;
    }
}
// gate-quality kernel: end
