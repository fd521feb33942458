// hip/hip_bf16.h for pytest-gpuperf's static gate: __hip_bfloat16 and __hip_bfloat162 for
// device code, no ROCm needed.
//
// The gate compiles with -nogpuinc (hip_runtime.h beside this file says why), so ROCm's
// bfloat16 header is not there; bf16 kernels (most LLM kernels) would stop with
// "'hip/hip_bf16.h' file not found". This header declares what such kernels use, with the
// semantics of ROCm's public header (ROCm/clr, hipamd/include/hip/amd_detail/amd_hip_bf16.h,
// ROCm 6.2 and later): __hip_bfloat16 holds clang's __bf16, a float becomes bf16 rounded to
// nearest even (NaN stays NaN, quiet), bf16 becomes float exactly, and arithmetic is __bf16's
// own: computed in float, rounded once. gfx942 has no bf16 arithmetic, so the compiler emits
// what it emits for ROCm's header (the rounding as integer operations: v_bfe_u32, v_add3_u32
// with 0x7fff, v_cmp_u_f32 for NaN). The names covered are listed in docs/static-gate.md; a
// name outside them fails to compile, naming it.
#ifndef GPUPERF_STATIC_HIP_BF16_H
#define GPUPERF_STATIC_HIP_BF16_H

#include <hip/gpuperf_half_ops.h>

typedef __bf16 __gp_bf16_pair __attribute__((ext_vector_type(2)));

struct __attribute__((aligned(2))) __hip_bfloat16_raw {
    unsigned short x;
};
struct __attribute__((aligned(4))) __hip_bfloat162_raw {
    unsigned short x, y;
};

struct __attribute__((aligned(2))) __hip_bfloat16 {
    __bf16 __gp_v;

    __hip_bfloat16() = default;
    __device__ constexpr __hip_bfloat16(__bf16 value) : __gp_v(value) {}
    __device__ constexpr __hip_bfloat16(__hip_bfloat16_raw raw)
        : __gp_v(__builtin_bit_cast(__bf16, raw.x)) {}
    template <typename A, __gp_if_arithmetic<A> = 0>
    __device__ constexpr __hip_bfloat16(A value) : __gp_v(static_cast<__bf16>(value)) {}
    template <typename A, __gp_if_arithmetic<A> = 0>
    __device__ constexpr operator A() const {
        return static_cast<A>(__gp_v);
    }
    __device__ constexpr operator __hip_bfloat16_raw() const {
        return {__builtin_bit_cast(unsigned short, __gp_v)};
    }
};

struct __attribute__((aligned(4))) __hip_bfloat162 {
    __hip_bfloat16 x, y;

    __hip_bfloat162() = default;
    __device__ constexpr __hip_bfloat162(__hip_bfloat16 x_, __hip_bfloat16 y_) : x(x_), y(y_) {}
    __device__ constexpr __hip_bfloat162(__hip_bfloat162_raw raw)
        : x(__hip_bfloat16_raw{raw.x}), y(__hip_bfloat16_raw{raw.y}) {}
    __device__ constexpr operator __hip_bfloat162_raw() const {
        return {__builtin_bit_cast(unsigned short, x.__gp_v),
                __builtin_bit_cast(unsigned short, y.__gp_v)};
    }
    __device__ constexpr operator float2() const { return float2{(float)x, (float)y}; }
};

#define HIPRT_ZERO_BF16 __ushort_as_bfloat16((unsigned short)0x0000U)
#define HIPRT_ONE_BF16 __ushort_as_bfloat16((unsigned short)0x3F80U)
#define HIPRT_INF_BF16 __ushort_as_bfloat16((unsigned short)0x7F80U)
#define HIPRT_NAN_BF16 __ushort_as_bfloat16((unsigned short)0x7FFFU)

__GP_HALF_OPS(__hip_bfloat16, __hip_bfloat162, __bf16, __gp_bf16_pair, 0x7FFF)

__GP_HALF_CONVERSIONS(__hip_bfloat16, __hip_bfloat162, bfloat16, bfloat162, __bf16)

// ---- math: in float, rounded once (as ROCm's header computes them) ---------------------
__device__ __forceinline__ __hip_bfloat16 hsqrt(__hip_bfloat16 b) {
    return __hip_bfloat16(__builtin_sqrtf((float)b.__gp_v));
}
__device__ __forceinline__ __hip_bfloat16 hrsqrt(__hip_bfloat16 b) {
    return __hip_bfloat16(__builtin_amdgcn_rsqf((float)b.__gp_v));
}
__device__ __forceinline__ __hip_bfloat162 h2sqrt(__hip_bfloat162 b) {
    return __hip_bfloat162(hsqrt(b.x), hsqrt(b.y));
}

#endif  // GPUPERF_STATIC_HIP_BF16_H
