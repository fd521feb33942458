// hip/hip_runtime.h for pytest-gpuperf's static gate: device code only, no ROCm needed.
//
// The static gate compiles kernels with a stock clang (`clang -x hip --offload-arch=gfx942
// --cuda-device-only -nogpulib -nogpuinc`) on machines that have no ROCm. Without ROCm there
// is no HIP runtime header, and clang refuses HIP input ("cannot find HIP runtime") unless
// told -nogpuinc, which also drops the wrapper header clang would otherwise -include
// (__clang_hip_runtime_wrapper.h: __device__, __global__, __shared__, the math functions).
// That wrapper ships with clang itself (its resource directory), not with ROCm, and needs
// nothing of ROCm under __HIPCC_RTC__ (hiprtc's mode, which the gate defines): this header
// includes it first, so a -nogpuinc build sees exactly what a default one would.
//
// ROCm's own header, when it is installed, reads the launch coordinates
// through device-library functions (__ockl_get_local_id, __ockl_get_group_id, ...) that
// -nogpulib leaves unlinked: every kernel would then carry real calls, and its registers would
// be those of the calling convention, not of the kernel. This header maps the HIP device API
// that portable kernels use straight onto clang's AMDGPU built-ins, which is what the linked
// device libraries reduce to, so the code and its register counts are those of a hiprtc or
// hipcc build, up to small differences (blockDim assumes uniform workgroups, as HIP launches
// them). Math functions come from clang's own HIP wrapper headers; some of them (rsqrtf,
// ...) still call the device libraries (__ocml_*): the static facts list those calls.
//
// The launch coordinates read the implicit kernel arguments of code object version 5, which
// the static gate asks clang for (-mcode-object-version=5, the default of clang 19 and ROCm 6).
#ifndef GPUPERF_STATIC_HIP_RUNTIME_H
#define GPUPERF_STATIC_HIP_RUNTIME_H

#if !defined(__HIP__) || !defined(__AMDGCN__)
#error "pytest-gpuperf's static hip_runtime.h is for AMDGPU device compilation only"
#endif

// clang's own HIP wrapper, which -nogpuinc leaves out (clang includes it itself otherwise).
#ifndef __CLANG_HIP_RUNTIME_WRAPPER_H__
#include <__clang_hip_runtime_wrapper.h>
#endif

#define GPUPERF_STATIC_HIP_SHIM 1
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif

typedef __INT8_TYPE__ int8_t;
typedef __UINT8_TYPE__ uint8_t;
typedef __INT16_TYPE__ int16_t;
typedef __UINT16_TYPE__ uint16_t;
typedef __INT32_TYPE__ int32_t;
typedef __UINT32_TYPE__ uint32_t;
typedef __INT64_TYPE__ int64_t;
typedef __UINT64_TYPE__ uint64_t;

#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict

// HIP's definition: the maximum workgroup size, and optionally the minimum waves per EU.
#define __gp_launch_bounds_1(max_threads) \
    __attribute__((amdgpu_flat_work_group_size(1, max_threads)))
#define __gp_launch_bounds_2(max_threads, min_waves_per_eu) \
    __attribute__((amdgpu_flat_work_group_size(1, max_threads), \
                   amdgpu_waves_per_eu(min_waves_per_eu)))
#define __gp_launch_bounds_pick(_1, _2, name, ...) name
#define __launch_bounds__(...) \
    __gp_launch_bounds_pick(__VA_ARGS__, __gp_launch_bounds_2, __gp_launch_bounds_1, )(__VA_ARGS__)

#define warpSize __AMDGCN_WAVEFRONT_SIZE
#define HIP_DYNAMIC_SHARED(type, name) extern __shared__ type name[];

// ---- vector types (x, y, z, w members; HIP's sizes and alignments for 1, 2 and 4) -------
#define __GP_VECTORS(base, prefix)                                                         \
    struct __attribute__((aligned(sizeof(base)))) prefix##1 { base x; };                   \
    struct __attribute__((aligned(2 * sizeof(base)))) prefix##2 { base x, y; };            \
    struct prefix##3 { base x, y, z; };                                                     \
    struct __attribute__((aligned(4 * sizeof(base)))) prefix##4 { base x, y, z, w; };      \
    __device__ __forceinline__ constexpr prefix##1 make_##prefix##1(base x) { return {x}; } \
    __device__ __forceinline__ constexpr prefix##2 make_##prefix##2(base x, base y) {       \
        return {x, y};                                                                      \
    }                                                                                       \
    __device__ __forceinline__ constexpr prefix##3 make_##prefix##3(base x, base y, base z) { \
        return {x, y, z};                                                                   \
    }                                                                                       \
    __device__ __forceinline__ constexpr prefix##4 make_##prefix##4(base x, base y, base z, \
                                                                     base w) {              \
        return {x, y, z, w};                                                                \
    }
