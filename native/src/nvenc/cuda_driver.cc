#include "cuda_driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace arclight::nvenc {

namespace {

template <typename Fn>
bool Resolve(void* library, const char* symbol, Fn** slot, std::string* error) {
  *slot = reinterpret_cast<Fn*>(dlsym(library, symbol));
  if (*slot == nullptr) {
    *error = std::string("the CUDA driver library has no ") + symbol + " (driver too old?)";
    return false;
  }
  return true;
}

struct LoadResult {
  CudaDriver driver;
  bool ok = false;
  std::string error;
};

LoadResult Load() {
  LoadResult result;
  const char* override = std::getenv("ARCLIGHT_LIBCUDA");
  const char* path = override != nullptr && *override != '\0' ? override : "libcuda.so.1";
  // RTLD_LOCAL: the driver's symbols stay out of the process's global namespace.
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    result.error = std::string(path) + " could not be loaded (no NVIDIA driver on this machine?): " + (why ? why : "unknown error");
    return result;
  }
  CudaDriver& d = result.driver;
  d.library = path;
  std::string* e = &result.error;
  if (!Resolve(library, "cuInit", &d.cuInit, e) || !Resolve(library, "cuDeviceGetCount", &d.cuDeviceGetCount, e) ||
      !Resolve(library, "cuDeviceGet", &d.cuDeviceGet, e) || !Resolve(library, "cuDeviceGetName", &d.cuDeviceGetName, e) ||
      !Resolve(library, "cuDevicePrimaryCtxRetain", &d.cuDevicePrimaryCtxRetain, e) ||
      !Resolve(library, "cuDevicePrimaryCtxRelease", &d.cuDevicePrimaryCtxRelease, e) ||
      !Resolve(library, "cuCtxPushCurrent_v2", &d.cuCtxPushCurrent, e) ||
      !Resolve(library, "cuCtxPopCurrent_v2", &d.cuCtxPopCurrent, e) || !Resolve(library, "cuMemAlloc_v2", &d.cuMemAlloc, e) ||
      !Resolve(library, "cuMemFree_v2", &d.cuMemFree, e) || !Resolve(library, "cuMemcpyHtoD_v2", &d.cuMemcpyHtoD, e) ||
      !Resolve(library, "cuMemcpyDtoH_v2", &d.cuMemcpyDtoH, e) || !Resolve(library, "cuMemcpyDtoD_v2", &d.cuMemcpyDtoD, e) || !Resolve(library, "cuGetErrorName", &d.cuGetErrorName, e) ||
      !Resolve(library, "cuPointerGetAttribute", &d.cuPointerGetAttribute, e) ||
      !Resolve(library, "cuDeviceGetAttribute", &d.cuDeviceGetAttribute, e) ||
      !Resolve(library, "cuDeviceTotalMem_v2", &d.cuDeviceTotalMem, e) || !Resolve(library, "cuMemGetInfo_v2", &d.cuMemGetInfo, e) ||
      !Resolve(library, "cuDriverGetVersion", &d.cuDriverGetVersion, e) ||
      !Resolve(library, "cuMemAllocHost_v2", &d.cuMemAllocHost, e) || !Resolve(library, "cuMemFreeHost", &d.cuMemFreeHost, e) ||
      !Resolve(library, "cuStreamCreate", &d.cuStreamCreate, e) ||
      !Resolve(library, "cuStreamSynchronize", &d.cuStreamSynchronize, e) ||
      !Resolve(library, "cuStreamDestroy_v2", &d.cuStreamDestroy, e) ||
      !Resolve(library, "cuMemcpy2DAsync_v2", &d.cuMemcpy2DAsync, e)) {
    dlclose(library);
    return result;
  }
  const CUresult init = d.cuInit(0);
  if (init != CUDA_SUCCESS) {
    result.error = "cuInit failed: " + d.ErrorName(init);
    // The library stays loaded: its functions are still what ErrorName calls.
    return result;
  }
  result.ok = true;
  return result;
}

}  // namespace

std::string CudaDriver::ErrorName(CUresult result) const {
  const char* name = nullptr;
  if (cuGetErrorName != nullptr && cuGetErrorName(result, &name) == CUDA_SUCCESS && name != nullptr) {
    return std::string(name) + " (" + std::to_string(static_cast<int>(result)) + ")";
  }
  return "CUDA error " + std::to_string(static_cast<int>(result));
}

const CudaDriver* LoadCudaDriver(std::string* error) {
  static std::once_flag once;
  static LoadResult* loaded = nullptr;
  std::call_once(once, [] { loaded = new LoadResult(Load()); });
  if (!loaded->ok) {
    *error = loaded->error;
    return nullptr;
  }
  return &loaded->driver;
}

ScopedContext::ScopedContext(const CudaDriver& cuda, CUcontext context)
    : cuda_(cuda), ok_(cuda.cuCtxPushCurrent(context) == CUDA_SUCCESS) {}

ScopedContext::~ScopedContext() {
  if (ok_) {
    CUcontext popped = nullptr;
    cuda_.cuCtxPopCurrent(&popped);
  }
}

}  // namespace arclight::nvenc
