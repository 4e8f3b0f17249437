#include "nvenc/cuda_frame_download.h"

#include <chrono>
#include <cstring>
#include <mutex>
#include <utility>

#include "colour_convert.h"

namespace arclight::nvenc {

namespace {

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

bool Rgb(FrameLayout layout) { return layout == FrameLayout::kRgba || layout == FrameLayout::kBgra; }

// Bytes of the packed copy in pinned memory: RGBA rows without padding, or I420/NV12 planes.
std::size_t StagedSize(const FrameShape& s) {
  const std::size_t w = static_cast<std::size_t>(s.width);
  const std::size_t h = static_cast<std::size_t>(s.height);
  return Rgb(s.layout) ? w * h * 4 : w * h * 3 / 2;
}

// One rectangle, device rows of `pitch` → tightly packed host rows.
CUresult Copy2D(const CudaDriver& cuda, CUstream stream, CUdeviceptr src, std::size_t pitch, std::uint8_t* dst,
                std::size_t rowBytes, std::size_t rows) {
  CUDA_MEMCPY2D c;
  std::memset(&c, 0, sizeof c);
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  c.srcDevice = src;
  c.srcPitch = pitch;
  c.dstMemoryType = CU_MEMORYTYPE_HOST;
  c.dstHost = dst;
  c.dstPitch = rowBytes;
  c.WidthInBytes = rowBytes;
  c.Height = rows;
  return cuda.cuMemcpy2DAsync(&c, stream);
}

}  // namespace

std::size_t FrameSpan(const FrameShape& s) {
  const std::size_t h = static_cast<std::size_t>(s.height);
  const std::size_t chromaRows = (h + 1) / 2;
  switch (s.layout) {
    case FrameLayout::kNv12: return s.pitch * (h + chromaRows);
    case FrameLayout::kI420: return s.pitch * h + 2 * ((s.pitch + 1) / 2) * chromaRows;
    case FrameLayout::kRgba:
    case FrameLayout::kBgra: return s.pitch * h;
  }
  return 0;
}

std::size_t I420Size(const FrameShape& s) { return static_cast<std::size_t>(s.width) * static_cast<std::size_t>(s.height) * 3 / 2; }

std::string DownloadI420(DeviceAllocation& a, const FrameShape& s, std::uint8_t* out, DownloadTimes* times) {
  const CudaDriver& cuda = a.cuda();
  std::lock_guard<std::mutex> lock(a.copyMutex());
  ScopedContext current(cuda, a.context());
  if (!current.ok()) return "cuCtxPushCurrent failed";
  const auto started = std::chrono::steady_clock::now();
  void* pinnedVoid = nullptr;
  CUstream stream = nullptr;
  std::string failed;
  CUresult r = a.Staging(StagedSize(s), &pinnedVoid, &stream, &failed);
  if (r != CUDA_SUCCESS) return failed + " failed: " + cuda.ErrorName(r);
  auto* pinned = static_cast<std::uint8_t*>(pinnedVoid);

  const std::size_t w = static_cast<std::size_t>(s.width);
  const std::size_t h = static_cast<std::size_t>(s.height);
  const std::size_t cw = w / 2;
  const std::size_t ch = h / 2;
  const CUdeviceptr base = a.ptr();
  switch (s.layout) {
    case FrameLayout::kNv12:
      r = Copy2D(cuda, stream, base, s.pitch, pinned, w, h);
      if (r == CUDA_SUCCESS) r = Copy2D(cuda, stream, base + s.pitch * h, s.pitch, pinned + w * h, w, ch);
      break;
    case FrameLayout::kI420: {
      const std::size_t chromaPitch = (s.pitch + 1) / 2;
      r = Copy2D(cuda, stream, base, s.pitch, pinned, w, h);
      if (r == CUDA_SUCCESS) r = Copy2D(cuda, stream, base + s.pitch * h, chromaPitch, pinned + w * h, cw, ch);
      if (r == CUDA_SUCCESS) r = Copy2D(cuda, stream, base + s.pitch * h + chromaPitch * ch, chromaPitch, pinned + w * h + cw * ch, cw, ch);
      break;
    }
    case FrameLayout::kRgba:
    case FrameLayout::kBgra:
      r = Copy2D(cuda, stream, base, s.pitch, pinned, w * 4, h);
      break;
  }
  if (r != CUDA_SUCCESS) return "cuMemcpy2DAsync failed: " + cuda.ErrorName(r);
  if ((r = cuda.cuStreamSynchronize(stream)) != CUDA_SUCCESS) return "cuStreamSynchronize failed: " + cuda.ErrorName(r);
  times->copyMs = MsSince(started);

  const auto converting = std::chrono::steady_clock::now();
  switch (s.layout) {
    case FrameLayout::kI420:
      std::memcpy(out, pinned, I420Size(s));
      break;
    case FrameLayout::kNv12: {
      std::memcpy(out, pinned, w * h);
      const std::uint8_t* uv = pinned + w * h;
      std::uint8_t* u = out + w * h;
      std::uint8_t* v = u + cw * ch;
      for (std::size_t i = 0; i < cw * ch; i++) {
        u[i] = uv[2 * i];
        v[i] = uv[2 * i + 1];
      }
      break;
    }
    case FrameLayout::kBgra:
      // The converter reads R,G,B,A; swap in the staging copy (it is ours until the next download).
      for (std::size_t i = 0; i < w * h * 4; i += 4) std::swap(pinned[i], pinned[i + 2]);
      [[fallthrough]];
    case FrameLayout::kRgba: {
      colour::ConvertOptions options;
      options.width = s.width;
      options.height = s.height;
      options.order = colour::ChannelOrder::kRgba;
      options.layout = colour::SampleLayout::kInterleaved;
      options.target = colour::YuvFormat::kI420;
      options.threads = 1;
      colour::ConvertToYuv(pinned, out, options);
      break;
    }
  }
  times->convertMs = MsSince(converting);
  return "";
}

}  // namespace arclight::nvenc
