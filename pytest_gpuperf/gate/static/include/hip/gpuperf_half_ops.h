// What hip/hip_fp16.h and hip/hip_bf16.h of pytest-gpuperf's static gate have in common: the
// arithmetic, comparisons, operators and warp shuffles of a 16-bit float type and its 2-wide
// form, written once over the compiler's native type (_Float16 for __half, __bf16 for
// __hip_bfloat16). Device code only, no ROCm needed; see those headers for why they exist.
//
// Semantics follow ROCm's public headers (ROCm/clr, hipamd/include/hip/amd_detail/
// amd_hip_fp16.h and amd_hip_bf16.h, where each operation is the native type's own: a + b on
// _Float16 or __bf16, fma through the compiler's fma built-in): every result is computed as
// the native type computes it and rounded to nearest even once. For __bf16, which gfx9 has
// no arithmetic for, clang computes in float and rounds the result, as it does for ROCm's
// header. __hmax/__hmin return the other operand when one is NaN and a canonical NaN when
// both are, as ROCm's do. This file is ours; none of ROCm's code is copied.
#ifndef GPUPERF_STATIC_HALF_OPS_H
#define GPUPERF_STATIC_HALF_OPS_H

#include <hip/hip_runtime.h>

// The one trait the types' converting constructors and operators need (no <type_traits>:
// the gate compiles without a C++ library).
template <bool condition>
struct __gp_enable_if {};
template <>
struct __gp_enable_if<true> {
    using type = int;
};
template <typename T>
using __gp_if_arithmetic = typename __gp_enable_if<__is_arithmetic(T)>::type;

