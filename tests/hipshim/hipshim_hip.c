/* hipshim_hip.c: libamdhip64.so for hip-python, on top of the CUDA driver API.
 *
 * Lets pytest_gpuperf.runtime.hip run unchanged on an NVIDIA GPU (docs/hip-on-cuda.md).
 * It implements only the HIP functions that backend calls (hip-python's wrappers call nothing
 * else); any other call fails in hip-python as "failed to dlsym 'hipXxx'", which is the point:
 * a new call in the backend must show up, not be half-emulated.
 *
 * HIP's runtime API works on an implicit current device; here each thread's device has its
 * CUDA primary context made current before any call that needs a context, as the CUDA runtime
 * does. HIP error codes are mostly CUDA's numbers; the table below maps each CUresult the
 * driver can return to the HIP code of the same meaning (hip.hipError_t), unknown -> 999.
 */
#include <cuda.h>
#include <pthread.h>
#include <string.h>

#include "hipshim.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_DEVICES 64

typedef struct {
    CUresult cu;
    hipError_t hip;
} ErrorMap;

static const ErrorMap ERRORS[] = {
    {CUDA_SUCCESS, hipSuccess},
    {CUDA_ERROR_INVALID_VALUE, hipErrorInvalidValue},
    {CUDA_ERROR_OUT_OF_MEMORY, hipErrorOutOfMemory},
    {CUDA_ERROR_NOT_INITIALIZED, hipErrorNotInitialized},
    {CUDA_ERROR_DEINITIALIZED, hipErrorDeinitialized},
    {CUDA_ERROR_NO_DEVICE, hipErrorNoDevice},
    {CUDA_ERROR_INVALID_DEVICE, hipErrorInvalidDevice},
    {CUDA_ERROR_INVALID_IMAGE, hipErrorInvalidImage},
    {CUDA_ERROR_INVALID_CONTEXT, hipErrorInvalidContext},
    {CUDA_ERROR_NO_BINARY_FOR_GPU, hipErrorNoBinaryForGpu},
    {CUDA_ERROR_INVALID_PTX, hipErrorInvalidKernelFile},
    {CUDA_ERROR_UNSUPPORTED_PTX_VERSION, hipErrorInvalidKernelFile},
    {CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, hipErrorSharedObjectSymbolNotFound},
    {CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, hipErrorSharedObjectInitFailed},
    {CUDA_ERROR_OPERATING_SYSTEM, hipErrorOperatingSystem},
    {CUDA_ERROR_INVALID_HANDLE, hipErrorInvalidHandle},
    {CUDA_ERROR_NOT_FOUND, hipErrorNotFound},
    {CUDA_ERROR_NOT_READY, hipErrorNotReady},
    {CUDA_ERROR_ILLEGAL_ADDRESS, hipErrorIllegalAddress},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, hipErrorLaunchOutOfResources},
    {CUDA_ERROR_LAUNCH_TIMEOUT, hipErrorLaunchTimeOut},
    {CUDA_ERROR_CONTEXT_IS_DESTROYED, hipErrorContextIsDestroyed},
    {CUDA_ERROR_ASSERT, hipErrorAssert},
    /* the device-side faults HIP reports as one launch failure */
    {CUDA_ERROR_HARDWARE_STACK_ERROR, hipErrorLaunchFailure},
    {CUDA_ERROR_ILLEGAL_INSTRUCTION, hipErrorLaunchFailure},
    {CUDA_ERROR_MISALIGNED_ADDRESS, hipErrorLaunchFailure},
    {CUDA_ERROR_INVALID_ADDRESS_SPACE, hipErrorLaunchFailure},
    {CUDA_ERROR_INVALID_PC, hipErrorLaunchFailure},
    {CUDA_ERROR_LAUNCH_FAILED, hipErrorLaunchFailure},
    {CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, hipErrorCooperativeLaunchTooLarge},
    {CUDA_ERROR_NOT_PERMITTED, hipErrorNotSupported},
    {CUDA_ERROR_NOT_SUPPORTED, hipErrorNotSupported},
    {CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, hipErrorInsufficientDriver},
    {CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, hipErrorInsufficientDriver},
    {CUDA_ERROR_UNKNOWN, hipErrorUnknown},
};
#define N_ERRORS (sizeof(ERRORS) / sizeof(ERRORS[0]))

