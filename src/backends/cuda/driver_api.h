// The CUDA driver API as a table of function pointers, filled at first use either from libcuda.so.1 (dlopen, so
// that the build needs neither CUDA headers nor a GPU) or from the fake driver (fake_driver.h), which runs the same
// calls on host memory so that the allocator and stream semantics are tested on every machine.
//
// Note [Driver selection]
// The table is chosen once per process, at the first call of driver(): the fake one when the environment variable
// STRATA_CUDA_DRIVER is "fake" (or when a test called use_fake_driver() before), libcuda.so.1 otherwise. A missing
// library, a missing symbol or a failing cuInit leaves the table unusable and records why; available() is then
// false and every entry point that needs a device raises with that reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace strata::cuda {

// The driver's opaque types, declared here with the layout the driver uses (pointers and integers).
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = uint64_t;
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;

// The result codes Strata tests for (values from the driver API's CUresult enumeration).
enum : CUresult {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
};

// Device attributes Strata reads (CUdevice_attribute values).
enum : int {
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
  CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
  CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12,
  CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
};

// Flags.
constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;
constexpr unsigned CU_EVENT_DEFAULT = 0x0;
constexpr unsigned CU_EVENT_DISABLE_TIMING = 0x2;
constexpr unsigned CU_MEMHOSTALLOC_PORTABLE = 0x1;

// X(name, symbol, return, parameters): every function of the table, with the symbol it has in libcuda.so.1 (the
// versioned names that cuda.h's macros select).
#define STRATA_CUDA_DRIVER_FNS(X)                                                                                   \
  X(cuInit, "cuInit", CUresult, (unsigned flags))                                                                  \
  X(cuDriverGetVersion, "cuDriverGetVersion", CUresult, (int* version))                                            \
  X(cuDeviceGetCount, "cuDeviceGetCount", CUresult, (int* count))                                                  \
  X(cuDeviceGet, "cuDeviceGet", CUresult, (CUdevice * dev, int ordinal))                                           \
  X(cuDeviceGetName, "cuDeviceGetName", CUresult, (char* name, int len, CUdevice dev))                             \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute", CUresult, (int* value, int attrib, CUdevice dev))                \
  X(cuDeviceTotalMem, "cuDeviceTotalMem_v2", CUresult, (size_t * bytes, CUdevice dev))                            \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", CUresult, (CUcontext * ctx, CUdevice dev))               \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", CUresult, (CUcontext ctx))                                                 \
  X(cuCtxSynchronize, "cuCtxSynchronize", CUresult, ())                                                            \
  X(cuMemGetInfo, "cuMemGetInfo_v2", CUresult, (size_t * free, size_t * total))                                    \
  X(cuMemAlloc, "cuMemAlloc_v2", CUresult, (CUdeviceptr * dptr, size_t bytes))                                     \
  X(cuMemFree, "cuMemFree_v2", CUresult, (CUdeviceptr dptr))                                                       \
  X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", CUresult,                                                           \
    (CUdeviceptr dst, const void* src, size_t bytes, CUstream stream))                                             \
  X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", CUresult, (void* dst, CUdeviceptr src, size_t bytes, CUstream stream)) \
  X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", CUresult,                                                           \
    (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream))                                             \
  X(cuMemHostAlloc, "cuMemHostAlloc", CUresult, (void** ptr, size_t bytes, unsigned flags))                        \
  X(cuMemFreeHost, "cuMemFreeHost", CUresult, (void* ptr))                                                         \
  X(cuMemsetD8Async, "cuMemsetD8Async", CUresult, (CUdeviceptr dst, unsigned char value, size_t n, CUstream stream)) \
  X(cuStreamCreate, "cuStreamCreate", CUresult, (CUstream * stream, unsigned flags))                               \
  X(cuStreamDestroy, "cuStreamDestroy_v2", CUresult, (CUstream stream))                                            \
  X(cuStreamSynchronize, "cuStreamSynchronize", CUresult, (CUstream stream))                                       \
  X(cuStreamQuery, "cuStreamQuery", CUresult, (CUstream stream))                                                   \
  X(cuStreamWaitEvent, "cuStreamWaitEvent", CUresult, (CUstream stream, CUevent event, unsigned flags))           \
  X(cuEventCreate, "cuEventCreate", CUresult, (CUevent * event, unsigned flags))                                   \
  X(cuEventRecord, "cuEventRecord", CUresult, (CUevent event, CUstream stream))                                    \
  X(cuEventQuery, "cuEventQuery", CUresult, (CUevent event))                                                       \
  X(cuEventSynchronize, "cuEventSynchronize", CUresult, (CUevent event))                                           \
  X(cuEventElapsedTime, "cuEventElapsedTime_v2", CUresult, (float* ms, CUevent start, CUevent end))                \
  X(cuEventDestroy, "cuEventDestroy_v2", CUresult, (CUevent event))                                                \
  X(cuModuleLoadData, "cuModuleLoadData", CUresult, (CUmodule * module, const void* image))                        \
  X(cuModuleUnload, "cuModuleUnload", CUresult, (CUmodule module))                                                 \
  X(cuModuleGetFunction, "cuModuleGetFunction", CUresult, (CUfunction * fn, CUmodule module, const char* name))    \
  X(cuLaunchKernel, "cuLaunchKernel", CUresult,                                                                    \
    (CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shmem,  \
     CUstream stream, void** params, void** extra))                                                                \
  X(cuGetErrorName, "cuGetErrorName", CUresult, (CUresult error, const char** str))                                \
  X(cuGetErrorString, "cuGetErrorString", CUresult, (CUresult error, const char** str))

struct DriverApi {
#define STRATA_CUDA_FN_PTR(name, sym, ret, params) ret(*name) params = nullptr;
  STRATA_CUDA_DRIVER_FNS(STRATA_CUDA_FN_PTR)
#undef STRATA_CUDA_FN_PTR
  bool ok = false;        // every function is there and cuInit succeeded
  bool is_fake = false;   // the table is the fake driver's
  std::string reason;     // why ok is false
  std::string source;     // "libcuda.so.1" or "fake"
};

// The table, chosen and loaded at the first call (Note [Driver selection]). Never null; check ok.
const DriverApi& driver();

// Whether a usable driver is there; when not, unavailable_reason() says why.
bool available();
std::string unavailable_reason();

// Selects the fake driver for this process, if driver() has not been called yet; returns whether the fake one is
// (now) the process's driver. For C++ tests, which cannot set the environment before static initialisation.
bool use_fake_driver();

// "CUDA_ERROR_OUT_OF_MEMORY: out of memory" for a result code, through the driver when it can say.
std::string error_text(CUresult r);

// Throws strata::Error naming `what` and the driver's error when r is not CUDA_SUCCESS.
void check(CUresult r, const char* what);

}  // namespace strata::cuda
