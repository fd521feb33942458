// hip/hip_fp16.h for pytest-gpuperf's static gate: __half and __half2 for device code, no
// ROCm needed.
//
// The gate compiles with -nogpuinc (hip_runtime.h beside this file says why), so ROCm's
// half-precision header is not there; kernels that include it (most LLM kernels) would stop
// with "'hip/hip_fp16.h' file not found". This header declares what such kernels use, with
// the semantics of ROCm's public header (ROCm/clr, hipamd/include/hip/amd_detail/
// amd_hip_fp16.h): __half holds a _Float16, every conversion and operation is _Float16's own
// (round to nearest even), and gfx9's half instructions do the work (v_cvt_f16_f32,
// v_add_f16, v_fma_f16, v_pk_fma_f16 for __half2), as a hiprtc build with ROCm's header
// compiles to. Where ROCm's header calls a device-library function (__ocml_fma_f16,
// __ocml_sqrt_f16), this one calls the built-in those reduce to. The names covered are
// listed in docs/static-gate.md; a name outside them fails to compile, naming it.
#ifndef GPUPERF_STATIC_HIP_FP16_H
#define GPUPERF_STATIC_HIP_FP16_H

#include <hip/gpuperf_half_ops.h>

typedef _Float16 __gp_half_pair __attribute__((ext_vector_type(2)));

struct __half_raw {
    union {
        _Float16 data;
        unsigned short x;
    };
};
struct __half2_raw {
    union {
        __gp_half_pair data;
        struct {
            unsigned short x, y;
        };
    };
};

struct __attribute__((aligned(2))) __half {
    _Float16 __gp_v;

    __half() = default;
    __device__ constexpr __half(_Float16 value) : __gp_v(value) {}
    __device__ constexpr __half(__half_raw raw) : __gp_v(raw.data) {}
    template <typename A, __gp_if_arithmetic<A> = 0>
    __device__ constexpr __half(A value) : __gp_v(static_cast<_Float16>(value)) {}
    template <typename A, __gp_if_arithmetic<A> = 0>
    __device__ constexpr operator A() const {
        return static_cast<A>(__gp_v);
    }
    __device__ constexpr operator __half_raw() const {
        __half_raw raw{};
        raw.data = __gp_v;
        return raw;
    }
};

struct __attribute__((aligned(4))) __half2 {
    __half x, y;

    __half2() = default;
    __device__ constexpr __half2(__half x_, __half y_) : x(x_), y(y_) {}
    __device__ constexpr __half2(__half2_raw raw) : x(raw.data.x), y(raw.data.y) {}
    __device__ constexpr operator __half2_raw() const {
        __half2_raw raw{};
        raw.data = __gp_half_pair{x.__gp_v, y.__gp_v};
        return raw;
    }
};

typedef __half half;
typedef __half2 half2;

__GP_HALF_OPS(__half, __half2, _Float16, __gp_half_pair, 0x7FFF)

__GP_HALF_CONVERSIONS(__half, __half2, half, half2, _Float16)
__device__ __forceinline__ constexpr __half __uint2half_rn(unsigned int i) { return __half(i); }
__device__ __forceinline__ constexpr unsigned int __half2uint_rz(__half h) {
    return (unsigned int)h.__gp_v;
}

// ---- math ----------------------------------------------------------------------------
__device__ __forceinline__ __half hsqrt(__half h) { return __half(__builtin_sqrtf16(h.__gp_v)); }
__device__ __forceinline__ __half hrsqrt(__half h) {
    return __half(__builtin_amdgcn_rsqh(h.__gp_v));
}
__device__ __forceinline__ __half2 h2sqrt(__half2 h) { return __half2(hsqrt(h.x), hsqrt(h.y)); }

#endif  // GPUPERF_STATIC_HIP_FP16_H