static hipError_t to_hip(CUresult cu) {
    for (size_t i = 0; i < N_ERRORS; ++i) {
        if (ERRORS[i].cu == cu) return ERRORS[i].hip;
    }
    return hipErrorUnknown;
}

/* hip.hipDeviceAttribute_t -> CUdevice_attribute, for the attributes with a CUDA meaning;
 * any other answers hipErrorInvalidValue, as HIP does for an attribute it does not know. */
typedef struct {
    int hip;
    CUdevice_attribute cu;
} AttributeMap;

static const AttributeMap ATTRIBUTES[] = {
    {1, CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE},
    {2, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT},
    {3, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY},
    {5, CU_DEVICE_ATTRIBUTE_CLOCK_RATE},
    {6, CU_DEVICE_ATTRIBUTE_COMPUTE_MODE},
    {8, CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS},
    {10, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH},
    {16, CU_DEVICE_ATTRIBUTE_INTEGRATED},
    {18, CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT},
    {19, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE},
    {23, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR},
    {24, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY},
    {25, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR},
    {26, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X},
    {27, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y},
    {28, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z},
    {29, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X},
    {30, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y},
    {31, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z},
    {56, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK},
    {57, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR},
    {58, CU_DEVICE_ATTRIBUTE_MAX_PITCH},
    {59, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH},
    {60, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE},
    {61, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR},
    {63, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
    {67, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID},
    {68, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID},
    {69, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID},
    {70, CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE},
    {71, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK},
    {72, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR},
    {73, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK},
    {74, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK},
    {75, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN},
    {76, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR},
    {78, CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED},
    {83, CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY},
    {85, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING},
    {87, CU_DEVICE_ATTRIBUTE_WARP_SIZE},
    /* AMD-specific numbers with a CUDA equivalent */
    {10002, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR},
    {10015, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
};
#define N_ATTRIBUTES (sizeof(ATTRIBUTES) / sizeof(ATTRIBUTES[0]))

/* -- the implicit current device ---------------------------------------------------------- */

static __thread int current_device = 0;
static CUcontext primary_contexts[MAX_DEVICES];
static pthread_mutex_t primary_lock = PTHREAD_MUTEX_INITIALIZER;

/* Make `device`'s primary context current in this thread (retained once per process). */
static CUresult activate(int device) {
    CUresult status = cuInit(0);
    if (status != CUDA_SUCCESS) return status;
    if (device < 0 || device >= MAX_DEVICES) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&primary_lock);
    if (primary_contexts[device] == NULL) {
        CUdevice handle;
        status = cuDeviceGet(&handle, device);
        if (status == CUDA_SUCCESS) {
            status = cuDevicePrimaryCtxRetain(&primary_contexts[device], handle);
        }
    }
    CUcontext context = primary_contexts[device];
    pthread_mutex_unlock(&primary_lock);
    if (status != CUDA_SUCCESS) return status;
    CUcontext current = NULL;
    cuCtxGetCurrent(&current);
    return current == context ? CUDA_SUCCESS : cuCtxSetCurrent(context);
}

#define WITH_CONTEXT()                                                     \
    do {                                                                   \
        CUresult context_status = activate(current_device);                \
        if (context_status != CUDA_SUCCESS) return to_hip(context_status); \
    } while (0)

/* -- initialisation, devices --------------------------------------------------------------- */

EXPORT hipError_t hipInit(unsigned int flags) { return to_hip(cuInit(flags)); }

EXPORT hipError_t hipDriverGetVersion(int* version) {
    return to_hip(cuDriverGetVersion(version));
}

/* HIP's runtime version is HIP_VERSION; here the runtime IS the CUDA driver, so its version. */
EXPORT hipError_t hipRuntimeGetVersion(int* version) {
    return to_hip(cuDriverGetVersion(version));
}

EXPORT hipError_t hipGetDeviceCount(int* count) {
    if (count == NULL) return hipErrorInvalidValue;
    *count = 0;
    CUresult status = cuInit(0);
    if (status == CUDA_SUCCESS) status = cuDeviceGetCount(count);
    if (status == CUDA_SUCCESS && *count == 0) return hipErrorNoDevice;
    return to_hip(status);
}

EXPORT hipError_t hipSetDevice(int device) {
    CUresult status = activate(device);
    if (status == CUDA_SUCCESS) current_device = device;
    return to_hip(status);
}

EXPORT hipError_t hipDeviceGetName(char* name, int length, int device) {
    CUresult status = cuInit(0);
    if (status == CUDA_SUCCESS) status = cuDeviceGetName(name, length, (CUdevice)device);
    return to_hip(status);
}

EXPORT hipError_t hipDeviceGetPCIBusId(char* bus_id, int length, int device) {
    CUresult status = cuInit(0);
    if (status == CUDA_SUCCESS) status = cuDeviceGetPCIBusId(bus_id, length, (CUdevice)device);
    return to_hip(status);
}

/* hipUUID is 16 bytes, as CUuuid is: the GPU's UUID, which NVML prints as GPU-xxxxxxxx-... */
EXPORT hipError_t hipDeviceGetUuid(CUuuid* uuid, int device) {
    if (uuid == NULL) return hipErrorInvalidValue;
    CUresult status = cuInit(0);
    if (status == CUDA_SUCCESS) status = cuDeviceGetUuid(uuid, (CUdevice)device);
    return to_hip(status);
}

EXPORT hipError_t hipDeviceTotalMem(size_t* bytes, int device) {
    CUresult status = cuInit(0);
    if (status == CUDA_SUCCESS) status = cuDeviceTotalMem(bytes, (CUdevice)device);
    return to_hip(status);
}

EXPORT hipError_t hipDeviceGetAttribute(int* value, int attribute, int device) {
    if (value == NULL) return hipErrorInvalidValue;
    CUresult status = cuInit(0);
    if (status != CUDA_SUCCESS) return to_hip(status);
    for (size_t i = 0; i < N_ATTRIBUTES; ++i) {
        if (ATTRIBUTES[i].hip == attribute) {
            return to_hip(cuDeviceGetAttribute(value, ATTRIBUTES[i].cu, (CUdevice)device));
        }
    }
    return hipErrorInvalidValue;
}

EXPORT hipError_t hipDeviceSynchronize(void) {
    WITH_CONTEXT();
    return to_hip(cuCtxSynchronize());
}

EXPORT hipError_t hipMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
    WITH_CONTEXT();
    return to_hip(cuMemGetInfo(free_bytes, total_bytes));
}

