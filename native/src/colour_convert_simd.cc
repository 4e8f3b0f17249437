// Hand-vectorised uint8 strips (SSSE3, 16 columns of two rows a step) for colour_convert.cc, which
// finishes each strip's tail with its portable kernels. The compiler's own vectorisation of those
// spends most of a 1080p frame on the stride-3 gathers and on 32-bit multiplies; here the channels
// are split by byte shuffles in registers and the maths stays in 16-bit lanes:
//
//   luma:   Y * 256 = 16.5 * 256 + floor(R * kR) + floor(G * kG) + floor(B * kB), with each k the
//           reference coefficient * 256 as a 16-bit integer, via mulhi(x << 8, k); every term and
//           the sum fit in uint16 (at most 60,288).
//   chroma: the 2x2 block sum S (0..1020) of each channel via maddubs; a term is
//           floor(S * |k| / 4) = mulhi(S << 6, |k| * 256), positive terms added to 128.5 * 256 and
//           negative ones subtracted, all within uint16 (4,224..61,568).
//
// Each term is floored once, so a result is within 3/256 LSB of the reference before its final
// rounding: the same ≤ 1 LSB contract as the portable kernels (colour_convert_test checks both).
#include "colour_convert_simd.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include <cstdlib>
#include <cstring>

#define ARCLIGHT_SSSE3 __attribute__((target("ssse3")))

namespace arclight::colour::simd {

namespace {

// Reference coefficients (BT.601 limited range, per 256) * 256, rounded; magnitudes only.
constexpr std::uint16_t kYR = 16829, kYG = 33039, kYB = 6416;  // 65.738, 129.057, 25.064
constexpr std::uint16_t kUR = 9714, kUG = 19070, kUB = 28784;  // -37.945, -74.494, +112.439
constexpr std::uint16_t kVR = 28784, kVG = 24103, kVB = 4681;  // +112.439, -94.154, -18.285
constexpr std::uint16_t kLumaBias = 4224;                      // 16.5 * 256
constexpr std::uint16_t kChromaBias = 32896;                   // 128.5 * 256

ARCLIGHT_SSSE3 __m128i Splat(std::uint16_t k) { return _mm_set1_epi16(static_cast<short>(k)); }

ARCLIGHT_SSSE3 __m128i LumaHalf(__m128i r, __m128i g, __m128i b, bool high) {
  const __m128i zero = _mm_setzero_si128();
  // x << 8 in 16-bit lanes: the byte into the high half.
  const __m128i r8 = high ? _mm_unpackhi_epi8(zero, r) : _mm_unpacklo_epi8(zero, r);
  const __m128i g8 = high ? _mm_unpackhi_epi8(zero, g) : _mm_unpacklo_epi8(zero, g);
  const __m128i b8 = high ? _mm_unpackhi_epi8(zero, b) : _mm_unpacklo_epi8(zero, b);
  __m128i sum = _mm_add_epi16(_mm_mulhi_epu16(r8, Splat(kYR)), _mm_mulhi_epu16(g8, Splat(kYG)));
  sum = _mm_add_epi16(sum, _mm_mulhi_epu16(b8, Splat(kYB)));
  sum = _mm_add_epi16(sum, Splat(kLumaBias));
  return _mm_srli_epi16(sum, 8);
}

// One chroma value per lane from three 2x2 sums already shifted left by 6.
ARCLIGHT_SSSE3 __m128i ChromaLanes(__m128i plus, std::uint16_t kPlus, __m128i minusA, std::uint16_t kMinusA, __m128i minusB,
                                   std::uint16_t kMinusB) {
  __m128i v = _mm_add_epi16(Splat(kChromaBias), _mm_mulhi_epu16(plus, Splat(kPlus)));
  v = _mm_sub_epi16(v, _mm_mulhi_epu16(minusA, Splat(kMinusA)));
  v = _mm_sub_epi16(v, _mm_mulhi_epu16(minusB, Splat(kMinusB)));
  return _mm_srli_epi16(v, 8);
}

}  // namespace

// ARCLIGHT_COLOUR_SIMD=off or =ssse3 narrows what runs (the tests cover each path on one CPU).
const char* SimdOverride() {
  const char* value = std::getenv("ARCLIGHT_COLOUR_SIMD");
  return value == nullptr ? "" : value;
}

bool Available() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("ssse3") && std::strcmp(SimdOverride(), "off") != 0;
}

