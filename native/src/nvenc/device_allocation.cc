#include "nvenc/device_allocation.h"

namespace arclight::nvenc {

std::shared_ptr<DeviceAllocation> DeviceAllocation::Create(const CudaDriver& cuda, int ordinal, std::size_t bytes, std::string* error) {
  std::shared_ptr<DeviceAllocation> a(new DeviceAllocation(cuda, ordinal));
  CUresult r = cuda.cuDeviceGet(&a->device_, ordinal);
  if (r != CUDA_SUCCESS) {
    *error = "cuDeviceGet failed: " + cuda.ErrorName(r);
    return nullptr;
  }
  if ((r = cuda.cuDevicePrimaryCtxRetain(&a->context_, a->device_)) != CUDA_SUCCESS) {
    a->context_ = nullptr;
    *error = "cuDevicePrimaryCtxRetain failed: " + cuda.ErrorName(r);
    return nullptr;
  }
  ScopedContext current(cuda, a->context_);
  if ((r = cuda.cuMemAlloc(&a->ptr_, bytes)) != CUDA_SUCCESS) {
    a->ptr_ = 0;
    *error = "cuMemAlloc failed: " + cuda.ErrorName(r);
    return nullptr;  // the destructor releases the context
  }
  a->size_ = bytes;
  return a;
}

DeviceAllocation::~DeviceAllocation() {
  if (context_ == nullptr) return;
  {
    ScopedContext current(cuda_, context_);
    if (stream_ != nullptr) cuda_.cuStreamDestroy(stream_);
    if (pinned_ != nullptr) cuda_.cuMemFreeHost(pinned_);
    if (ptr_ != 0) cuda_.cuMemFree(ptr_);
  }
  cuda_.cuDevicePrimaryCtxRelease(device_);
}

CUresult DeviceAllocation::Staging(std::size_t bytes, void** pinned, CUstream* stream, std::string* failed) {
  CUresult r = CUDA_SUCCESS;
  if (stream_ == nullptr && (r = cuda_.cuStreamCreate(&stream_, kStreamNonBlocking)) != CUDA_SUCCESS) {
    stream_ = nullptr;
    *failed = "cuStreamCreate";
    return r;
  }
  if (pinnedBytes_ < bytes) {
    if (pinned_ != nullptr) cuda_.cuMemFreeHost(pinned_);
    pinned_ = nullptr;
    pinnedBytes_ = 0;
    if ((r = cuda_.cuMemAllocHost(&pinned_, bytes)) != CUDA_SUCCESS) {
      pinned_ = nullptr;
      *failed = "cuMemAllocHost";
      return r;
    }
    pinnedBytes_ = bytes;
  }
  *pinned = pinned_;
  *stream = stream_;
  return CUDA_SUCCESS;
}

}  // namespace arclight::nvenc