/* -- memory ---------------------------------------------------------------------------------- */

EXPORT hipError_t hipMalloc(void** pointer, size_t bytes) {
    if (pointer == NULL) return hipErrorInvalidValue;
    *pointer = NULL;
    if (bytes == 0) return hipSuccess; /* HIP returns a null pointer for zero bytes */
    WITH_CONTEXT();
    CUdeviceptr address = 0;
    CUresult status = cuMemAlloc(&address, bytes);
    *pointer = (void*)address;
    return to_hip(status);
}

EXPORT hipError_t hipFree(void* pointer) {
    if (pointer == NULL) return hipSuccess;
    WITH_CONTEXT();
    return to_hip(cuMemFree((CUdeviceptr)pointer));
}

EXPORT hipError_t hipMemcpy(void* dst, const void* src, size_t bytes, int kind) {
    WITH_CONTEXT();
    switch (kind) {
        case hipMemcpyHostToDevice:
            return to_hip(cuMemcpyHtoD((CUdeviceptr)dst, src, bytes));
        case hipMemcpyDeviceToHost:
            return to_hip(cuMemcpyDtoH(dst, (CUdeviceptr)src, bytes));
        case hipMemcpyDeviceToDevice:
            return to_hip(cuMemcpyDtoD((CUdeviceptr)dst, (CUdeviceptr)src, bytes));
        case hipMemcpyHostToHost:
        case hipMemcpyDefault:
            return to_hip(cuMemcpy((CUdeviceptr)dst, (CUdeviceptr)src, bytes));
        default:
            return hipErrorInvalidValue;
    }
}