// __GP_HALF_OPS(T, T2, NATIVE, NATIVE2, NAN_BITS): the functions and operators of the 16-bit
// type T (member __gp_v of type NATIVE) and its pair T2 (members x, y of type T).
#define __GP_HALF_OPS(T, T2, NATIVE, NATIVE2, NAN_BITS)                                           \
    __device__ __forceinline__ constexpr NATIVE2 __gp_pair(T2 a) { return {a.x.__gp_v, a.y.__gp_v}; } \
    __device__ __forceinline__ constexpr T2 __gp_unpair(NATIVE2 v) { return T2(T(v.x), T(v.y)); } \
    __device__ __forceinline__ constexpr bool __hisnan(T a) { return a.__gp_v != a.__gp_v; }     \
    __device__ __forceinline__ constexpr int __hisinf(T a) {                                      \
        return a.__gp_v == (NATIVE)__builtin_inff() || a.__gp_v == -(NATIVE)__builtin_inff();    \
    }                                                                                             \
    __device__ __forceinline__ constexpr T __hadd(T a, T b) { return T(NATIVE(a.__gp_v + b.__gp_v)); } \
    __device__ __forceinline__ constexpr T __hsub(T a, T b) { return T(NATIVE(a.__gp_v - b.__gp_v)); } \
    __device__ __forceinline__ constexpr T __hmul(T a, T b) { return T(NATIVE(a.__gp_v * b.__gp_v)); } \
    __device__ __forceinline__ constexpr T __hdiv(T a, T b) { return T(NATIVE(a.__gp_v / b.__gp_v)); } \
    __device__ __forceinline__ T __hfma(T a, T b, T c) {                                          \
        return T(__builtin_elementwise_fma(a.__gp_v, b.__gp_v, c.__gp_v));                       \
    }                                                                                             \
    __device__ __forceinline__ constexpr T __hneg(T a) { return T(NATIVE(-a.__gp_v)); }           \
    __device__ __forceinline__ constexpr T __habs(T a) {                                          \
        return T(__builtin_bit_cast(NATIVE, (unsigned short)(                                    \
            __builtin_bit_cast(unsigned short, a.__gp_v) & 0x7FFFu)));                           \
    }                                                                                             \
    __device__ __forceinline__ constexpr T __gp_nan_operand(T a, T b) {                           \
        return __hisnan(a) && __hisnan(b)                                                         \
                   ? T(__builtin_bit_cast(NATIVE, (unsigned short)(NAN_BITS)))                    \
                   : (__hisnan(a) ? b : a);                                                       \
    }                                                                                             \
    __device__ __forceinline__ constexpr T __hmax(T a, T b) {                                     \
        return __hisnan(a) || __hisnan(b) ? __gp_nan_operand(a, b) : a.__gp_v > b.__gp_v ? a : b; \
    }                                                                                             \
    __device__ __forceinline__ constexpr T __hmin(T a, T b) {                                     \
        return __hisnan(a) || __hisnan(b) ? __gp_nan_operand(a, b) : a.__gp_v < b.__gp_v ? a : b; \
    }                                                                                             \
    __device__ __forceinline__ constexpr bool __heq(T a, T b) { return a.__gp_v == b.__gp_v; }  \
    __device__ __forceinline__ constexpr bool __hne(T a, T b) { return a.__gp_v != b.__gp_v; }  \
    __device__ __forceinline__ constexpr bool __hlt(T a, T b) { return a.__gp_v < b.__gp_v; }   \
    __device__ __forceinline__ constexpr bool __hle(T a, T b) { return a.__gp_v <= b.__gp_v; }  \
    __device__ __forceinline__ constexpr bool __hgt(T a, T b) { return a.__gp_v > b.__gp_v; }   \
    __device__ __forceinline__ constexpr bool __hge(T a, T b) { return a.__gp_v >= b.__gp_v; }  \
    __device__ __forceinline__ constexpr T operator+(T a) { return a; }                           \
    __device__ __forceinline__ constexpr T operator-(T a) { return __hneg(a); }                   \
    __device__ __forceinline__ constexpr T operator+(T a, T b) { return __hadd(a, b); }           \
    __device__ __forceinline__ constexpr T operator-(T a, T b) { return __hsub(a, b); }           \
    __device__ __forceinline__ constexpr T operator*(T a, T b) { return __hmul(a, b); }           \
    __device__ __forceinline__ constexpr T operator/(T a, T b) { return __hdiv(a, b); }           \
    __device__ __forceinline__ constexpr T& operator+=(T& a, T b) { return a = __hadd(a, b); }    \
    __device__ __forceinline__ constexpr T& operator-=(T& a, T b) { return a = __hsub(a, b); }    \
    __device__ __forceinline__ constexpr T& operator*=(T& a, T b) { return a = __hmul(a, b); }    \
    __device__ __forceinline__ constexpr T& operator/=(T& a, T b) { return a = __hdiv(a, b); }    \
    __device__ __forceinline__ constexpr bool operator==(T a, T b) { return __heq(a, b); }        \
    __device__ __forceinline__ constexpr bool operator!=(T a, T b) { return __hne(a, b); }        \
    __device__ __forceinline__ constexpr bool operator<(T a, T b) { return __hlt(a, b); }         \
    __device__ __forceinline__ constexpr bool operator<=(T a, T b) { return __hle(a, b); }        \
    __device__ __forceinline__ constexpr bool operator>(T a, T b) { return __hgt(a, b); }         \
    __device__ __forceinline__ constexpr bool operator>=(T a, T b) { return __hge(a, b); }        \
    __device__ __forceinline__ constexpr T2 __hadd2(T2 a, T2 b) { return __gp_unpair(__gp_pair(a) + __gp_pair(b)); } \
    __device__ __forceinline__ constexpr T2 __hsub2(T2 a, T2 b) { return __gp_unpair(__gp_pair(a) - __gp_pair(b)); } \
    __device__ __forceinline__ constexpr T2 __hmul2(T2 a, T2 b) { return __gp_unpair(__gp_pair(a) * __gp_pair(b)); } \
    __device__ __forceinline__ constexpr T2 __h2div(T2 a, T2 b) { return __gp_unpair(__gp_pair(a) / __gp_pair(b)); } \
    __device__ __forceinline__ T2 __hfma2(T2 a, T2 b, T2 c) {                                     \
        return __gp_unpair(__builtin_elementwise_fma(__gp_pair(a), __gp_pair(b), __gp_pair(c))); \
    }                                                                                             \
    __device__ __forceinline__ constexpr T2 __hneg2(T2 a) { return T2(__hneg(a.x), __hneg(a.y)); } \
    __device__ __forceinline__ constexpr T2 __habs2(T2 a) { return T2(__habs(a.x), __habs(a.y)); } \
    __device__ __forceinline__ constexpr T2 __hmax2(T2 a, T2 b) {                                 \
        return T2(__hmax(a.x, b.x), __hmax(a.y, b.y));                                            \
    }                                                                                             \
    __device__ __forceinline__ constexpr T2 __hmin2(T2 a, T2 b) {                                 \
        return T2(__hmin(a.x, b.x), __hmin(a.y, b.y));                                            \
    }                                                                                             \
    __device__ __forceinline__ constexpr bool __hbeq2(T2 a, T2 b) {                               \
        return __heq(a.x, b.x) && __heq(a.y, b.y);                                                \
    }                                                                                             \
    __device__ __forceinline__ constexpr T2 operator+(T2 a, T2 b) { return __hadd2(a, b); }      \
    __device__ __forceinline__ constexpr T2 operator-(T2 a, T2 b) { return __hsub2(a, b); }      \
    __device__ __forceinline__ constexpr T2 operator*(T2 a, T2 b) { return __hmul2(a, b); }      \
    __device__ __forceinline__ constexpr T2 operator/(T2 a, T2 b) { return __h2div(a, b); }      \
    __device__ __forceinline__ constexpr T2 operator-(T2 a) { return __hneg2(a); }               \
    __device__ __forceinline__ constexpr T2& operator+=(T2& a, T2 b) { return a = __hadd2(a, b); } \
    __device__ __forceinline__ constexpr T2& operator-=(T2& a, T2 b) { return a = __hsub2(a, b); } \
    __device__ __forceinline__ constexpr T2& operator*=(T2& a, T2 b) { return a = __hmul2(a, b); } \
    __device__ __forceinline__ constexpr T2& operator/=(T2& a, T2 b) { return a = __h2div(a, b); } \
    __device__ __forceinline__ constexpr bool operator==(T2 a, T2 b) { return __hbeq2(a, b); }   \
    __device__ __forceinline__ constexpr bool operator!=(T2 a, T2 b) { return !__hbeq2(a, b); }  \
    __device__ __forceinline__ T __shfl(T v, int lane, int width = warpSize) {                    \
        return __builtin_bit_cast(T, (unsigned short)__shfl(                                     \
            (int)__builtin_bit_cast(unsigned short, v), lane, width));                            \
    }                                                                                             \
    __device__ __forceinline__ T __shfl_up(T v, unsigned int delta, int width = warpSize) {       \
        return __builtin_bit_cast(T, (unsigned short)__shfl_up(                                  \
            (int)__builtin_bit_cast(unsigned short, v), delta, width));                           \
    }                                                                                             \
    __device__ __forceinline__ T __shfl_down(T v, unsigned int delta, int width = warpSize) {     \
        return __builtin_bit_cast(T, (unsigned short)__shfl_down(                                \
            (int)__builtin_bit_cast(unsigned short, v), delta, width));                           \
    }                                                                                             \
    __device__ __forceinline__ T __shfl_xor(T v, int mask, int width = warpSize) {                \
        return __builtin_bit_cast(T, (unsigned short)__shfl_xor(                                 \
            (int)__builtin_bit_cast(unsigned short, v), mask, width));                            \
    }                                                                                             \
    __device__ __forceinline__ T2 __shfl(T2 v, int lane, int width = warpSize) {                  \
        return __builtin_bit_cast(T2, __shfl(__builtin_bit_cast(int, v), lane, width));          \
    }                                                                                             \
    __device__ __forceinline__ T2 __shfl_up(T2 v, unsigned int delta, int width = warpSize) {     \
        return __builtin_bit_cast(T2, __shfl_up(__builtin_bit_cast(int, v), delta, width));      \
    }                                                                                             \
    __device__ __forceinline__ T2 __shfl_down(T2 v, unsigned int delta, int width = warpSize) {   \
        return __builtin_bit_cast(T2, __shfl_down(__builtin_bit_cast(int, v), delta, width));    \
    }                                                                                             \
    __device__ __forceinline__ T2 __shfl_xor(T2 v, int mask, int width = warpSize) {              \
        return __builtin_bit_cast(T2, __shfl_xor(__builtin_bit_cast(int, v), mask, width));      \
    }

