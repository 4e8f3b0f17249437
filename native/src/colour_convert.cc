#include "colour_convert.h"

#include "colour_convert_simd.h"

#include <algorithm>
#include <system_error>
#include <type_traits>
#include <thread>
#include <vector>

namespace arclight::colour {
namespace {

// The reference's coefficients are c/256 on [0, 255] samples. Fixed point keeps round(c * 2^7)
// (every one fits in int16, so SSE2's 16x16->32 multiplies serve; 32-bit multiplies are slow
// before SSE4.1), so a luma sum carries 2^15 of scale; chroma sums carry 4x the block mean (see
// ChromaRow), hence 2^17. Coefficient rounding costs < 0.03 LSB at full scale.
constexpr std::int16_t Fix(double c) { return static_cast<std::int16_t>(c * 128.0 + (c >= 0 ? 0.5 : -0.5)); }

constexpr std::int16_t kYR = Fix(65.738), kYG = Fix(129.057), kYB = Fix(25.064);
constexpr std::int16_t kUR = Fix(-37.945), kUG = Fix(-74.494), kUB = Fix(112.439);
constexpr std::int16_t kVR = Fix(112.439), kVG = Fix(-94.154), kVB = Fix(-18.285);
// Offsets with the rounding half folded in.
constexpr std::int32_t kYBias = (16 << 15) + (1 << 14);
constexpr std::int32_t kCBias = (128 << 17) + (1 << 16);

constexpr float kFYR = 65.738f / 256, kFYG = 129.057f / 256, kFYB = 25.064f / 256;
constexpr float kFUR = -37.945f / 256, kFUG = -74.494f / 256, kFUB = 112.439f / 256;
constexpr float kFVR = 112.439f / 256, kFVG = -94.154f / 256, kFVB = -18.285f / 256;

// Luma of a uint8 row never leaves [16, 235], and chroma never leaves [16, 240], so the integer
// kernels need no clamp; the float kernels clamp because their inputs are only clamped to within
// float rounding.
// Operands are int16 so the compiler emits widening 16-bit multiplies.
inline std::uint8_t LumaOf(std::int16_t r, std::int16_t g, std::int16_t b) {
  return static_cast<std::uint8_t>((std::int32_t{kYR} * r + std::int32_t{kYG} * g + std::int32_t{kYB} * b + kYBias) >> 15);
}
inline std::uint8_t ToByte(float v) {
  v = v > 0.0f ? v : 0.0f;
  v = v < 255.0f ? v : 255.0f;
  return static_cast<std::uint8_t>(static_cast<std::int32_t>(v));
}
inline std::uint8_t LumaOf(float r, float g, float b) {
  return ToByte(16.5f + kFYR * r + kFYG * g + kFYB * b);
}

// sr, sg, sb are four times the block mean (the sum of a full 2x2 block).
inline void ChromaOf(std::int16_t sr, std::int16_t sg, std::int16_t sb, std::uint8_t* u, std::uint8_t* v) {
  *u = static_cast<std::uint8_t>((std::int32_t{kUR} * sr + std::int32_t{kUG} * sg + std::int32_t{kUB} * sb + kCBias) >> 17);
  *v = static_cast<std::uint8_t>((std::int32_t{kVR} * sr + std::int32_t{kVG} * sg + std::int32_t{kVB} * sb + kCBias) >> 17);
}
inline void ChromaOf(float sr, float sg, float sb, std::uint8_t* u, std::uint8_t* v) {
  sr *= 0.25f;
  sg *= 0.25f;
  sb *= 0.25f;
  *u = ToByte(128.5f + kFUR * sr + kFUG * sg + kFUB * sb);
  *v = ToByte(128.5f + kFVR * sr + kFVG * sg + kFVB * sb);
}

template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, float>, float, std::int16_t>;

// Planar rows of one channel triple, contiguous samples.
template <typename T>
struct PlanarRow {
  const T* r;
  const T* g;
  const T* b;
};

// The hand-vectorised uint8 strip kernel (colour_convert_simd.cc) takes each strip's prefix when
// the CPU has it; the portable kernels below finish from column `from`.
const bool kSimd = simd::Available();

template <typename T>
void LumaRow(PlanarRow<T> row, std::uint8_t* __restrict y, int width, int from) {
  const T* __restrict r = row.r;
  const T* __restrict g = row.g;
  const T* __restrict b = row.b;
  for (int x = from; x < width; ++x) y[x] = LumaOf(Acc<T>(r[x]), Acc<T>(g[x]), Acc<T>(b[x]));
}

// One chroma row from two source rows (a and b; the same row when the image has an odd last
// row). An odd last column uses its one column twice. Both duplications scale a partial block's
// sum to four samples' worth, which is how "average what exists" stays a fixed divide by 4.
template <typename T, int kUvStep>
void ChromaRow(PlanarRow<T> a, PlanarRow<T> b, std::uint8_t* __restrict u, std::uint8_t* __restrict v, int width, int from) {
  const T* __restrict ar = a.r;
  const T* __restrict ag = a.g;
  const T* __restrict ab = a.b;
  const T* __restrict br = b.r;
  const T* __restrict bg = b.g;
  const T* __restrict bb = b.b;
  using A = Acc<T>;
  const int pairs = width / 2;
  for (int x = from / 2; x < pairs; ++x) {
    const int i = 2 * x;
    const A sr = A(ar[i]) + A(ar[i + 1]) + A(br[i]) + A(br[i + 1]);
    const A sg = A(ag[i]) + A(ag[i + 1]) + A(bg[i]) + A(bg[i + 1]);
    const A sb = A(ab[i]) + A(ab[i + 1]) + A(bb[i]) + A(bb[i + 1]);
    ChromaOf(sr, sg, sb, &u[x * kUvStep], &v[x * kUvStep]);
  }
  if (width & 1) {
    const int i = width - 1;
    const A sr = (A(ar[i]) + A(br[i])) * 2;
    const A sg = (A(ag[i]) + A(bg[i])) * 2;
    const A sb = (A(ab[i]) + A(bb[i])) * 2;
    ChromaOf(sr, sg, sb, &u[pairs * kUvStep], &v[pairs * kUvStep]);
  }
}

struct ChannelOffsets {
  int r, g, b;
};

ChannelOffsets OffsetsOf(ChannelOrder order) {
  return order == ChannelOrder::kBgr ? ChannelOffsets{2, 1, 0} : ChannelOffsets{0, 1, 2};
}

// Turns source row y into planar rows: for uint8 planar input, pointers straight into the
// source; otherwise samples copied (and, for float, scaled to [0, 255]) into scratch.
template <typename T>
class RowReader {
 public:
  RowReader(const T* src, const ConvertOptions& o)
      : src_(src), width_(o.width), height_(o.height), channels_(ChannelCount(o.order)),
        offsets_(OffsetsOf(o.order)), planar_(o.layout == SampleLayout::kPlanar),
        k_(255.0f / o.scale) {}

