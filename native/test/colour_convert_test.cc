// Unit tests for the colour conversion core: every format x layout x target x sample type at
// random (mostly odd) sizes against a double-precision evaluation of the documented formulas,
// which must agree within 1 LSB; threaded output must equal single-threaded output byte for byte.
// Registered with CTest (see CMakeLists.txt, -DARCLIGHT_NATIVE_TESTS=ON). Exit status 0 = pass.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "colour_convert.h"

namespace {

using namespace arclight::colour;

int failures = 0;

void Fail(const std::string& what) {
  if (++failures <= 20) std::fprintf(stderr, "FAIL: %s\n", what.c_str());
}

std::uint8_t RoundClamp(double v) {
  return static_cast<std::uint8_t>(std::clamp(std::floor(v + 0.5), 0.0, 255.0));
}

// The reference: plain float64 formulas with no fixed point, written independently of the
// kernels (pixel accessor, then per-pixel luma, then per-block chroma averages).
std::vector<std::uint8_t> Reference(const std::vector<double>& samples, const ConvertOptions& o) {
  const int w = o.width, h = o.height, c = ChannelCount(o.order);
  const int ri = o.order == ChannelOrder::kBgr ? 2 : 0, bi = o.order == ChannelOrder::kBgr ? 0 : 2;
  auto at = [&](int x, int y, int ch) {
    const std::size_t i = o.layout == SampleLayout::kInterleaved
                              ? (static_cast<std::size_t>(y) * w + x) * c + ch
                              : static_cast<std::size_t>(ch) * w * h + static_cast<std::size_t>(y) * w + x;
    return samples[i];
  };
  const int cw = (w + 1) / 2, chh = (h + 1) / 2;
  std::vector<std::uint8_t> out(YuvFrameSize(w, h));
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const double r = at(x, y, ri), g = at(x, y, 1), b = at(x, y, bi);
      out[static_cast<std::size_t>(y) * w + x] = RoundClamp(16 + (65.738 * r + 129.057 * g + 25.064 * b) / 256);
    }
  }
  for (int by = 0; by < chh; ++by) {
    for (int bx = 0; bx < cw; ++bx) {
      double r = 0, g = 0, b = 0;
      int n = 0;
      for (int y = 2 * by; y < std::min(h, 2 * by + 2); ++y) {
        for (int x = 2 * bx; x < std::min(w, 2 * bx + 2); ++x) {
          r += at(x, y, ri);
          g += at(x, y, 1);
          b += at(x, y, bi);
          ++n;
        }
      }
      r /= n;
      g /= n;
      b /= n;
      const std::uint8_t u = RoundClamp(128 + (-37.945 * r - 74.494 * g + 112.439 * b) / 256);
      const std::uint8_t v = RoundClamp(128 + (112.439 * r - 94.154 * g - 18.285 * b) / 256);
      const std::size_t base = static_cast<std::size_t>(w) * h;
      const std::size_t k = static_cast<std::size_t>(by) * cw + bx;
      if (o.target == YuvFormat::kI420) {
        out[base + k] = u;
        out[base + static_cast<std::size_t>(cw) * chh + k] = v;
      } else {
        out[base + 2 * k] = u;
        out[base + 2 * k + 1] = v;
      }
    }
  }
  return out;
}

std::string Describe(const ConvertOptions& o, bool isFloat) {
  static const char* orders[] = {"rgb", "rgba", "bgr"};
  char buf[160];
  std::snprintf(buf, sizeof buf, "%dx%d %s %s %s %s scale=%g threads=%d", o.width, o.height,
                orders[static_cast<int>(o.order)], o.layout == SampleLayout::kPlanar ? "chw" : "hwc",
                o.target == YuvFormat::kNv12 ? "nv12" : "i420", isFloat ? "float32" : "uint8", o.scale, o.threads);
  return buf;
}

int Compare(const std::vector<std::uint8_t>& got, const std::vector<std::uint8_t>& want, const std::string& what) {
  int worst = 0;
  std::size_t where = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const int d = std::abs(int(got[i]) - int(want[i]));
    if (d > worst) worst = d, where = i;
  }
  if (worst > 1) Fail(what + ": off by " + std::to_string(worst) + " at byte " + std::to_string(where));
  return worst;
}

// Runs one case with both a single thread and `threads`, against the reference.
void RunCase(std::mt19937& rng, ConvertOptions o, bool isFloat, int* worstOverall) {
  const std::size_t n = SourceSampleCount(o.width, o.height, o.order);
  std::vector<double> asDouble(n);
  std::vector<std::uint8_t> u8(n);
  std::vector<float> f32(n);
  std::uniform_int_distribution<int> byte(0, 255);
  // Floats range a little past [0, scale] so clamping is exercised.
  std::uniform_real_distribution<float> real(-0.1f * o.scale, 1.1f * o.scale);
  for (std::size_t i = 0; i < n; ++i) {
    if (isFloat) {
      f32[i] = real(rng);
      asDouble[i] = std::clamp(double(f32[i]) * 255.0 / o.scale, 0.0, 255.0);
    } else {
      u8[i] = static_cast<std::uint8_t>(byte(rng));
      asDouble[i] = u8[i];
    }
  }
  const std::vector<std::uint8_t> want = Reference(asDouble, o);
  const int threads = o.threads;
  std::vector<std::uint8_t> single(want.size(), 0xAB), multi(want.size(), 0xCD);
  o.threads = 1;
  isFloat ? ConvertToYuv(f32.data(), single.data(), o) : ConvertToYuv(u8.data(), single.data(), o);
  o.threads = threads;
  isFloat ? ConvertToYuv(f32.data(), multi.data(), o) : ConvertToYuv(u8.data(), multi.data(), o);
  const std::string what = Describe(o, isFloat);
  *worstOverall = std::max(*worstOverall, Compare(single, want, what));
  if (single != multi) Fail(what + ": threaded output differs from single-threaded");
}

