// The few CUDA driver calls the NVENC encoder needs, resolved from libcuda.so.1 at run time with
// dlopen, so the addon builds and loads on machines without an NVIDIA driver (then the probe says
// why NVENC is unavailable). ARCLIGHT_LIBCUDA overrides the library path (operators with an
// unusual driver layout; the tests' fake driver).
#pragma once

#include <ffnvcodec/dynlink_cuda.h>

#include <cstddef>
#include <string>

namespace arclight::nvenc {

// CUpointer_attribute values (CUDA driver API); dynlink_cuda.h does not declare the enum.
constexpr int kPointerAttributeDeviceOrdinal = 9;
constexpr int kPointerAttributeRangeStartAddr = 11;
constexpr int kPointerAttributeRangeSize = 12;

using PointerGetAttributeFn = CUresult CUDAAPI(void* data, int attribute, CUdeviceptr ptr);
// Driver API calls dynlink_cuda.h has no typedef for (signatures from cuda.h).
using DeviceTotalMemFn = CUresult CUDAAPI(std::size_t* bytes, CUdevice dev);
using MemGetInfoFn = CUresult CUDAAPI(std::size_t* free, std::size_t* total);
using DriverGetVersionFn = CUresult CUDAAPI(int* version);
using MemAllocHostFn = CUresult CUDAAPI(void** pointer, std::size_t bytes);
using MemFreeHostFn = CUresult CUDAAPI(void* pointer);

// CUdevice_attribute values read by cudaDeviceInfo.
constexpr int kAttributeMultiprocessorCount = 16;
constexpr int kAttributeComputeCapabilityMajor = 75;
constexpr int kAttributeComputeCapabilityMinor = 76;
// cuStreamCreate flag: the stream does not wait on the legacy default stream.
constexpr unsigned int kStreamNonBlocking = 1;

struct CudaDriver {
  tcuInit* cuInit = nullptr;
  tcuDeviceGetCount* cuDeviceGetCount = nullptr;
  tcuDeviceGet* cuDeviceGet = nullptr;
  tcuDeviceGetName* cuDeviceGetName = nullptr;
  tcuDevicePrimaryCtxRetain* cuDevicePrimaryCtxRetain = nullptr;
  tcuDevicePrimaryCtxRelease* cuDevicePrimaryCtxRelease = nullptr;
  tcuCtxPushCurrent_v2* cuCtxPushCurrent = nullptr;
  tcuCtxPopCurrent_v2* cuCtxPopCurrent = nullptr;
  tcuMemAlloc_v2* cuMemAlloc = nullptr;
  tcuMemFree_v2* cuMemFree = nullptr;
  tcuMemcpyHtoD_v2* cuMemcpyHtoD = nullptr;
  tcuMemcpyDtoH_v2* cuMemcpyDtoH = nullptr;
  tcuMemcpyDtoD_v2* cuMemcpyDtoD = nullptr;
  tcuGetErrorName* cuGetErrorName = nullptr;
  PointerGetAttributeFn* cuPointerGetAttribute = nullptr;
  // Device facts and the asynchronous host copy (pinned memory, a stream) of CUDA frames.
  tcuDeviceGetAttribute* cuDeviceGetAttribute = nullptr;
  DeviceTotalMemFn* cuDeviceTotalMem = nullptr;
  MemGetInfoFn* cuMemGetInfo = nullptr;
  DriverGetVersionFn* cuDriverGetVersion = nullptr;
  MemAllocHostFn* cuMemAllocHost = nullptr;
  MemFreeHostFn* cuMemFreeHost = nullptr;
  tcuStreamCreate* cuStreamCreate = nullptr;
  tcuStreamSynchronize* cuStreamSynchronize = nullptr;
  tcuStreamDestroy_v2* cuStreamDestroy = nullptr;
  tcuMemcpy2DAsync_v2* cuMemcpy2DAsync = nullptr;
  // What dlopen loaded: "libcuda.so.1" or $ARCLIGHT_LIBCUDA.
  std::string library;

  // "CUDA_ERROR_NO_DEVICE (100)"; works for codes the driver does not name too.
  std::string ErrorName(CUresult result) const;
};

// The driver, loaded and cuInit-ed once per process; nullptr with `*error` set when it cannot be.
// Thread-safe. A failure is remembered (the library and the GPU do not appear while running).
const CudaDriver* LoadCudaDriver(std::string* error);

// Makes a context current on this thread for a scope (CUDA contexts are per-thread state, and
// encodes run on libuv's worker threads).
class ScopedContext {
 public:
  ScopedContext(const CudaDriver& cuda, CUcontext context);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
  bool ok() const { return ok_; }

 private:
  const CudaDriver& cuda_;
  bool ok_;
};

}  // namespace arclight::nvenc