EXPORT hipError_t hipMemcpyAsync(void* dst, const void* src, size_t bytes, int kind,
                                 CUstream stream) {
    WITH_CONTEXT();
    switch (kind) {
        case hipMemcpyHostToDevice:
            return to_hip(cuMemcpyHtoDAsync((CUdeviceptr)dst, src, bytes, stream));
        case hipMemcpyDeviceToHost:
            return to_hip(cuMemcpyDtoHAsync(dst, (CUdeviceptr)src, bytes, stream));
        case hipMemcpyDeviceToDevice:
            return to_hip(cuMemcpyDtoDAsync((CUdeviceptr)dst, (CUdeviceptr)src, bytes, stream));
        case hipMemcpyHostToHost:
        case hipMemcpyDefault:
            return to_hip(cuMemcpyAsync((CUdeviceptr)dst, (CUdeviceptr)src, bytes, stream));
        default:
            return hipErrorInvalidValue;
    }
}

EXPORT hipError_t hipMemsetAsync(void* pointer, int value, size_t bytes, CUstream stream) {
    WITH_CONTEXT();
    return to_hip(cuMemsetD8Async((CUdeviceptr)pointer, (unsigned char)value, bytes, stream));
}

/* -- streams and events ------------------------------------------------------------------ */

EXPORT hipError_t hipStreamCreate(CUstream* stream) {
    WITH_CONTEXT();
    return to_hip(cuStreamCreate(stream, CU_STREAM_DEFAULT));
}

EXPORT hipError_t hipStreamDestroy(CUstream stream) {
    WITH_CONTEXT();
    return to_hip(cuStreamDestroy(stream));
}

EXPORT hipError_t hipStreamSynchronize(CUstream stream) {
    WITH_CONTEXT();
    return to_hip(cuStreamSynchronize(stream));
}

EXPORT hipError_t hipEventCreate(CUevent* event) {
    WITH_CONTEXT();
    return to_hip(cuEventCreate(event, CU_EVENT_DEFAULT));
}

EXPORT hipError_t hipEventDestroy(CUevent event) {
    WITH_CONTEXT();
    return to_hip(cuEventDestroy(event));
}

EXPORT hipError_t hipEventRecord(CUevent event, CUstream stream) {
    WITH_CONTEXT();
    return to_hip(cuEventRecord(event, stream));
}

EXPORT hipError_t hipEventSynchronize(CUevent event) {
    WITH_CONTEXT();
    return to_hip(cuEventSynchronize(event));
}

EXPORT hipError_t hipEventQuery(CUevent event) {
    WITH_CONTEXT();
    return to_hip(cuEventQuery(event));
}

EXPORT hipError_t hipEventElapsedTime(float* ms, CUevent start, CUevent stop) {
    WITH_CONTEXT();
    return to_hip(cuEventElapsedTime(ms, start, stop));
}

/* -- modules, kernels, launches ---------------------------------------------------------- */

EXPORT hipError_t hipModuleLoadData(CUmodule* module, const void* image) {
    WITH_CONTEXT();
    return to_hip(cuModuleLoadData(module, image));
}

EXPORT hipError_t hipModuleUnload(CUmodule module) {
    WITH_CONTEXT();
    return to_hip(cuModuleUnload(module));
}

EXPORT hipError_t hipModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
    WITH_CONTEXT();
    return to_hip(cuModuleGetFunction(function, module, name));
}

/* hipFunction_attribute's numbers are CUfunction_attribute's (HIP_FUNC_ATTRIBUTE_*). */
EXPORT hipError_t hipFuncGetAttribute(int* value, int attribute, CUfunction function) {
    WITH_CONTEXT();
    return to_hip(cuFuncGetAttribute(value, (CUfunction_attribute)attribute, function));
}

/* The bytes of `function`'s parameters: the end of its last one. */
static size_t parameter_bytes(CUfunction function) {
    size_t total = 0, offset = 0, size = 0;
    for (size_t i = 0; cuFuncGetParamInfo(function, i, &offset, &size) == CUDA_SUCCESS; ++i) {
        if (offset + size > total) total = offset + size;
    }
    return total;
}