namespace {

struct Rgb {
  __m128i r, g, b;
};

// Byte i of 48 holds channel i % 3 of pixel i / 3. For output channel c, which bytes of the first,
// second and third 16 to take (-1 selects zero). Plain bytes, loaded where used: nothing runs an
// SSSE3 instruction before Available() said yes.
alignas(16) constexpr std::int8_t kShuffle3[3][3][16] = {
    {{0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
     {-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1},
     {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13}},
    {{1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
     {-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1},
     {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14}},
    {{2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
     {-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1},
     {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15}},
};

ARCLIGHT_SSSE3 __m128i ShuffleMask(int channel, int part) {
  return _mm_load_si128(reinterpret_cast<const __m128i*>(kShuffle3[channel][part]));
}

// 16 interleaved 3-channel pixels (48 bytes) split by byte shuffles; `order` says which memory
// channel is red, green and blue.
ARCLIGHT_SSSE3 Rgb Load3(const std::uint8_t* p, const ChannelOrder& order) {
  const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16));
  const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32));
  __m128i c[3];
  for (int i = 0; i < 3; i++) {
    c[i] = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, ShuffleMask(i, 0)), _mm_shuffle_epi8(b, ShuffleMask(i, 1))),
                        _mm_shuffle_epi8(d, ShuffleMask(i, 2)));
  }
  return {c[order.r], c[order.g], c[order.b]};
}

// 16 interleaved 4-channel pixels (64 bytes): per 4 pixels [c0 x4 | c1 x4 | c2 x4 | c3 x4], then a
// 4x4 transpose of 32-bit groups.
ARCLIGHT_SSSE3 Rgb Load4(const std::uint8_t* p, const ChannelOrder& order) {
  const __m128i group = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m128i t0 = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), group);
  const __m128i t1 = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)), group);
  const __m128i t2 = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32)), group);
  const __m128i t3 = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 48)), group);
  const __m128i lo01 = _mm_unpacklo_epi32(t0, t1);
  const __m128i lo23 = _mm_unpacklo_epi32(t2, t3);
  const __m128i hi01 = _mm_unpackhi_epi32(t0, t1);
  const __m128i hi23 = _mm_unpackhi_epi32(t2, t3);
  __m128i c[3];
  c[0] = _mm_unpacklo_epi64(lo01, lo23);
  c[1] = _mm_unpackhi_epi64(lo01, lo23);
  c[2] = _mm_unpacklo_epi64(hi01, hi23);
  return {c[order.r], c[order.g], c[order.b]};
}

ARCLIGHT_SSSE3 Rgb LoadPlanar(const PlanarU8& row, int x) {
  return {_mm_loadu_si128(reinterpret_cast<const __m128i*>(row.r + x)), _mm_loadu_si128(reinterpret_cast<const __m128i*>(row.g + x)),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(row.b + x))};
}

ARCLIGHT_SSSE3 void StoreLuma(const Rgb& p, std::uint8_t* y) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(y), _mm_packus_epi16(LumaHalf(p.r, p.g, p.b, false), LumaHalf(p.r, p.g, p.b, true)));
}

// 2x2 block sums of one channel over rows a and b, shifted left by 6 (at most 65,280).
ARCLIGHT_SSSE3 __m128i BlockSums(__m128i a, __m128i b) {
  const __m128i ones = _mm_set1_epi8(1);
  return _mm_slli_epi16(_mm_add_epi16(_mm_maddubs_epi16(a, ones), _mm_maddubs_epi16(b, ones)), 6);
}

// Eight chroma samples from 16 columns of rows a and b, at output index `out`.
ARCLIGHT_SSSE3 void StoreChroma(const Rgb& a, const Rgb& b, std::uint8_t* u, std::uint8_t* v, int uvStep, int out) {
  const __m128i sr = BlockSums(a.r, b.r);
  const __m128i sg = BlockSums(a.g, b.g);
  const __m128i sb = BlockSums(a.b, b.b);
  const __m128i uu = ChromaLanes(sb, kUB, sr, kUR, sg, kUG);
  const __m128i vv = ChromaLanes(sr, kVR, sg, kVG, sb, kVB);
  if (uvStep == 2) {
    // NV12: each 16-bit lane becomes the byte pair (u, v).
    _mm_storeu_si128(reinterpret_cast<__m128i*>(u + 2 * out), _mm_or_si128(uu, _mm_slli_epi16(vv, 8)));
  } else {
    const __m128i zero = _mm_setzero_si128();
    _mm_storel_epi64(reinterpret_cast<__m128i*>(u + out), _mm_packus_epi16(uu, zero));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(v + out), _mm_packus_epi16(vv, zero));
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// AVX2: the same strip, 32 columns a step. The two 128-bit lanes hold columns 0–15 and 16–31 and
// every operation below stays within a lane, so each lane computes exactly what the SSSE3 step
// computes for its 16 columns (shuffle masks and lane layouts included).

#define ARCLIGHT_AVX2 __attribute__((target("avx2")))

namespace {

struct Rgb256 {
  __m256i r, g, b;
};

ARCLIGHT_AVX2 __m256i Load2x128(const std::uint8_t* lo, const std::uint8_t* hi) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(lo))),
                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi)), 1);
}

