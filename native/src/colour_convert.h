// RGB → YUV 4:2:0 colour conversion (BT.601, limited range) for model output frames.
//
// Pure C++17 with no Node dependency, so the unit tests (native/test/) and any future non-Node
// user link it directly; native/src/addon.cc validates JS arguments and calls in here.
//
// Maths, per pixel on 8-bit-scaled r, g, b in [0, 255]:
//   Y = 16  + ( 65.738 r + 129.057 g +  25.064 b) / 256
// and per 2x2 block, on the mean r, g, b of the block's pixels that exist (edge blocks of odd
// sizes average the 2 or 1 pixels they have):
//   U = 128 + (-37.945 r -  74.494 g + 112.439 b) / 256
//   V = 128 + (112.439 r -  94.154 g -  18.285 b) / 256
// each rounded to nearest (halves up) and clamped to [0, 255]. Results are within 1 LSB of a
// float64 evaluation of the same formulas.
#ifndef ARCLIGHT_NATIVE_COLOUR_CONVERT_H_
#define ARCLIGHT_NATIVE_COLOUR_CONVERT_H_

#include <cstddef>
#include <cstdint>

namespace arclight::colour {

// Channel order of the source pixels. kRgba's alpha is read past and ignored.
enum class ChannelOrder { kRgb, kRgba, kBgr };

// kInterleaved is HWC (r g b r g b …); kPlanar is CHW (every R, then every G, then every B
// [then every A]).
enum class SampleLayout { kInterleaved, kPlanar };

// kI420: Y plane, U plane, V plane. kNv12: Y plane, then one plane of interleaved U V pairs.
// Chroma planes are ceil(width/2) x ceil(height/2).
enum class YuvFormat { kI420, kNv12 };

inline constexpr int kMaxDimension = 16384;

struct ConvertOptions {
  int width = 0;   // 1 … kMaxDimension
  int height = 0;  // 1 … kMaxDimension
  ChannelOrder order = ChannelOrder::kRgb;
  SampleLayout layout = SampleLayout::kInterleaved;
  YuvFormat target = YuvFormat::kI420;
  // Float input only: the sample value of full intensity (1 or 255 in practice; any finite value
  // > 0 works). Samples are scaled by 255/scale and clamped to [0, 255]; NaN reads as 0.
  float scale = 1.0f;
  // Rows are split across this many std::threads (capped at the number of 2-row strips and at
  // kMaxThreads); 1 runs in the calling thread.
  int threads = 1;
};

inline constexpr int kMaxThreads = 64;

// 3 for kRgb/kBgr, 4 for kRgba.
int ChannelCount(ChannelOrder order);

// Samples the source must hold: width * height * ChannelCount(order).
std::size_t SourceSampleCount(int width, int height, ChannelOrder order);

// Bytes of the 4:2:0 output: width*height + 2*ceil(width/2)*ceil(height/2).
std::size_t YuvFrameSize(int width, int height);

// Preconditions (checked by the caller — the addon throws on violations): dimensions in range,
// src holds SourceSampleCount samples, dst holds YuvFrameSize bytes, the two do not overlap.
void ConvertToYuv(const std::uint8_t* src, std::uint8_t* dst, const ConvertOptions& options);
void ConvertToYuv(const float* src, std::uint8_t* dst, const ConvertOptions& options);

}  // namespace arclight::colour

#endif  // ARCLIGHT_NATIVE_COLOUR_CONVERT_H_
