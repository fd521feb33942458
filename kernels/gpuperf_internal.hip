#include "gpuperf.h"

// Kernels the measurement engine (measure.py) launches itself; not meant for users.

// A clean cache eviction: read `count` 16-byte elements of `src` and write nothing. The
// engine fills `src` with zeros, so the XOR of everything read is 0 and the store to `sink`
// never happens; the compiler cannot know that, so it keeps every load. Reading rather than
// writing matters: a write flush leaves dirty lines that the timed kernel then pays to write
// back (measured on the project's H100: -3% at 400 MB). Grid-stride: any grid reads everything.
GPUPERF_KERNEL void gpuperf_flush(const uint4* src, unsigned long long count, unsigned int* sink) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned int acc = 0;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < count; i += stride) {
        const uint4 v = src[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9E3779B9u) {
        sink[0] = acc;
    }
}

// One thread busy-waits `ns` nanoseconds on the device wall clock: queued ahead of timed
// launches, it keeps the device busy while the host enqueues them, so no event pair times
// the host's launch latency instead of the kernel.
GPUPERF_KERNEL void gpuperf_spin(unsigned long long ns) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        const unsigned long long start = gp_wall_ns();
        while (gp_wall_ns() - start < ns) {
        }
    }
}

// The calibration reference: a 16-byte-wide grid-stride copy of `count` elements.
GPUPERF_KERNEL void gpuperf_copy_ref(const uint4* src, uint4* dst, unsigned long long count) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < count; i += stride) {
        dst[i] = src[i];
    }
}
