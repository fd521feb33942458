#include "gpuperf.h"

// c = a + b over n floats, four ways. All take (a, b, c, n); launch 256-thread blocks.

// The kernel of the blog post "Making memory bound kernels go brr on a MI300X", unchanged: one
// element per thread, grid = ceil(n / 256). Kept verbatim so measurements compare with the
// post's 71.85% of 5.3 TB/s (32M fp32, rocprof).
GPUPERF_KERNEL void vector_add(const float* a, const float* b, float* c, int n) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) {
        c[idx] = a[idx] + b[idx];
    }
}

// The same post's L2-bypass kernel (82.70% of 5.3 TB/s on MI300X): same layout, every load
// and store through gp_load_bypass / gp_store_bypass.
GPUPERF_KERNEL void vector_add_bypass(const float* a, const float* b, float* c, int n) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) {
        gp_store_bypass(c + idx, gp_load_bypass(a + idx) + gp_load_bypass(b + idx));
    }
}

// Nontemporal loads and stores: cached, but marked for early eviction.
GPUPERF_KERNEL void vector_add_nt(const float* a, const float* b, float* c, int n) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) {
        gp_store_nt(c + idx, gp_load_nt(a + idx) + gp_load_nt(b + idx));
    }
}

// 128-bit loads and stores (global_load_dwordx4 / ld.global.v4), as AMD's "MI300X workload
// optimization" guide advises ("Ensure global_load_dwordx4 is used in the ISA"). Grid-stride
// over float4s, so any grid is correct; one float4 per thread when
// grid = ceil(ceil(n / 4) / 256). The n % 4 tail goes to the first threads; a
// pointer that is not 16-byte aligned sends the whole launch down the scalar path.
GPUPERF_KERNEL void vector_add_vec4(const float* a, const float* b, float* c, int n) {
    const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t count = n > 0 ? (size_t)n : 0;
    if (!(gp_aligned16(a) && gp_aligned16(b) && gp_aligned16(c))) {
        for (size_t i = first; i < count; i += stride) {
            c[i] = a[i] + b[i];
        }
        return;
    }
    const size_t count4 = count / 4;
    const float4* a4 = reinterpret_cast<const float4*>(a);
    const float4* b4 = reinterpret_cast<const float4*>(b);
    float4* c4 = reinterpret_cast<float4*>(c);
    for (size_t i = first; i < count4; i += stride) {
        const float4 x = a4[i];
        const float4 y = b4[i];
        c4[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
    const size_t tail = count4 * 4 + first;
    if (tail < count) {
        c[tail] = a[tail] + b[tail];
    }
}