void TestRandomSizes() {
  std::mt19937 rng(20261122);
  std::uniform_int_distribution<int> dim(1, 97);
  std::uniform_int_distribution<int> threadCount(2, 7);
  int worst = 0, cases = 0;
  for (int round = 0; round < 6; ++round) {
    for (ChannelOrder order : {ChannelOrder::kRgb, ChannelOrder::kRgba, ChannelOrder::kBgr}) {
      for (SampleLayout layout : {SampleLayout::kInterleaved, SampleLayout::kPlanar}) {
        for (YuvFormat target : {YuvFormat::kI420, YuvFormat::kNv12}) {
          for (int type = 0; type < 3; ++type) {  // uint8, float scale 1, float scale 255
            ConvertOptions o;
            // Mostly odd sizes; every fourth case even, so both edge paths run.
            o.width = dim(rng) | (round % 4 == 3 ? 0 : 1);
            o.height = dim(rng) | (round % 4 == 2 ? 0 : 1);
            o.width = std::max(o.width, 1);
            o.height = std::max(o.height, 1);
            o.order = order;
            o.layout = layout;
            o.target = target;
            o.scale = type == 2 ? 255.0f : 1.0f;
            o.threads = threadCount(rng);
            RunCase(rng, o, type != 0, &worst);
            ++cases;
          }
        }
      }
    }
  }
  std::printf("random sizes: %d cases, worst difference from the float64 reference %d LSB\n", cases, worst);
}

void TestDegenerateShapes() {
  std::mt19937 rng(7);
  int worst = 0;
  const int shapes[][2] = {{1, 1}, {1, 2}, {2, 1}, {1, 9}, {9, 1}, {2, 2}, {3, 3}, {1921, 3}, {5, 1081}};
  for (const auto& s : shapes) {
    for (int type = 0; type < 2; ++type) {
      ConvertOptions o;
      o.width = s[0];
      o.height = s[1];
      o.order = ChannelOrder::kRgba;
      o.target = type ? YuvFormat::kNv12 : YuvFormat::kI420;
      o.threads = 16;  // more threads than strips for the small shapes
      RunCase(rng, o, type == 1, &worst);
    }
  }
  std::printf("degenerate shapes: worst %d LSB\n", worst);
}

// Known values: black, white and the primaries land where BT.601 limited range puts them.
void TestKnownColours() {
  struct Known {
    std::uint8_t r, g, b, y, u, v;
  } known[] = {
      {0, 0, 0, 16, 128, 128},     {255, 255, 255, 235, 128, 128}, {255, 0, 0, 81, 90, 240},
      {0, 255, 0, 145, 54, 34},    {0, 0, 255, 41, 240, 110},
  };
  for (const Known& k : known) {
    const std::uint8_t px[12] = {k.r, k.g, k.b, k.r, k.g, k.b, k.r, k.g, k.b, k.r, k.g, k.b};
    std::uint8_t out[6];
    ConvertOptions o;
    o.width = 2;
    o.height = 2;
    ConvertToYuv(px, out, o);
    for (int i = 0; i < 4; ++i) {
      if (std::abs(out[i] - k.y) > 1) Fail("known colour luma " + std::to_string(out[i]));
    }
    if (std::abs(out[4] - k.u) > 1 || std::abs(out[5] - k.v) > 1) {
      Fail("known colour chroma " + std::to_string(out[4]) + "," + std::to_string(out[5]));
    }
  }
  // NaN and infinities in float input read as clamped values, never garbage.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const float odd[3] = {nan, inf, -inf};
  std::uint8_t out[3];
  ConvertOptions o;
  o.width = 1;
  o.height = 1;
  ConvertToYuv(odd, out, o);
  // r = 0 (NaN), g = 255, b = 0.
  if (out[0] != 145 || out[1] != 54 || out[2] != 34) {
    Fail("NaN/inf handling: " + std::to_string(out[0]) + "," + std::to_string(out[1]) + "," + std::to_string(out[2]));
  }
}

}  // namespace

int main() {
  TestRandomSizes();
  TestDegenerateShapes();
  TestKnownColours();
  if (failures) {
    std::fprintf(stderr, "%d failure(s)\n", failures);
    return 1;
  }
  std::printf("all colour conversion tests passed\n");
  return 0;
}
