// gpuperf.h: one kernel source for HIP (hiprtc, clang -x hip) and CUDA (NVRTC).
//
// Every kernel file starts with #include "gpuperf.h" and declares kernels with
// GPUPERF_KERNEL (extern "C" __global__, so module lookups by name work on both vendors).
// The helpers below have fixed names that the kernels and the tests rely on:
//   gp_load_bypass / gp_store_bypass  loads and stores that skip the L2 (HIP: system-scope
//                                     relaxed atomics, `sc0 sc1` on gfx942)
//   gp_load_nt / gp_store_nt          nontemporal (streaming) loads and stores
//   gp_wall_ns()                      a device wall clock in nanoseconds
//   gp_warp_sum / gp_block_sum        sums across a warp / a block
//   gp_aligned16(p)                   whether a pointer allows 16-byte (float4) accesses
//   GPUPERF_WARP_SIZE, GPUPERF_MAX_WARPS
#ifndef GPUPERF_H
#define GPUPERF_H

#if defined(__HIP__) || defined(__HIPCC__) || defined(__HIPCC_RTC__)
#define GPUPERF_HIP 1
#elif defined(__CUDACC__)
#define GPUPERF_CUDA 1
#else
#error "gpuperf.h: compile with hiprtc, clang/hipcc -x hip, or NVRTC"
#endif

#define GPUPERF_KERNEL extern "C" __global__

#if defined(GPUPERF_HIP)

#include <hip/hip_runtime.h>

#if defined(__AMDGCN_WAVEFRONT_SIZE)
#define GPUPERF_WARP_SIZE __AMDGCN_WAVEFRONT_SIZE
#else
#define GPUPERF_WARP_SIZE 64  // CDNA (gfx90a, gfx942) runs wave64
#endif

// wall_clock64() counts at a fixed rate the runtime reports as hipDeviceAttributeWallClockRate:
// 100 MHz on MI200 and MI300X. Override with -DGPUPERF_WALL_CLOCK_HZ=... for other parts.
#ifndef GPUPERF_WALL_CLOCK_HZ
#define GPUPERF_WALL_CLOCK_HZ 100000000ull
#endif
static_assert(1000000000ull % GPUPERF_WALL_CLOCK_HZ == 0,
              "GPUPERF_WALL_CLOCK_HZ must divide 1 GHz");

// The L2 bypass of the blog post "Making memory bound kernels go brr on a MI300X": relaxed
// atomics at system scope set sc0 sc1 on gfx942, so the line skips the L2; relaxed keeps the
// loads independent.
template <typename T>
__device__ __forceinline__ T gp_load_bypass(const T* p) {
    return __hip_atomic_load(p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
}

template <typename T>
__device__ __forceinline__ void gp_store_bypass(T* p, T v) {
    __hip_atomic_store(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
}

template <typename T>
__device__ __forceinline__ T gp_load_nt(const T* p) {
    return __builtin_nontemporal_load(p);
}

template <typename T>
__device__ __forceinline__ void gp_store_nt(T* p, T v) {
    __builtin_nontemporal_store(v, p);
}

__device__ __forceinline__ unsigned long long gp_wall_ns() {
    return wall_clock64() * (1000000000ull / GPUPERF_WALL_CLOCK_HZ);
}

__device__ __forceinline__ float gp_shfl_down(float v, int delta) {
    return __shfl_down(v, delta, GPUPERF_WARP_SIZE);
}

#else  // GPUPERF_CUDA

#define GPUPERF_WARP_SIZE 32

// The closest CUDA has to an L2 bypass: ld.global.cv fetches again from memory ("don't
// cache"), st.global.cs marks the line evict-first. NVIDIA offers no store that skips L2.
template <typename T>
__device__ __forceinline__ T gp_load_bypass(const T* p) {
    return __ldcv(p);
}

template <typename T>
__device__ __forceinline__ void gp_store_bypass(T* p, T v) {
    __stcs(p, v);
}

template <typename T>
__device__ __forceinline__ T gp_load_nt(const T* p) {
    return __ldcs(p);
}

template <typename T>
__device__ __forceinline__ void gp_store_nt(T* p, T v) {
    __stcs(p, v);
}

__device__ __forceinline__ unsigned long long gp_wall_ns() {
    unsigned long long ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
    return ns;
}

__device__ __forceinline__ float gp_shfl_down(float v, int delta) {
    return __shfl_down_sync(0xffffffffu, v, delta);
}

#endif  // GPUPERF_HIP / GPUPERF_CUDA

#define GPUPERF_MAX_WARPS (1024 / GPUPERF_WARP_SIZE)

__device__ __forceinline__ bool gp_aligned16(const void* p) {
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0;
}

// Sum over one warp; lane 0 holds the total. Every lane of the warp must take part.
__device__ __forceinline__ float gp_warp_sum(float v) {
    for (int delta = GPUPERF_WARP_SIZE / 2; delta > 0; delta /= 2) {
        v += gp_shfl_down(v, delta);
    }
    return v;
}

// Sum over the block; every thread gets the total. blockDim.x must be a multiple of
// GPUPERF_WARP_SIZE (blockDim.y = blockDim.z = 1), and `scratch` a __shared__
// float[GPUPERF_MAX_WARPS]. Safe to call again right away (it ends with a barrier).
__device__ __forceinline__ float gp_block_sum(float v, float* scratch) {
    const unsigned int lane = threadIdx.x % GPUPERF_WARP_SIZE;
    const unsigned int warp = threadIdx.x / GPUPERF_WARP_SIZE;
    v = gp_warp_sum(v);
    if (lane == 0) {
        scratch[warp] = v;
    }
    __syncthreads();
    if (warp == 0) {
        const unsigned int warps = blockDim.x / GPUPERF_WARP_SIZE;
        v = gp_warp_sum(lane < warps ? scratch[lane] : 0.0f);
        if (lane == 0) {
            scratch[0] = v;
        }
    }
    __syncthreads();
    const float total = scratch[0];
    __syncthreads();
    return total;
}

#endif  // GPUPERF_H