  // scratch holds 3 * width samples of T; uint8 interleaved rows are gathered from column `from`
  // on (the strip kernel did the columns before it).
  PlanarRow<T> Read(int y, T* scratch, int from = 0) const {
    const std::size_t w = static_cast<std::size_t>(width_);
    T* r = scratch;
    T* g = scratch + w;
    T* b = scratch + 2 * w;
    if (planar_) {
      const std::size_t plane = w * static_cast<std::size_t>(height_);
      const T* base = src_ + static_cast<std::size_t>(y) * w;
      const T* pr = base + plane * offsets_.r;
      const T* pg = base + plane * offsets_.g;
      const T* pb = base + plane * offsets_.b;
      if constexpr (std::is_same_v<T, std::uint8_t>) {
        return {pr, pg, pb};
      } else {
        Normalise<1>(pr, pg, pb, r, g, b);
        return {r, g, b};
      }
    }
    const T* row = src_ + static_cast<std::size_t>(y) * w * channels_;
    if (channels_ == 4) {
      Gather<4>(row + offsets_.r, row + offsets_.g, row + offsets_.b, r, g, b, from);
    } else {
      Gather<3>(row + offsets_.r, row + offsets_.g, row + offsets_.b, r, g, b, from);
    }
    return {r, g, b};
  }

