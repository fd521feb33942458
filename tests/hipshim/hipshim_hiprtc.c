/* hipshim_hiprtc.c: libhiprtc.so for hip-python, on top of NVRTC (docs/hip-on-cuda.md).
 *
 * Compiles to CUBIN, never PTX: the NVRTC found may be newer than the driver, and a newer PTX
 * does not JIT there, while a CUBIN for the device's sm_XX loads. Options are translated the
 * way hipcc's mean maps onto NVRTC's (see translate_option); any other option reaches NVRTC
 * unchanged, so an AMD-only flag fails the compile with NVRTC's own message.
 *
 * hiprtc knows <hip/hip_runtime.h> without being handed it; NVRTC does not, so a program
 * that is not given one gets an in-memory stand-in (CUDA's built-ins are already there).
 */
#include <cuda.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hipshim.h"

#define EXPORT __attribute__((visibility("default")))

static const char HIP_RUNTIME_NAME[] = "hip/hip_runtime.h";
static const char HIP_RUNTIME_STANDIN[] =
    "// hipshim: stand-in for HIP's runtime header under NVRTC\n"
    "#pragma once\n"
    "#ifndef __HIP_PLATFORM_NVIDIA__\n"
    "#define __HIP_PLATFORM_NVIDIA__ 1\n"
    "#endif\n";

/* nvrtcResult 0..11 are hiprtcResult's; NVRTC's later additions have no HIP name. */
static hiprtcResult to_hiprtc(nvrtcResult result) {
    return (int)result <= HIPRTC_ERROR_INTERNAL_ERROR ? (hiprtcResult)result
                                                      : HIPRTC_ERROR_INTERNAL_ERROR;
}

EXPORT hiprtcResult hiprtcCreateProgram(nvrtcProgram* program, const char* source,
                                        const char* name, int header_count,
                                        const char* const* headers,
                                        const char* const* include_names) {
    int has_runtime = 0;
    for (int i = 0; i < header_count; ++i) {
        if (include_names[i] && strcmp(include_names[i], HIP_RUNTIME_NAME) == 0) has_runtime = 1;
    }
    if (has_runtime) {
        return to_hiprtc(
            nvrtcCreateProgram(program, source, name, header_count, headers, include_names));
    }
    const char** all_headers = calloc((size_t)header_count + 1, sizeof(char*));
    const char** all_names = calloc((size_t)header_count + 1, sizeof(char*));
    if (!all_headers || !all_names) {
        free(all_headers);
        free(all_names);
        return to_hiprtc(NVRTC_ERROR_OUT_OF_MEMORY);
    }
    for (int i = 0; i < header_count; ++i) {
        all_headers[i] = headers[i];
        all_names[i] = include_names[i];
    }
    all_headers[header_count] = HIP_RUNTIME_STANDIN;
    all_names[header_count] = HIP_RUNTIME_NAME;
    nvrtcResult result =
        nvrtcCreateProgram(program, source, name, header_count + 1, all_headers, all_names);
    free(all_headers);
    free(all_names);
    return to_hiprtc(result);
}

EXPORT hiprtcResult hiprtcDestroyProgram(nvrtcProgram* program) {
    return to_hiprtc(nvrtcDestroyProgram(program));
}

/* One hipcc option as NVRTC spells it; NULL drops it. -O levels: NVRTC always optimises and
 * rejects them. --offload-arch=sm_90 names the target as --gpu-architecture does. */
static const char* translate_option(const char* option, char* scratch, size_t scratch_size) {
    static const char* const dropped[] = {"-O0", "-O1", "-O2", "-O3", "-Os"};
    for (size_t i = 0; i < sizeof(dropped) / sizeof(dropped[0]); ++i) {
        if (strcmp(option, dropped[i]) == 0) return NULL;
    }
    if (strcmp(option, "-ffast-math") == 0) return "--use_fast_math";
    static const char* const arch_prefixes[] = {"--offload-arch=", "-offload-arch="};
    for (size_t i = 0; i < 2; ++i) {
        size_t length = strlen(arch_prefixes[i]);
        if (strncmp(option, arch_prefixes[i], length) == 0) {
            snprintf(scratch, scratch_size, "--gpu-architecture=%s", option + length);
            return scratch;
        }
    }
    return option;
}

/* hiprtc without a target compiles for the current device: do the same, from device 0. */
static int current_device_arch(char* out, size_t out_size) {
    CUdevice device;
    int major = 0, minor = 0;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&device, 0) != CUDA_SUCCESS) return 0;
    if (cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device) ||
        cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device)) {
        return 0;
    }
    snprintf(out, out_size, "--gpu-architecture=sm_%d%d", major, minor);
    return 1;
}

EXPORT hiprtcResult hiprtcCompileProgram(nvrtcProgram program, int option_count,
                                         const char* const* options) {
    if (option_count < 0 || (option_count > 0 && options == NULL)) {
        return HIPRTC_ERROR_INVALID_INPUT;
    }
    const char** translated = calloc((size_t)option_count + 1, sizeof(char*));
    char (*scratch)[256] = calloc((size_t)option_count + 1, sizeof(*scratch));
    if (!translated || !scratch) {
        free(translated);
        free(scratch);
        return to_hiprtc(NVRTC_ERROR_OUT_OF_MEMORY);
    }
    int count = 0;
    int has_arch = 0;
    for (int i = 0; i < option_count; ++i) {
        const char* option = translate_option(options[i], scratch[i], sizeof(scratch[i]));
        if (option == NULL) continue;
        if (strncmp(option, "--gpu-architecture", 18) == 0 || strncmp(option, "-arch", 5) == 0) {
            has_arch = 1;
        }
        translated[count++] = option;
    }
    if (!has_arch && current_device_arch(scratch[option_count], sizeof(scratch[0]))) {
        translated[count++] = scratch[option_count];
    }
    nvrtcResult result = nvrtcCompileProgram(program, count, translated);
    free(translated);
    free(scratch);
    return to_hiprtc(result);
}

EXPORT hiprtcResult hiprtcGetProgramLogSize(nvrtcProgram program, size_t* size) {
    return to_hiprtc(nvrtcGetProgramLogSize(program, size));
}

EXPORT hiprtcResult hiprtcGetProgramLog(nvrtcProgram program, char* log) {
    return to_hiprtc(nvrtcGetProgramLog(program, log));
}

EXPORT hiprtcResult hiprtcGetCodeSize(nvrtcProgram program, size_t* size) {
    return to_hiprtc(nvrtcGetCUBINSize(program, size));
}

EXPORT hiprtcResult hiprtcGetCode(nvrtcProgram program, char* code) {
    return to_hiprtc(nvrtcGetCUBIN(program, code));
}