ARCLIGHT_AVX2 __m256i Splat256(std::uint16_t k) { return _mm256_set1_epi16(static_cast<short>(k)); }

ARCLIGHT_AVX2 __m256i ShuffleMask256(int channel, int part) {
  return _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(kShuffle3[channel][part])));
}

ARCLIGHT_AVX2 Rgb256 Load3x32(const std::uint8_t* p, const ChannelOrder& order) {
  const __m256i a = Load2x128(p, p + 48);
  const __m256i b = Load2x128(p + 16, p + 64);
  const __m256i d = Load2x128(p + 32, p + 80);
  __m256i c[3];
  for (int i = 0; i < 3; i++) {
    c[i] = _mm256_or_si256(_mm256_or_si256(_mm256_shuffle_epi8(a, ShuffleMask256(i, 0)), _mm256_shuffle_epi8(b, ShuffleMask256(i, 1))),
                           _mm256_shuffle_epi8(d, ShuffleMask256(i, 2)));
  }
  return {c[order.r], c[order.g], c[order.b]};
}

ARCLIGHT_AVX2 Rgb256 Load4x32(const std::uint8_t* p, const ChannelOrder& order) {
  const __m256i group = _mm256_broadcastsi128_si256(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
  const __m256i t0 = _mm256_shuffle_epi8(Load2x128(p, p + 64), group);
  const __m256i t1 = _mm256_shuffle_epi8(Load2x128(p + 16, p + 80), group);
  const __m256i t2 = _mm256_shuffle_epi8(Load2x128(p + 32, p + 96), group);
  const __m256i t3 = _mm256_shuffle_epi8(Load2x128(p + 48, p + 112), group);
  const __m256i lo01 = _mm256_unpacklo_epi32(t0, t1);
  const __m256i lo23 = _mm256_unpacklo_epi32(t2, t3);
  const __m256i hi01 = _mm256_unpackhi_epi32(t0, t1);
  const __m256i hi23 = _mm256_unpackhi_epi32(t2, t3);
  __m256i c[3];
  c[0] = _mm256_unpacklo_epi64(lo01, lo23);
  c[1] = _mm256_unpackhi_epi64(lo01, lo23);
  c[2] = _mm256_unpacklo_epi64(hi01, hi23);
  return {c[order.r], c[order.g], c[order.b]};
}

ARCLIGHT_AVX2 Rgb256 LoadPlanar32(const PlanarU8& row, int x) {
  return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row.r + x)), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row.g + x)),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row.b + x))};
}

ARCLIGHT_AVX2 __m256i LumaHalf256(__m256i r, __m256i g, __m256i b, bool high) {
  const __m256i zero = _mm256_setzero_si256();
  const __m256i r8 = high ? _mm256_unpackhi_epi8(zero, r) : _mm256_unpacklo_epi8(zero, r);
  const __m256i g8 = high ? _mm256_unpackhi_epi8(zero, g) : _mm256_unpacklo_epi8(zero, g);
  const __m256i b8 = high ? _mm256_unpackhi_epi8(zero, b) : _mm256_unpacklo_epi8(zero, b);
  __m256i sum = _mm256_add_epi16(_mm256_mulhi_epu16(r8, Splat256(kYR)), _mm256_mulhi_epu16(g8, Splat256(kYG)));
  sum = _mm256_add_epi16(sum, _mm256_mulhi_epu16(b8, Splat256(kYB)));
  return _mm256_srli_epi16(_mm256_add_epi16(sum, Splat256(kLumaBias)), 8);
}

ARCLIGHT_AVX2 void StoreLuma32(const Rgb256& p, std::uint8_t* y) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(y), _mm256_packus_epi16(LumaHalf256(p.r, p.g, p.b, false), LumaHalf256(p.r, p.g, p.b, true)));
}

ARCLIGHT_AVX2 __m256i BlockSums256(__m256i a, __m256i b) {
  const __m256i ones = _mm256_set1_epi8(1);
  return _mm256_slli_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(a, ones), _mm256_maddubs_epi16(b, ones)), 6);
}

