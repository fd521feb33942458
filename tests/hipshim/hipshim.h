/* hipshim.h: the HIP and hiprtc values the shim speaks, as hip-python defines them.
 *
 * The numbers are hip-python's (hip.hipError_t, hip.hipDeviceAttribute_t, hip.hipMemcpyKind,
 * hiprtc.hiprtcResult, hip.HIP_LAUNCH_PARAM_*), read from hip-python 6.2.0 and 6.3.3, which
 * agree; tests/gpu/test_hip_shim.py checks the error codes and device attributes against the
 * installed hip-python. Only what the shim needs is declared.
 */
#ifndef HIPSHIM_H
#define HIPSHIM_H

#include <stddef.h>

typedef int hipError_t;
enum {
    hipSuccess = 0,
    hipErrorInvalidValue = 1,
    hipErrorOutOfMemory = 2,
    hipErrorNotInitialized = 3,
    hipErrorDeinitialized = 4,
    hipErrorInsufficientDriver = 35,
    hipErrorNoDevice = 100,
    hipErrorInvalidDevice = 101,
    hipErrorInvalidImage = 200,
    hipErrorInvalidContext = 201,
    hipErrorNoBinaryForGpu = 209,
    hipErrorInvalidKernelFile = 218,
    hipErrorSharedObjectSymbolNotFound = 302,
    hipErrorSharedObjectInitFailed = 303,
    hipErrorOperatingSystem = 304,
    hipErrorInvalidHandle = 400,
    hipErrorNotFound = 500,
    hipErrorNotReady = 600,
    hipErrorIllegalAddress = 700,
    hipErrorLaunchOutOfResources = 701,
    hipErrorLaunchTimeOut = 702,
    hipErrorContextIsDestroyed = 709,
    hipErrorAssert = 710,
    hipErrorLaunchFailure = 719,
    hipErrorCooperativeLaunchTooLarge = 720,
    hipErrorNotSupported = 801,
    hipErrorUnknown = 999,
};

/* hip.hipMemcpyKind */
enum {
    hipMemcpyHostToHost = 0,
    hipMemcpyHostToDevice = 1,
    hipMemcpyDeviceToHost = 2,
    hipMemcpyDeviceToDevice = 3,
    hipMemcpyDefault = 4,
};

/* hip.HIP_LAUNCH_PARAM_*: CUDA spells the same markers 0x01, 0x02 and 0x00 (END). */
#define HIP_LAUNCH_PARAM_BUFFER_POINTER ((void*)0x01)
#define HIP_LAUNCH_PARAM_BUFFER_SIZE ((void*)0x02)
#define HIP_LAUNCH_PARAM_END ((void*)0x03)

/* hiprtc.hiprtcResult: 0..11 coincide with nvrtcResult's. */
typedef int hiprtcResult;
enum {
    HIPRTC_ERROR_INVALID_INPUT = 3,
    HIPRTC_ERROR_INTERNAL_ERROR = 11,
};

#endif /* HIPSHIM_H */
