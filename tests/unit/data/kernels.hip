#include "gpuperf.h"
#ifndef UNROLL
#define UNROLL 1
#endif
GPUPERF_KERNEL void copy4(const float* a, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n / 4) reinterpret_cast<float4*>(c)[i] = reinterpret_cast<const float4*>(a)[i];
}
GPUPERF_KERNEL void add3(const float* a, const float* b, const float* d, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i] + d[i];
}
GPUPERF_KERNEL void __launch_bounds__(128) tile(const double* a, double* c, int n) {
    __shared__ double s[128];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = i < n ? a[i] : 0.0;
    __syncthreads();
    if (i < n) c[i] = s[127 - threadIdx.x];
}
GPUPERF_KERNEL void spill(const float* a, float* c, int n) {
    float v[64];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (int k = 0; k < 64; ++k) v[k] = a[(i + k * 977) % n];
    float s = 0;
    for (int k = 0; k < 64; ++k) s += v[(k * 7 + i) & 63];
    c[i] = s;
}
GPUPERF_KERNEL void bytes(const unsigned char* a, unsigned short* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] * 3;
}