// __GP_HALF_CONVERSIONS(T, T2, NAME, NAME2, NATIVE): the conversions and bit casts of T and
// its pair T2, named as ROCm names them after NAME and NAME2 (half/half2 make __float2half,
// __half2float, __half22float2, __low2half, __half_as_ushort, ...; bfloat16/bfloat162 make
// __float2bfloat16, __bfloat162float, __bfloat1622float2, ...). A float or double becomes T
// rounded to nearest even, as NATIVE's own conversion rounds; T becomes float exactly.
#define __GP_HALF_CONVERSIONS(T, T2, NAME, NAME2, NATIVE)                                          \
    __device__ __forceinline__ constexpr T __float2##NAME(float f) { return T(f); }                \
    __device__ __forceinline__ constexpr T __float2##NAME##_rn(float f) { return T(f); }           \
    __device__ __forceinline__ constexpr T __double2##NAME(double d) { return T(d); }              \
    __device__ __forceinline__ constexpr float __##NAME##2float(T a) { return (float)a.__gp_v; }   \
    __device__ __forceinline__ constexpr T __int2##NAME##_rn(int i) { return T(i); }               \
    __device__ __forceinline__ constexpr int __##NAME##2int_rz(T a) { return (int)a.__gp_v; }      \
    __device__ __forceinline__ constexpr T2 __float2##NAME2##_rn(float f) { return T2(T(f), T(f)); } \
    __device__ __forceinline__ constexpr T2 __floats2##NAME2##_rn(float a, float b) {              \
        return T2(T(a), T(b));                                                                     \
    }                                                                                              \
    __device__ __forceinline__ constexpr T2 __float22##NAME2##_rn(float2 f) {                      \
        return T2(T(f.x), T(f.y));                                                                 \
    }                                                                                              \
    __device__ __forceinline__ constexpr float2 __##NAME2##2float2(T2 a) {                         \
        return float2{(float)a.x.__gp_v, (float)a.y.__gp_v};                                       \
    }                                                                                              \
    __device__ __forceinline__ constexpr T2 __##NAME##2##NAME2(T a) { return T2(a, a); }           \
    __device__ __forceinline__ constexpr T2 __halves2##NAME2(T a, T b) { return T2(a, b); }        \
    __device__ __forceinline__ constexpr T __low2##NAME(T2 a) { return a.x; }                      \
    __device__ __forceinline__ constexpr T __high2##NAME(T2 a) { return a.y; }                     \
    __device__ __forceinline__ constexpr float __low2float(T2 a) { return (float)a.x.__gp_v; }     \
    __device__ __forceinline__ constexpr float __high2float(T2 a) { return (float)a.y.__gp_v; }    \
    __device__ __forceinline__ constexpr T2 __lows2##NAME2(T2 a, T2 b) { return T2(a.x, b.x); }    \
    __device__ __forceinline__ constexpr T2 __highs2##NAME2(T2 a, T2 b) { return T2(a.y, b.y); }   \
    __device__ __forceinline__ constexpr T2 __lowhigh2highlow(T2 a) { return T2(a.y, a.x); }       \
    __device__ __forceinline__ constexpr unsigned short __##NAME##_as_ushort(T a) {                \
        return __builtin_bit_cast(unsigned short, a.__gp_v);                                       \
    }                                                                                              \
    __device__ __forceinline__ constexpr short __##NAME##_as_short(T a) {                          \
        return __builtin_bit_cast(short, a.__gp_v);                                                \
    }                                                                                              \
    __device__ __forceinline__ constexpr T __ushort_as_##NAME(unsigned short bits) {               \
        return T(__builtin_bit_cast(NATIVE, bits));                                                \
    }                                                                                              \
    __device__ __forceinline__ constexpr T __short_as_##NAME(short bits) {                         \
        return T(__builtin_bit_cast(NATIVE, bits));                                                \
    }

#endif  // GPUPERF_STATIC_HALF_OPS_H