  // Rows y0 and y1 as the uint8 strip kernel reads them.
  simd::StripRows Rows(int y0, int y1) const {
    static_assert(std::is_same_v<T, std::uint8_t>);
    const std::size_t w = static_cast<std::size_t>(width_);
    simd::StripRows rows{};
    rows.order = {offsets_.r, offsets_.g, offsets_.b};
    if (planar_) {
      const std::size_t plane = w * static_cast<std::size_t>(height_);
      auto planes = [&](int y) {
        const T* base = src_ + static_cast<std::size_t>(y) * w;
        return simd::PlanarU8{base + plane * offsets_.r, base + plane * offsets_.g, base + plane * offsets_.b};
      };
      rows.channels = 0;
      rows.planarA = planes(y0);
      rows.planarB = planes(y1);
    } else {
      rows.channels = channels_;
      rows.a = src_ + static_cast<std::size_t>(y0) * w * channels_;
      rows.b = src_ + static_cast<std::size_t>(y1) * w * channels_;
    }
    return rows;
  }

 private:
  template <int kStride>
  void Gather(const T* __restrict pr, const T* __restrict pg, const T* __restrict pb, T* __restrict r,
              T* __restrict g, T* __restrict b, int from) const {
    if constexpr (std::is_same_v<T, std::uint8_t>) {
      for (int x = from; x < width_; ++x) {
        r[x] = pr[x * kStride];
        g[x] = pg[x * kStride];
        b[x] = pb[x * kStride];
      }
    } else {
      Normalise<kStride>(pr, pg, pb, r, g, b);
    }
  }

  // v * 255 / scale, clamped to [0, 255]; NaN fails both comparisons and reads as 0.
  template <int kStride>
  void Normalise(const float* __restrict pr, const float* __restrict pg, const float* __restrict pb,
                 float* __restrict r, float* __restrict g, float* __restrict b) const {
    const float k = k_;
    auto clamp = [](float v) {
      v = v > 0.0f ? v : 0.0f;
      return v < 255.0f ? v : 255.0f;
    };
    for (int x = 0; x < width_; ++x) {
      r[x] = clamp(pr[x * kStride] * k);
      g[x] = clamp(pg[x * kStride] * k);
      b[x] = clamp(pb[x * kStride] * k);
    }
  }

