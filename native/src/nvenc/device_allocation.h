// One block of CUDA device memory owned by JavaScript (the addon's CudaBuffer), with what its
// host copies need: a pinned staging buffer and a stream, both made on first use. Shared between
// the JS object and any copy running on a worker thread, so free() during a copy cannot pull the
// memory from under it: the last holder frees everything, on whichever thread that is.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

#include "nvenc/cuda_driver.h"

namespace arclight::nvenc {

class DeviceAllocation {
 public:
  // Retains the device's primary context and allocates `bytes`; nullptr with `*error` set on failure.
  static std::shared_ptr<DeviceAllocation> Create(const CudaDriver& cuda, int ordinal, std::size_t bytes, std::string* error);
  ~DeviceAllocation();
  DeviceAllocation(const DeviceAllocation&) = delete;
  DeviceAllocation& operator=(const DeviceAllocation&) = delete;

  const CudaDriver& cuda() const { return cuda_; }
  CUcontext context() const { return context_; }
  int ordinal() const { return ordinal_; }
  CUdeviceptr ptr() const { return ptr_; }
  std::size_t size() const { return size_; }

  // Held for the whole of a host copy: one copy at a time uses the staging buffer and stream.
  std::mutex& copyMutex() { return copyMutex_; }
  // Call with copyMutex() held and this allocation's context current. Page-locked host memory of
  // at least `bytes` (grown as needed) and the copy stream; CUDA_SUCCESS or the failing call's code.
  CUresult Staging(std::size_t bytes, void** pinned, CUstream* stream, std::string* failed);

 private:
  DeviceAllocation(const CudaDriver& cuda, int ordinal) : cuda_(cuda), ordinal_(ordinal) {}

  const CudaDriver& cuda_;
  int ordinal_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUdeviceptr ptr_ = 0;
  std::size_t size_ = 0;
  std::mutex copyMutex_;
  void* pinned_ = nullptr;
  std::size_t pinnedBytes_ = 0;
  CUstream stream_ = nullptr;
};

}  // namespace arclight::nvenc