/* HIP's `extra` array is {BUFFER_POINTER, p, BUFFER_SIZE, &size, END} with END = 0x03 where
 * CUDA's END is 0x00: copy it with CUDA's markers. Anything else is refused, not guessed.
 * HIP reads each argument at its offset and accepts a longer buffer (the backend pads it to
 * 8 bytes); CUDA wants the exact parameter size and answers a longer one with
 * CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (seen on an H100), so a longer size is cut to the
 * kernel's own. A shorter one goes through, for CUDA to refuse. */
static hipError_t translate_extra(CUfunction function, void** extra, void* out[5],
                                  size_t* size) {
    size_t used = 0;
    size_t i = 0;
    while (extra[i] != HIP_LAUNCH_PARAM_END) {
        if (used >= 4) return hipErrorInvalidValue;
        if (extra[i] == HIP_LAUNCH_PARAM_BUFFER_POINTER) {
            out[used] = CU_LAUNCH_PARAM_BUFFER_POINTER;
            out[used + 1] = extra[i + 1];
        } else if (extra[i] == HIP_LAUNCH_PARAM_BUFFER_SIZE) {
            size_t given = *(const size_t*)extra[i + 1];
            size_t needed = parameter_bytes(function);
            *size = given > needed ? needed : given;
            out[used] = CU_LAUNCH_PARAM_BUFFER_SIZE;
            out[used + 1] = size;
        } else {
            return hipErrorInvalidValue;
        }
        used += 2;
        i += 2;
    }
    out[used] = CU_LAUNCH_PARAM_END;
    return hipSuccess;
}

EXPORT hipError_t hipModuleLaunchKernel(CUfunction function, unsigned int grid_x,
                                        unsigned int grid_y, unsigned int grid_z,
                                        unsigned int block_x, unsigned int block_y,
                                        unsigned int block_z, unsigned int shared_bytes,
                                        CUstream stream, void** kernel_params, void** extra) {
    void* cuda_extra[5] = {0};
    size_t cuda_size = 0;
    if (kernel_params != NULL && extra != NULL) return hipErrorInvalidValue;
    WITH_CONTEXT();
    if (extra != NULL) {
        hipError_t translated = translate_extra(function, extra, cuda_extra, &cuda_size);
        if (translated != hipSuccess) return translated;
    }
    return to_hip(cuLaunchKernel(function, grid_x, grid_y, grid_z, block_x, block_y, block_z,
                                 shared_bytes, stream, kernel_params,
                                 extra != NULL ? cuda_extra : NULL));
}

/* -- graphs: stream capture and replay (hipStreamCaptureMode's numbers are CUDA's) --------- */

EXPORT hipError_t hipStreamBeginCapture(CUstream stream, int mode) {
    WITH_CONTEXT();
    return to_hip(cuStreamBeginCapture(stream, (CUstreamCaptureMode)mode));
}

EXPORT hipError_t hipStreamEndCapture(CUstream stream, CUgraph* graph) {
    WITH_CONTEXT();
    return to_hip(cuStreamEndCapture(stream, graph));
}

/* HIP keeps the old five-argument form; CUDA 12 dropped the error node and the log. */
EXPORT hipError_t hipGraphInstantiate(CUgraphExec* executable, CUgraph graph, void** error_node,
                                      char* log, size_t log_size) {
    WITH_CONTEXT();
    if (error_node != NULL) *error_node = NULL;
    if (log != NULL && log_size > 0) log[0] = '\0';
    return to_hip(cuGraphInstantiateWithFlags(executable, graph, 0));
}

EXPORT hipError_t hipGraphLaunch(CUgraphExec executable, CUstream stream) {
    WITH_CONTEXT();
    return to_hip(cuGraphLaunch(executable, stream));
}

EXPORT hipError_t hipGraphExecDestroy(CUgraphExec executable) {
    WITH_CONTEXT();
    return to_hip(cuGraphExecDestroy(executable));
}

EXPORT hipError_t hipGraphDestroy(CUgraph graph) {
    WITH_CONTEXT();
    return to_hip(cuGraphDestroy(graph));
}