__GP_VECTORS(float, float)
__GP_VECTORS(double, double)
__GP_VECTORS(int, int)
__GP_VECTORS(unsigned int, uint)
__GP_VECTORS(short, short)
__GP_VECTORS(unsigned short, ushort)
__GP_VECTORS(signed char, char)
__GP_VECTORS(unsigned char, uchar)
__GP_VECTORS(long long, longlong)
__GP_VECTORS(unsigned long long, ulonglong)
#undef __GP_VECTORS

// ---- launch coordinates ----------------------------------------------------------------
struct dim3 {
    unsigned int x, y, z;
    __device__ constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1)
        : x(x_), y(y_), z(z_) {}
};

__device__ __forceinline__ uint3 __gp_thread_idx() {
    return {__builtin_amdgcn_workitem_id_x(), __builtin_amdgcn_workitem_id_y(),
            __builtin_amdgcn_workitem_id_z()};
}
__device__ __forceinline__ uint3 __gp_block_idx() {
    return {__builtin_amdgcn_workgroup_id_x(), __builtin_amdgcn_workgroup_id_y(),
            __builtin_amdgcn_workgroup_id_z()};
}
__device__ __forceinline__ uint3 __gp_block_dim() {
    return {__builtin_amdgcn_workgroup_size_x(), __builtin_amdgcn_workgroup_size_y(),
            __builtin_amdgcn_workgroup_size_z()};
}
// Code object v5 implicit arguments start with hidden_block_count_x, _y, _z (LLVM AMDGPUUsage).
__device__ __forceinline__ uint3 __gp_grid_dim() {
    const __attribute__((address_space(4))) unsigned int* count =
        (const __attribute__((address_space(4))) unsigned int*)__builtin_amdgcn_implicitarg_ptr();
    return {count[0], count[1], count[2]};
}
#define threadIdx (__gp_thread_idx())
#define blockIdx (__gp_block_idx())
#define blockDim (__gp_block_dim())
#define gridDim (__gp_grid_dim())

// ---- synchronisation and fences ---------------------------------------------------------
__device__ __forceinline__ __attribute__((convergent)) void __syncthreads() {
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
    __builtin_amdgcn_s_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
__device__ __forceinline__ void __threadfence_block() {
    __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "workgroup");
}
__device__ __forceinline__ void __threadfence() { __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "agent"); }
__device__ __forceinline__ void __threadfence_system() { __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, ""); }

// ---- clocks ---------------------------------------------------------------------------
__device__ __forceinline__ long long int wall_clock64() {
    return (long long int)__builtin_amdgcn_s_memrealtime();
}
__device__ __forceinline__ long long int clock64() {
    return (long long int)__builtin_amdgcn_s_memtime();
}
__device__ __forceinline__ long long int clock() { return clock64(); }

