#include "gpuperf.h"

// Inputs made on the device and outputs checked on the device, for the perf suite
// (pytest_gpuperf/session/device_data.py launches these; the simulated device computes the
// same with NumPy). Nothing here is timed.

// -- inputs: a counter-based hash -------------------------------------------------------------
//
// Element i of a buffer seeded `seed` is a function of (seed, i) alone, so any thread makes
// any element, every backend makes the same bits, and NumPy reproduces them (device_data.py's
// hash_bits). The mixer is "lowbias32" (Chris Wellons, "Hash Prospector"): a bijection of
// 32-bit words with low bias; only 32-bit integer arithmetic, which wraps alike everywhere.
__device__ __forceinline__ unsigned int gp_mix32(unsigned int x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

__device__ __forceinline__ unsigned int gp_hash(unsigned long long i, unsigned int seed) {
    const unsigned int stream = gp_mix32(seed ^ gp_mix32((unsigned int)(i >> 32) + 0x9E3779B9u));
    return gp_mix32((unsigned int)i ^ stream);
}

// out[i] = low + (hash >> 8) * scale, negative where the hash's lowest bit is set, when
// `signed_values`: never zero for low > 0. `scale` must be a power of two: the product is then
// exact and one rounding (of the add) remains, fused into an FMA or not, as in NumPy.
GPUPERF_KERNEL void gpuperf_fill_values(float* out, unsigned long long count, unsigned int seed,
                                        float low, float scale, int signed_values) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < count; i += stride) {
        const unsigned int h = gp_hash(i, seed);
        const float magnitude = (float)(h >> 8) * scale + low;
        out[i] = (signed_values && (h & 1u)) ? -magnitude : magnitude;  // negation is exact
    }
}

// -- references: float64 arithmetic on the float32 inputs, one plain thread per result --------

// out = alpha * a + beta * b: vector add (1, 1), copy (1, 0), scale (s, 0), triad (1, s)
GPUPERF_KERNEL void gpuperf_ref_axpby(const float* a, const float* b, double* out,
                                      unsigned long long n, double alpha, double beta) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        out[i] = alpha * (double)a[i] + beta * (double)b[i];
    }
}

// out[r, j] = silu(x[r, j]) * x[r, d + j] for x of shape [rows, 2d]
GPUPERF_KERNEL void gpuperf_ref_silu_and_mul(const float* x, double* out, unsigned long long rows,
                                             unsigned long long d) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < rows * d; i += stride) {
        const unsigned long long r = i / d, j = i % d;
        const double gate = (double)x[r * 2 * d + j], up = (double)x[r * 2 * d + d + j];
        out[i] = gate / (1.0 + exp(-gate)) * up;
    }
}

// y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w: one block per row (grid-stride over
// rows), the sum of squares reduced in shared memory in float64. Launch with 256 threads.
GPUPERF_KERNEL void gpuperf_ref_rmsnorm(const float* x, const float* w, double* y,
                                        unsigned long long rows, unsigned long long cols,
                                        double eps) {
    __shared__ double partial[256];
    for (unsigned long long r = blockIdx.x; r < rows; r += gridDim.x) {
        double sum = 0.0;
        for (unsigned long long c = threadIdx.x; c < cols; c += blockDim.x) {
            const double v = (double)x[r * cols + c];
            sum += v * v;
        }
        partial[threadIdx.x] = sum;
        __syncthreads();
        for (unsigned int half = blockDim.x / 2; half > 0; half /= 2) {
            if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
            __syncthreads();
        }
        const double inverse = 1.0 / sqrt(partial[0] / (double)cols + eps);
        for (unsigned long long c = threadIdx.x; c < cols; c += blockDim.x) {
            y[r * cols + c] = (double)x[r * cols + c] * inverse * (double)w[c];
        }
        __syncthreads();
    }
}

// NeoX rotary embedding of x [tokens, heads, 2 half] with cos, sin [tokens, half]
GPUPERF_KERNEL void gpuperf_ref_rope(const float* x, const float* cosines, const float* sines,
                                     double* y, unsigned long long tokens, unsigned long long heads,
                                     unsigned long long half) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    const unsigned long long pairs = tokens * heads * half;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < pairs; i += stride) {
        const unsigned long long t = i / (heads * half), j = i % half;
        const unsigned long long row = (i / half) * 2 * half;
        const double lo = (double)x[row + j], hi = (double)x[row + half + j];
        const double c = (double)cosines[t * half + j], s = (double)sines[t * half + j];
        y[row + j] = lo * c - hi * s;
        y[row + half + j] = hi * c + lo * s;
    }
}

// What each block of dot.hip's `dot` writes: global thread g adds float4 number g, g + T, ...
// (T = blocks * threads) and, for g < n % 4, element 4 * (n / 4) + g. One thread per block
// of `dot`, summing its threads' terms in float64 (dot.hip's order is not reproduced: the
// check's tolerance covers float32 summation). Any grid: grid-stride over `blocks`.
GPUPERF_KERNEL void gpuperf_ref_dot_partials(const float* a, const float* b, double* partial,
                                             unsigned long long n, unsigned long long blocks,
                                             unsigned long long threads) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    const unsigned long long quads = n / 4, total = blocks * threads;
    for (unsigned long long block = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         block < blocks; block += stride) {
        double sum = 0.0;
        for (unsigned long long g = block * threads; g < (block + 1) * threads; ++g) {
            for (unsigned long long q = g; q < quads; q += total) {
                for (int k = 0; k < 4; ++k) sum += (double)a[4 * q + k] * (double)b[4 * q + k];
            }
            if (g < n % 4) sum += (double)a[4 * quads + g] * (double)b[4 * quads + g];
        }
        partial[block] = sum;
    }
}

// out[0] = the sum of `count` float32 values in float64 (dot_finish's reference, from the
// partials it was given): one thread.
GPUPERF_KERNEL void gpuperf_ref_sum(const float* values, double* out, unsigned long long count) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        double sum = 0.0;
        for (unsigned long long i = 0; i < count; ++i) sum += (double)values[i];
        out[0] = sum;
    }
}

// -- the check --------------------------------------------------------------------------------
//
// Element i is wrong unless |got[i] - expected[i]| <= atol + rtol * |expected[i]| (a NaN, the
// poison of an element never written, is wrong), as numpy.testing.assert_allclose counts.
// result[0] += the number wrong; result[1] = min(result[1], the first wrong index): the host
// sets result to {0, ~0} before the launch.
GPUPERF_KERNEL void gpuperf_compare(const float* got, const double* expected,
                                    unsigned long long count, double rtol, double atol,
                                    unsigned long long* result) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long wrong = 0, first = ~0ull;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < count; i += stride) {
        const double want = expected[i];
        const double diff = fabs((double)got[i] - want);
        if (!(diff <= atol + rtol * fabs(want))) {
            ++wrong;
            if (i < first) first = i;
        }
    }
    if (wrong) {
        atomicAdd(&result[0], wrong);
        atomicMin(&result[1], first);
    }
}