ARCLIGHT_AVX2 __m256i ChromaLanes256(__m256i plus, std::uint16_t kPlus, __m256i minusA, std::uint16_t kMinusA, __m256i minusB,
                                     std::uint16_t kMinusB) {
  __m256i v = _mm256_add_epi16(Splat256(kChromaBias), _mm256_mulhi_epu16(plus, Splat256(kPlus)));
  v = _mm256_sub_epi16(v, _mm256_mulhi_epu16(minusA, Splat256(kMinusA)));
  v = _mm256_sub_epi16(v, _mm256_mulhi_epu16(minusB, Splat256(kMinusB)));
  return _mm256_srli_epi16(v, 8);
}

ARCLIGHT_AVX2 void StoreChroma16(const Rgb256& a, const Rgb256& b, std::uint8_t* u, std::uint8_t* v, int uvStep, int out) {
  const __m256i sr = BlockSums256(a.r, b.r);
  const __m256i sg = BlockSums256(a.g, b.g);
  const __m256i sb = BlockSums256(a.b, b.b);
  const __m256i uu = ChromaLanes256(sb, kUB, sr, kUR, sg, kUG);
  const __m256i vv = ChromaLanes256(sr, kVR, sg, kVG, sb, kVB);
  if (uvStep == 2) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(u + 2 * out), _mm256_or_si256(uu, _mm256_slli_epi16(vv, 8)));
  } else {
    // packus leaves each lane's 8 bytes in its low quadword: gather quadwords 0 and 2.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi16(uu, vv), 0xD8);
    // Now [u0..7 | u8..15 | v0..7 | v8..15].
    _mm_storeu_si128(reinterpret_cast<__m128i*>(u + out), _mm256_castsi256_si128(packed));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(v + out), _mm256_extracti128_si256(packed, 1));
  }
}

ARCLIGHT_AVX2 int StripAvx2(const StripRows& rows, std::uint8_t* yA, std::uint8_t* yB, std::uint8_t* u, std::uint8_t* v, int uvStep,
                            int width) {
  int x = 0;
  for (; x + 32 <= width; x += 32) {
    Rgb256 a, b;
    if (rows.channels == 0) {
      a = LoadPlanar32(rows.planarA, x);
      b = LoadPlanar32(rows.planarB, x);
    } else if (rows.channels == 3) {
      a = Load3x32(rows.a + 3 * x, rows.order);
      b = Load3x32(rows.b + 3 * x, rows.order);
    } else {
      a = Load4x32(rows.a + 4 * x, rows.order);
      b = Load4x32(rows.b + 4 * x, rows.order);
    }
    StoreLuma32(a, yA + x);
    if (yB != nullptr) StoreLuma32(b, yB + x);
    StoreChroma16(a, b, u, v, uvStep, x / 2);
  }
  return x;
}

}  // namespace

// One pass over a 2-row strip: every 16 columns of both rows are loaded once, split into channels
// in registers, and give 32 luma and 8 + 8 chroma samples; nothing goes through scratch memory.
ARCLIGHT_SSSE3 int StripSsse3(const StripRows& rows, std::uint8_t* yA, std::uint8_t* yB, std::uint8_t* u, std::uint8_t* v, int uvStep,
                              int width, int x) {
  for (; x + 16 <= width; x += 16) {
    Rgb a, b;
    if (rows.channels == 0) {
      a = LoadPlanar(rows.planarA, x);
      b = LoadPlanar(rows.planarB, x);
    } else if (rows.channels == 3) {
      a = Load3(rows.a + 3 * x, rows.order);
      b = Load3(rows.b + 3 * x, rows.order);
    } else {
      a = Load4(rows.a + 4 * x, rows.order);
      b = Load4(rows.b + 4 * x, rows.order);
    }
    StoreLuma(a, yA + x);
    if (yB != nullptr) StoreLuma(b, yB + x);
    StoreChroma(a, b, u, v, uvStep, x / 2);
  }
  return x;
}

int Strip(const StripRows& rows, std::uint8_t* yA, std::uint8_t* yB, std::uint8_t* u, std::uint8_t* v, int uvStep, int width) {
  static const bool avx2 = __builtin_cpu_supports("avx2") && std::strcmp(SimdOverride(), "ssse3") != 0;
  // AVX2 takes 32 columns a step; SSSE3 the 16 left over.
  const int done = avx2 ? StripAvx2(rows, yA, yB, u, v, uvStep, width) : 0;
  return StripSsse3(rows, yA, yB, u, v, uvStep, width, done);
}

}  // namespace arclight::colour::simd

#else

namespace arclight::colour::simd {
bool Available() { return false; }
int Strip(const StripRows&, std::uint8_t*, std::uint8_t*, std::uint8_t*, std::uint8_t*, int, int) { return 0; }
}  // namespace arclight::colour::simd

#endif