// ---- wave-level operations (ds_bpermute, as HIP's amd_warp_functions.h) ------------------
__device__ __forceinline__ unsigned int __lane_id() {
    return __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
}
__device__ __forceinline__ int __gp_bpermute(int lane, int value) {
    return __builtin_amdgcn_ds_bpermute(lane << 2, value);
}
__device__ __forceinline__ int __shfl(int var, int src_lane, int width = warpSize) {
    const int self = __lane_id();
    return __gp_bpermute((src_lane & (width - 1)) + (self & ~(width - 1)), var);
}
__device__ __forceinline__ int __shfl_up(int var, unsigned int delta, int width = warpSize) {
    const int self = __lane_id();
    const int index = (int)(self & (width - 1)) - (int)delta < 0 ? self : self - (int)delta;
    return __gp_bpermute(index, var);
}
__device__ __forceinline__ int __shfl_down(int var, unsigned int delta, int width = warpSize) {
    const int self = __lane_id();
    const int index = (int)((self & (width - 1)) + delta) >= width ? self : self + (int)delta;
    return __gp_bpermute(index, var);
}
__device__ __forceinline__ int __shfl_xor(int var, int mask, int width = warpSize) {
    const int self = __lane_id();
    const int index = ((self & (width - 1)) ^ mask) >= width ? self : self ^ mask;
    return __gp_bpermute(index, var);
}
#define __GP_SHFL_AS_INT(type)                                                          \
    __device__ __forceinline__ type __shfl(type v, int l, int w = warpSize) {           \
        return __builtin_bit_cast(type, __shfl(__builtin_bit_cast(int, v), l, w));      \
    }                                                                                   \
    __device__ __forceinline__ type __shfl_up(type v, unsigned d, int w = warpSize) {   \
        return __builtin_bit_cast(type, __shfl_up(__builtin_bit_cast(int, v), d, w));   \
    }                                                                                   \
    __device__ __forceinline__ type __shfl_down(type v, unsigned d, int w = warpSize) { \
        return __builtin_bit_cast(type, __shfl_down(__builtin_bit_cast(int, v), d, w)); \
    }                                                                                   \
    __device__ __forceinline__ type __shfl_xor(type v, int m, int w = warpSize) {       \
        return __builtin_bit_cast(type, __shfl_xor(__builtin_bit_cast(int, v), m, w));  \
    }
__GP_SHFL_AS_INT(float)
__GP_SHFL_AS_INT(unsigned int)
#undef __GP_SHFL_AS_INT

__device__ __forceinline__ unsigned long long __ballot(int predicate) {
    return __builtin_amdgcn_uicmp(predicate != 0, 0, 33);  // ICMP_NE: a lane mask
}
__device__ __forceinline__ int __any(int predicate) { return __ballot(predicate) != 0; }
__device__ __forceinline__ int __all(int predicate) {
    return __ballot(predicate) == __ballot(1);
}

// ---- bits -----------------------------------------------------------------------------
__device__ __forceinline__ int __popc(unsigned int x) { return __builtin_popcount(x); }
__device__ __forceinline__ int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
__device__ __forceinline__ int __clz(int x) { return x == 0 ? 32 : __builtin_clz(x); }
__device__ __forceinline__ int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(x); }
__device__ __forceinline__ int __ffs(int x) { return __builtin_ffs(x); }
__device__ __forceinline__ int __ffsll(long long x) { return __builtin_ffsll(x); }

// ---- atomics (device scope, relaxed: HIP's atomicAdd and friends) ----------------------
#define __GP_ATOMIC(name, builtin, type)                                              \
    __device__ __forceinline__ type name(type* address, type value) {                 \
        return builtin(address, value, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);   \
    }
__GP_ATOMIC(atomicAdd, __hip_atomic_fetch_add, int)
__GP_ATOMIC(atomicAdd, __hip_atomic_fetch_add, unsigned int)
__GP_ATOMIC(atomicAdd, __hip_atomic_fetch_add, unsigned long long)
__GP_ATOMIC(atomicAdd, __hip_atomic_fetch_add, float)
__GP_ATOMIC(atomicAdd, __hip_atomic_fetch_add, double)
__GP_ATOMIC(atomicMax, __hip_atomic_fetch_max, int)
__GP_ATOMIC(atomicMax, __hip_atomic_fetch_max, unsigned int)
__GP_ATOMIC(atomicMin, __hip_atomic_fetch_min, int)
__GP_ATOMIC(atomicMin, __hip_atomic_fetch_min, unsigned int)
__GP_ATOMIC(atomicMin, __hip_atomic_fetch_min, unsigned long long)
__GP_ATOMIC(atomicExch, __hip_atomic_exchange, int)
__GP_ATOMIC(atomicExch, __hip_atomic_exchange, unsigned int)
__GP_ATOMIC(atomicExch, __hip_atomic_exchange, float)
#undef __GP_ATOMIC
__device__ __forceinline__ int atomicCAS(int* address, int compare, int value) {
    __hip_atomic_compare_exchange_strong(address, &compare, value, __ATOMIC_RELAXED,
                                         __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
    return compare;
}
__device__ __forceinline__ unsigned int atomicCAS(unsigned int* address, unsigned int compare,
                                                  unsigned int value) {
    __hip_atomic_compare_exchange_strong(address, &compare, value, __ATOMIC_RELAXED,
                                         __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
    return compare;
}

template <typename T>
__device__ __forceinline__ T __ldg(const T* address) {
    return *address;
}

#endif  // GPUPERF_STATIC_HIP_RUNTIME_H