  const T* src_;
  int width_, height_, channels_;
  ChannelOffsets offsets_;
  bool planar_;
  float k_;
};

// Converts 2-row strips [first, last) — the unit of work one thread takes.
template <typename T>
void ConvertStrips(const RowReader<T>& reader, std::uint8_t* dst, const ConvertOptions& o, int first, int last) {
  const std::size_t w = static_cast<std::size_t>(o.width);
  const std::size_t cw = (w + 1) / 2;
  const std::size_t ch = (static_cast<std::size_t>(o.height) + 1) / 2;
  std::uint8_t* const yPlane = dst;
  std::uint8_t* const chroma = dst + w * static_cast<std::size_t>(o.height);
  std::vector<T> scratch(6 * w);

  for (int strip = first; strip < last; ++strip) {
    const int y0 = 2 * strip;
    const bool twoRows = y0 + 1 < o.height;
    std::uint8_t* const yA = yPlane + static_cast<std::size_t>(y0) * w;
    std::uint8_t* const yB = twoRows ? yA + w : nullptr;
    const std::size_t s = static_cast<std::size_t>(strip);
    std::uint8_t* const u = o.target == YuvFormat::kNv12 ? chroma + s * cw * 2 : chroma + s * cw;
    std::uint8_t* const v = o.target == YuvFormat::kNv12 ? u + 1 : chroma + cw * ch + s * cw;
    int done = 0;
    if constexpr (std::is_same_v<T, std::uint8_t>) {
      if (kSimd) done = simd::Strip(reader.Rows(y0, twoRows ? y0 + 1 : y0), yA, yB, u, v, o.target == YuvFormat::kNv12 ? 2 : 1, o.width);
    }
    if (done == o.width) continue;
    const PlanarRow<T> a = reader.Read(y0, scratch.data(), done);
    LumaRow(a, yA, o.width, done);
    PlanarRow<T> b = a;
    if (twoRows) {
      b = reader.Read(y0 + 1, scratch.data() + 3 * w, done);
      LumaRow(b, yB, o.width, done);
    }
    if (o.target == YuvFormat::kNv12) {
      ChromaRow<T, 2>(a, b, u, v, o.width, done);
    } else {
      ChromaRow<T, 1>(a, b, u, v, o.width, done);
    }
  }
}

// The strip workers as plain functions, so that on x86-64 GCC/Clang compile them twice — baseline
// SSE2 and AVX2 — with every kernel inlined (flatten), and pick one at load time (ifunc). AVX2
// makes 1080p uint8 RGB about 3x faster than SSE2 alone (mostly the stride-3 gathers).
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define ARCLIGHT_MULTIVERSION __attribute__((target_clones("avx2", "default"), flatten))
#else
#define ARCLIGHT_MULTIVERSION
#endif

ARCLIGHT_MULTIVERSION void StripsU8(const RowReader<std::uint8_t>& reader, std::uint8_t* dst, const ConvertOptions& o,
                                    int first, int last) {
  ConvertStrips(reader, dst, o, first, last);
}
ARCLIGHT_MULTIVERSION void StripsF32(const RowReader<float>& reader, std::uint8_t* dst, const ConvertOptions& o,
                                     int first, int last) {
  ConvertStrips(reader, dst, o, first, last);
}
void Strips(const RowReader<std::uint8_t>& r, std::uint8_t* dst, const ConvertOptions& o, int first, int last) {
  StripsU8(r, dst, o, first, last);
}
void Strips(const RowReader<float>& r, std::uint8_t* dst, const ConvertOptions& o, int first, int last) {
  StripsF32(r, dst, o, first, last);
}

template <typename T>
void Convert(const T* src, std::uint8_t* dst, const ConvertOptions& o) {
  const RowReader<T> reader(src, o);
  const int strips = (o.height + 1) / 2;
  const int workers = std::max(1, std::min({o.threads, strips, kMaxThreads}));
  if (workers == 1) {
    Strips(reader, dst, o, 0, strips);
    return;
  }
  auto boundary = [&](int i) { return static_cast<int>(static_cast<long long>(strips) * i / workers); };
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  int next = 1;
  try {
    for (; next < workers; ++next) {
      pool.emplace_back([&reader, dst, &o](int a, int b) { Strips(reader, dst, o, a, b); }, boundary(next), boundary(next + 1));
    }
  } catch (const std::system_error&) {
    // Out of threads: the calling thread takes the strips that found no thread.
  }
  Strips(reader, dst, o, boundary(0), boundary(1));
  if (next < workers) Strips(reader, dst, o, boundary(next), strips);
  for (std::thread& t : pool) t.join();
}

}  // namespace

int ChannelCount(ChannelOrder order) { return order == ChannelOrder::kRgba ? 4 : 3; }

std::size_t SourceSampleCount(int width, int height, ChannelOrder order) {
  return static_cast<std::size_t>(width) * static_cast<std::size_t>(height) *
         static_cast<std::size_t>(ChannelCount(order));
}

std::size_t YuvFrameSize(int width, int height) {
  const std::size_t w = static_cast<std::size_t>(width), h = static_cast<std::size_t>(height);
  return w * h + 2 * ((w + 1) / 2) * ((h + 1) / 2);
}

void ConvertToYuv(const std::uint8_t* src, std::uint8_t* dst, const ConvertOptions& options) {
  Convert(src, dst, options);
}

void ConvertToYuv(const float* src, std::uint8_t* dst, const ConvertOptions& options) {
  Convert(src, dst, options);
}

}  // namespace arclight::colour
