#include "gpuperf.h"

// C[m, n] = A[m, k] @ B[k, n], row-major: A and B bf16, C fp32. The bf16 values come as
// their bit patterns (unsigned short), so one source compiles under hiprtc, clang and NVRTC
// without a bf16 header (a bf16 is the top half of an fp32). Every product and sum is an
// fp32 FMA on the vector units, no matrix (MFMA) or tensor instruction: its roof is the
// device's fp32 peak, and a test declares math="fp32" with 2 m n k FLOPs.
//
// One 256-thread block computes a 64 x 64 tile of C, 4 x 4 outputs a thread, over 16-deep
// slices of K staged in shared memory as fp32 (A transposed, so a thread's four rows are
// contiguous). Any m, n, k work (the edges are bounds-checked, zero-filled); the launch is
// grid (ceil(n / 64), ceil(m / 64)), block 256.
#define GEMM_BM 64
#define GEMM_BN 64
#define GEMM_BK 16
#define GEMM_THREADS 256

__device__ __forceinline__ float gemm_bf16_value(unsigned short bits) {
    union {
        unsigned int word;
        float value;
    } both;
    both.word = ((unsigned int)bits) << 16;
    return both.value;
}

GPUPERF_KERNEL void gemm_bf16_fp32(const unsigned short* a, const unsigned short* b, float* c,
                                   int m, int n, int k) {
    __shared__ float as[GEMM_BK][GEMM_BM];
    __shared__ float bs[GEMM_BK][GEMM_BN];
    const int tid = threadIdx.x;
    const int tx = tid % 16, ty = tid / 16;  // this thread's 4 columns and 4 rows of the tile
    const int row0 = blockIdx.y * GEMM_BM, col0 = blockIdx.x * GEMM_BN;
    float acc[4][4];
    for (int i = 0; i < 4; ++i) {
        for (int j = 0; j < 4; ++j) {
            acc[i][j] = 0.0f;
        }
    }
    for (int k0 = 0; k0 < k; k0 += GEMM_BK) {
        for (int e = tid; e < GEMM_BM * GEMM_BK; e += GEMM_THREADS) {
            const int r = e / GEMM_BK, s = e % GEMM_BK;  // A tile: 64 rows x 16
            const int gr = row0 + r, gk = k0 + s;
            as[s][r] = (gr < m && gk < k) ? gemm_bf16_value(a[(size_t)gr * k + gk]) : 0.0f;
        }
        for (int e = tid; e < GEMM_BK * GEMM_BN; e += GEMM_THREADS) {
            const int s = e / GEMM_BN, q = e % GEMM_BN;  // B tile: 16 x 64 columns
            const int gk = k0 + s, gc = col0 + q;
            bs[s][q] = (gk < k && gc < n) ? gemm_bf16_value(b[(size_t)gk * n + gc]) : 0.0f;
        }
        __syncthreads();
        for (int s = 0; s < GEMM_BK; ++s) {
            float av[4], bv[4];
            for (int i = 0; i < 4; ++i) {
                av[i] = as[s][ty * 4 + i];
                bv[i] = bs[s][tx * 4 + i];
            }
            for (int i = 0; i < 4; ++i) {
                for (int j = 0; j < 4; ++j) {
                    acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
                }
            }
        }
        __syncthreads();
    }
    for (int i = 0; i < 4; ++i) {
        const int gr = row0 + ty * 4 + i;
        for (int j = 0; j < 4; ++j) {
            const int gc = col0 + tx * 4 + j;
            if (gr < m && gc < n) {
                c[(size_t)gr * n + gc] = acc[i][j];
            }
        }
    }
}
