// The host copy of a CUDA frame for whatever cannot read GPU memory (a software encoder, the
// recorder): device → page-locked host memory on the allocation's own stream, then into packed
// I420 (NV12 de-interleaved, RGBA/BGRA colour-converted, BT.601 limited range). Meant for a worker
// thread: the copy waits on the stream there, never on the JavaScript thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "nvenc/device_allocation.h"

namespace arclight::nvenc {

enum class FrameLayout { kNv12, kI420, kRgba, kBgra };

struct FrameShape {
  int width = 0;   // even, ≥ 2
  int height = 0;  // even, ≥ 2
  std::size_t pitch = 0;  // bytes between rows from the allocation's start; I420 chroma rows use ceil(pitch / 2)
  FrameLayout layout = FrameLayout::kNv12;
};

struct DownloadTimes {
  double copyMs = 0;     // queueing the copies and waiting for the stream
  double convertMs = 0;  // pinned → packed I420
};

// Bytes the frame spans from the allocation's start (as runtime/media/cuda-frames.ts's cudaFrameSpan).
std::size_t FrameSpan(const FrameShape& shape);

// Bytes of the packed I420 output: width * height * 3 / 2.
std::size_t I420Size(const FrameShape& shape);

// Copies and converts into `out` (I420Size bytes). "" on success, else what failed. Takes the
// allocation's copy mutex and makes its context current for the duration.
std::string DownloadI420(DeviceAllocation& allocation, const FrameShape& shape, std::uint8_t* out, DownloadTimes* times);

}  // namespace arclight::nvenc
