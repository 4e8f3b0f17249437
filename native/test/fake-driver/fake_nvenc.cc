// TEST DOUBLE — not NVIDIA code, not a real video encoder.
//
// A fake `libnvidia-encode.so.1` (NVENC API 11.1, the ffnvcodec nvEncodeAPI.h) for machines with
// no GPU, so that Arclight's NVENC encoder (native/src/nvenc/) runs its code paths end to end in
// tests. Loaded in place of the real library through ARCLIGHT_LIBNVIDIA_ENCODE; pairs with the
// fake libcuda.so.1 (fake_cuda.cc), whose "device pointers" are host addresses.
//
// Exports NvEncodeAPIGetMaxSupportedVersion and NvEncodeAPICreateInstance. The function list
// holds working fakes of the session, configuration, input-buffer, bitstream-buffer and
// CUDA-resource calls; the rest (async events, motion estimation only, stats, the legacy
// nvEncOpenEncodeSession and nvEncGetEncodePresetConfig) return NV_ENC_ERR_UNIMPLEMENTED.
// Every failure sets the session's nvEncGetLastErrorString text.
//
// The bitstream:
//   - H.264: a real, decodable Annex-B access unit of the input picture, every macroblock coded
//     as I_PCM (raw samples: lossless, no prediction, no transform). Constrained Baseline
//     (profile_idc 66, constraint_set0/1 = 1), level = NV_ENC_CONFIG_H264::level when set,
//     otherwise the lowest level (Table A-1) that fits the frame size and macroblock rate;
//     pic_order_cnt_type 2, log2_max_frame_num 4, max_num_ref_frames 1, frame cropping when the
//     size is not a multiple of 16, VUI only when h264VUIParameters asks for one. CAVLC PPS with
//     deblocking_filter_control_present_flag 1; one slice per picture (slice_type 7, I),
//     disable_deblocking_filter_idc 1. IDR pictures are nal_unit_type 5 with idr_pic_id counting
//     up; the others nal_unit_type 1, nal_ref_idc 3, frame_num counting mod 16. Whatever the
//     config asks for (profile, CABAC, B-frames), the output stays this.
//     SPS+PPS precede the first IDR, and later IDRs when repeatSPSPPS is set (as the real driver
//     documents), after a resolution change, and any picture sent with
//     NV_ENC_PIC_FLAG_OUTPUT_SPSPPS; never when disableSPSPPS is set. An access unit delimiter
//     (primary_pic_type 0) leads when outputAUD is set.
//   - HEVC: a marker stream that is NOT decodable: per picture one NAL unit,
//     00 00 00 01 | NAL header (2 bytes: type 19 IDR_W_RADL → 26 01, type 1 TRAIL_R → 02 01) |
//     payload = the session's 0-based picture count as 4 bytes big-endian, then 0x80 (RBSP stop
//     bit, so the NAL never ends in 0x00), with emulation-prevention bytes inserted as in any NAL
//     unit (e.g. picture 1 → 00 00 03 00 01 80).
// Input pictures (NV12, IYUV, YV12: direct, honouring pitch; ARGB = bytes B,G,R,A and ABGR =
// bytes R,G,B,A: BT.601 limited range, integer maths, chroma from 2x2 averages) become I420
// first. Sizes must be even (the fake cannot crop 4:2:0 to an odd size): odd → INVALID_PARAM.
// Synchronous mode only (enableEncodeAsync → UNSUPPORTED_PARAM, as on Linux); frameIntervalP
// 0 (intra only) or 1 (IPP), never B-frames.
//
// Environment:
//   ARCLIGHT_FAKE_NVENC_MODE  "ok" (default); "no-encoder" → nvEncOpenEncodeSessionEx returns
//                             NV_ENC_ERR_UNSUPPORTED_DEVICE (what a GPU without NVENC reports: seen
//                             on an H200, driver 580.159.04, by bench/gpu/check.ts on 27 Nov 2026);
//                             "no-hevc" → nvEncGetEncodeGUIDs lists H.264 only.
//   ARCLIGHT_FAKE_NVENC_FAIL_AFTER_FRAMES  N: FAULT INJECTION for tests. Once N pictures have been
//                             encoded in this process (all sessions together), every
//                             nvEncEncodePicture returns NV_ENC_ERR_DEVICE_NOT_EXIST, as when the
//                             GPU falls off the bus mid-stream; sessions still open, and their
//                             first encode fails. Unset or not a number: never.
//   ARCLIGHT_FAKE_NVENC_LOG   a file: one JSON object per line is appended for each session
//                             event ("event": "open", "initialize", "reconfigure", "encode",
//                             "eos", "destroy", and "error" for a call refused with a message);
//                             tests read it to check what the encoder asked for.
//
// Strictness beyond (or unverified against) the real driver, to catch caller bugs: encoding
// from a locked input buffer or into a locked bitstream buffer → NV_ENC_ERR_LOCK_BUSY;
// NV_ENC_PIC_PARAMS::inputWidth/inputHeight must equal the encode size, bufferFmt the buffer's
// format and pictureStruct NV_ENC_PIC_STRUCT_FRAME; a resource is mapped at most once at a time
// and must be unmapped before it is unregistered; when the fake libcuda.so.1 is loaded, a
// registered CUDA pointer must lie, with its whole surface (pitch × height plus chroma), inside
// one live allocation, at registration and at every encode.
#include <nvEncodeAPI.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace {

// ---------------------------------------------------------------------------------------------
// Environment and the JSON log.

enum class Mode { kOk, kNoEncoder, kNoHevc };

Mode GetMode() {
  const char* env = std::getenv("ARCLIGHT_FAKE_NVENC_MODE");
  if (!env) return Mode::kOk;
  if (std::strcmp(env, "no-encoder") == 0) return Mode::kNoEncoder;
  if (std::strcmp(env, "no-hevc") == 0) return Mode::kNoHevc;
  return Mode::kOk;
}

// ARCLIGHT_FAKE_NVENC_FAIL_AFTER_FRAMES, read at each encode (so a test may set it mid-run);
// -1 when unset.
long long FailAfterFrames() {
  const char* env = std::getenv("ARCLIGHT_FAKE_NVENC_FAIL_AFTER_FRAMES");
  if (!env || !*env) return -1;
  char* end = nullptr;
  const long long n = std::strtoll(env, &end, 10);
  return (*end == '\0' && n >= 0) ? n : -1;
}

class JsonLine {
 public:
  explicit JsonLine(const char* event) { Str("event", event); }
  JsonLine& Str(const char* key, const std::string& value) {
    Key(key);
    s_ += '"';
    for (char c : value) {
      if (c == '"' || c == '\\') s_ += '\\';
      if (static_cast<unsigned char>(c) < 0x20) continue;
      s_ += c;
    }
    s_ += '"';
    return *this;
  }
  JsonLine& Num(const char* key, unsigned long long value) {
    Key(key);
    s_ += std::to_string(value);
    return *this;
  }
  JsonLine& Int(const char* key, long long value) {
    Key(key);
    s_ += std::to_string(value);
    return *this;
  }
  JsonLine& Bool(const char* key, bool value) {
    Key(key);
    s_ += value ? "true" : "false";
    return *this;
  }
  // Appends the line to ARCLIGHT_FAKE_NVENC_LOG, if set. Callers hold g_mutex.
  void Write() {
    const char* path = std::getenv("ARCLIGHT_FAKE_NVENC_LOG");
    if (!path || !*path) return;
    std::FILE* f = std::fopen(path, "a");
    if (!f) return;
    std::fprintf(f, "%s}\n", s_.c_str());
    std::fclose(f);
  }

 private:
  void Key(const char* key) {
    s_ += s_.empty() ? "{\"" : ",\"";
    s_ += key;
    s_ += "\":";
  }
  std::string s_;
};

// ---------------------------------------------------------------------------------------------
// GUIDs and names.

bool SameGuid(const GUID& a, const GUID& b) { return std::memcmp(&a, &b, sizeof(GUID)) == 0; }

const GUID* const kPresets[] = {&NV_ENC_PRESET_P1_GUID, &NV_ENC_PRESET_P2_GUID, &NV_ENC_PRESET_P3_GUID,
                                &NV_ENC_PRESET_P4_GUID, &NV_ENC_PRESET_P5_GUID, &NV_ENC_PRESET_P6_GUID,
                                &NV_ENC_PRESET_P7_GUID};

// 1..7 for P1..P7, 0 for anything else.
int PresetNumber(const GUID& g) {
  for (int i = 0; i < 7; ++i)
    if (SameGuid(g, *kPresets[i])) return i + 1;
  return 0;
}

enum class Codec { kNone, kH264, kHevc };

Codec CodecOf(const GUID& g) {
  if (SameGuid(g, NV_ENC_CODEC_H264_GUID)) return Codec::kH264;
  if (SameGuid(g, NV_ENC_CODEC_HEVC_GUID)) return Codec::kHevc;
  return Codec::kNone;
}

bool CodecSupported(const GUID& g) {
  const Codec c = CodecOf(g);
  return c == Codec::kH264 || (c == Codec::kHevc && GetMode() != Mode::kNoHevc);
}

const char* TuningName(NV_ENC_TUNING_INFO t) {
  switch (t) {
    case NV_ENC_TUNING_INFO_HIGH_QUALITY: return "high_quality";
    case NV_ENC_TUNING_INFO_LOW_LATENCY: return "low_latency";
    case NV_ENC_TUNING_INFO_ULTRA_LOW_LATENCY: return "ultra_low_latency";
    case NV_ENC_TUNING_INFO_LOSSLESS: return "lossless";
    case NV_ENC_TUNING_INFO_UNDEFINED: return "undefined";
    default: return "other";
  }
}

const char* RateControlName(NV_ENC_PARAMS_RC_MODE m) {
  switch (m) {
    case NV_ENC_PARAMS_RC_CONSTQP: return "constqp";
    case NV_ENC_PARAMS_RC_VBR: return "vbr";
    case NV_ENC_PARAMS_RC_CBR: return "cbr";
    case NV_ENC_PARAMS_RC_CBR_LOWDELAY_HQ: return "cbr_lowdelay_hq";
    case NV_ENC_PARAMS_RC_CBR_HQ: return "cbr_hq";
    case NV_ENC_PARAMS_RC_VBR_HQ: return "vbr_hq";
    default: return "other";
  }
}

const char* MultiPassName(NV_ENC_MULTI_PASS m) {
  switch (m) {
    case NV_ENC_MULTI_PASS_DISABLED: return "disabled";
    case NV_ENC_TWO_PASS_QUARTER_RESOLUTION: return "two_pass_quarter";
    case NV_ENC_TWO_PASS_FULL_RESOLUTION: return "two_pass_full";
    default: return "other";
  }
}

const char* ProfileName(const GUID& g) {
  if (SameGuid(g, NV_ENC_CODEC_PROFILE_AUTOSELECT_GUID)) return "autoselect";
  if (SameGuid(g, NV_ENC_H264_PROFILE_BASELINE_GUID)) return "baseline";
  if (SameGuid(g, NV_ENC_H264_PROFILE_MAIN_GUID)) return "main";
  if (SameGuid(g, NV_ENC_H264_PROFILE_HIGH_GUID)) return "high";
  if (SameGuid(g, NV_ENC_H264_PROFILE_CONSTRAINED_HIGH_GUID)) return "constrained_high";
  if (SameGuid(g, NV_ENC_H264_PROFILE_PROGRESSIVE_HIGH_GUID)) return "progressive_high";
  if (SameGuid(g, NV_ENC_H264_PROFILE_HIGH_444_GUID)) return "high_444";
  if (SameGuid(g, NV_ENC_HEVC_PROFILE_MAIN_GUID)) return "hevc_main";
  if (SameGuid(g, NV_ENC_HEVC_PROFILE_MAIN10_GUID)) return "hevc_main10";
  if (SameGuid(g, NV_ENC_HEVC_PROFILE_FREXT_GUID)) return "hevc_frext";
  return "other";
}

// ---------------------------------------------------------------------------------------------
// Buffer formats and surface layout (the NVENC conventions: planes follow each other; NV12
// chroma rows have the luma pitch; IYUV/YV12 chroma rows have half of it, rounded up).

bool FormatSupported(NV_ENC_BUFFER_FORMAT f) {
  return f == NV_ENC_BUFFER_FORMAT_NV12 || f == NV_ENC_BUFFER_FORMAT_IYUV || f == NV_ENC_BUFFER_FORMAT_YV12 ||
         f == NV_ENC_BUFFER_FORMAT_ARGB || f == NV_ENC_BUFFER_FORMAT_ABGR;
}

const char* FormatName(NV_ENC_BUFFER_FORMAT f) {
  switch (f) {
    case NV_ENC_BUFFER_FORMAT_NV12: return "NV12";
    case NV_ENC_BUFFER_FORMAT_IYUV: return "IYUV";
    case NV_ENC_BUFFER_FORMAT_YV12: return "YV12";
    case NV_ENC_BUFFER_FORMAT_ARGB: return "ARGB";
    case NV_ENC_BUFFER_FORMAT_ABGR: return "ABGR";
    default: return "other";
  }
}

bool IsRgb(NV_ENC_BUFFER_FORMAT f) { return f == NV_ENC_BUFFER_FORMAT_ARGB || f == NV_ENC_BUFFER_FORMAT_ABGR; }

// Bytes in one row of the first plane.
std::size_t RowBytes(NV_ENC_BUFFER_FORMAT f, std::uint32_t width) {
  return IsRgb(f) ? static_cast<std::size_t>(width) * 4 : width;
}

std::size_t ChromaPitch(NV_ENC_BUFFER_FORMAT f, std::size_t pitch) {
  return f == NV_ENC_BUFFER_FORMAT_NV12 ? pitch : (pitch + 1) / 2;
}

std::size_t SurfaceBytes(NV_ENC_BUFFER_FORMAT f, std::size_t pitch, std::uint32_t height) {
  const std::size_t luma = pitch * height;
  const std::size_t chroma_rows = (height + 1) / 2;
  if (IsRgb(f)) return luma;
  if (f == NV_ENC_BUFFER_FORMAT_NV12) return luma + pitch * chroma_rows;
  return luma + 2 * ChromaPitch(f, pitch) * chroma_rows;
}

struct Surface {
  const std::uint8_t* base;
  std::size_t pitch;
  std::uint32_t width;   // allocated
  std::uint32_t height;  // allocated: the chroma planes start after `height` luma rows
  NV_ENC_BUFFER_FORMAT format;
};

struct I420 {
  int w = 0, h = 0;
  std::vector<std::uint8_t> y, u, v;
};

std::uint8_t RgbToY(int r, int g, int b) { return static_cast<std::uint8_t>(((66 * r + 129 * g + 25 * b + 128) >> 8) + 16); }
// The +32768 keeps the shifted value non-negative (so >> is a floor division); it adds 128.
std::uint8_t RgbToU(int r, int g, int b) { return static_cast<std::uint8_t>((-38 * r - 74 * g + 112 * b + 128 + 32768) >> 8); }
std::uint8_t RgbToV(int r, int g, int b) { return static_cast<std::uint8_t>((112 * r - 94 * g - 18 * b + 128 + 32768) >> 8); }

// The top-left w x h of the surface as I420 (w, h even).
I420 ToI420(const Surface& s, int w, int h) {
  I420 out;
  out.w = w;
  out.h = h;
  const int cw = w / 2, ch = h / 2;
  out.y.resize(static_cast<std::size_t>(w) * h);
  out.u.resize(static_cast<std::size_t>(cw) * ch);
  out.v.resize(static_cast<std::size_t>(cw) * ch);
  if (IsRgb(s.format)) {
    // ARGB is a little-endian word A8R8G8B8: bytes B, G, R, A. ABGR: bytes R, G, B, A.
    const int ri = s.format == NV_ENC_BUFFER_FORMAT_ARGB ? 2 : 0, bi = 2 - ri;
    auto px = [&](int x, int y) { return s.base + static_cast<std::size_t>(y) * s.pitch + static_cast<std::size_t>(x) * 4; };
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        const std::uint8_t* p = px(x, y);
        out.y[static_cast<std::size_t>(y) * w + x] = RgbToY(p[ri], p[1], p[bi]);
      }
    for (int y = 0; y < ch; ++y)
      for (int x = 0; x < cw; ++x) {
        int r = 0, g = 0, b = 0;
        for (int dy = 0; dy < 2; ++dy)
          for (int dx = 0; dx < 2; ++dx) {
            const std::uint8_t* p = px(2 * x + dx, 2 * y + dy);
            r += p[ri];
            g += p[1];
            b += p[bi];
          }
        r = (r + 2) >> 2;
        g = (g + 2) >> 2;
        b = (b + 2) >> 2;
        out.u[static_cast<std::size_t>(y) * cw + x] = RgbToU(r, g, b);
        out.v[static_cast<std::size_t>(y) * cw + x] = RgbToV(r, g, b);
      }
    return out;
  }
  for (int y = 0; y < h; ++y) std::memcpy(&out.y[static_cast<std::size_t>(y) * w], s.base + y * s.pitch, w);
  const std::uint8_t* chroma = s.base + s.pitch * s.height;
  if (s.format == NV_ENC_BUFFER_FORMAT_NV12) {
    for (int y = 0; y < ch; ++y) {
      const std::uint8_t* row = chroma + y * s.pitch;
      for (int x = 0; x < cw; ++x) {
        out.u[static_cast<std::size_t>(y) * cw + x] = row[2 * x];
        out.v[static_cast<std::size_t>(y) * cw + x] = row[2 * x + 1];
      }
    }
    return out;
  }
  const std::size_t cp = ChromaPitch(s.format, s.pitch);
  const std::uint8_t* first = chroma;
  const std::uint8_t* second = chroma + cp * ((s.height + 1) / 2);
  const std::uint8_t* u = s.format == NV_ENC_BUFFER_FORMAT_IYUV ? first : second;
  const std::uint8_t* v = s.format == NV_ENC_BUFFER_FORMAT_IYUV ? second : first;
  for (int y = 0; y < ch; ++y) {
    std::memcpy(&out.u[static_cast<std::size_t>(y) * cw], u + y * cp, cw);
    std::memcpy(&out.v[static_cast<std::size_t>(y) * cw], v + y * cp, cw);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Bitstream writing: an MSB-first bit writer for RBSPs, and NAL units with emulation prevention.

class BitWriter {
 public:
  void U(int n, std::uint64_t v) {
    for (int i = n - 1; i >= 0; --i) Bit(static_cast<int>((v >> i) & 1));
  }
  void Bit(int b) {
    cur_ = static_cast<std::uint8_t>((cur_ << 1) | (b & 1));
    if (++n_ == 8) {
      out_.push_back(cur_);
      cur_ = 0;
      n_ = 0;
    }
  }
  void Ue(std::uint32_t v) {
    const std::uint64_t x = static_cast<std::uint64_t>(v) + 1;
    int len = 0;
    while ((x >> len) > 1) ++len;  // len = floor(log2(x))
    U(len, 0);
    U(len + 1, x);
  }
  void Se(std::int32_t v) {
    const std::int64_t w = v;
    Ue(static_cast<std::uint32_t>(w > 0 ? 2 * w - 1 : -2 * w));
  }
  void AlignZero() {
    while (n_ != 0) Bit(0);
  }
  void Bytes(const std::uint8_t* p, std::size_t n) {
    if (n_ == 0) {
      out_.insert(out_.end(), p, p + n);
    } else {
      for (std::size_t i = 0; i < n; ++i) U(8, p[i]);
    }
  }
  void TrailingBits() {
    Bit(1);
    AlignZero();
  }
  const std::vector<std::uint8_t>& Data() const { return out_; }

 private:
  std::vector<std::uint8_t> out_;
  std::uint8_t cur_ = 0;
  int n_ = 0;
};

// Appends start code + header + the RBSP with emulation-prevention bytes (00 00 0x → 00 00 03 0x).
void AppendNal(std::vector<std::uint8_t>& out, std::initializer_list<std::uint8_t> header,
               const std::vector<std::uint8_t>& rbsp) {
  out.reserve(out.size() + 4 + header.size() + rbsp.size() + rbsp.size() / 64);
  out.insert(out.end(), {0, 0, 0, 1});
  out.insert(out.end(), header);
  int zeros = 0;
  for (std::uint8_t b : rbsp) {
    if (zeros >= 2 && b <= 3) {
      out.push_back(3);
      zeros = 0;
    }
    out.push_back(b);
    zeros = b == 0 ? zeros + 1 : 0;
  }
}

// ---------------------------------------------------------------------------------------------
// H.264 I_PCM writer.

struct H264Level {
  int idc;
  std::uint64_t max_mbps;  // macroblocks per second
  std::uint32_t max_fs;    // macroblocks per frame
};

// Table A-1 of H.264.
constexpr H264Level kLevels[] = {{10, 1485, 99},          {11, 3000, 396},         {12, 6000, 396},
                                 {13, 11880, 396},        {20, 11880, 396},        {21, 19800, 792},
                                 {22, 20250, 1620},       {30, 40500, 1620},       {31, 108000, 3600},
                                 {32, 216000, 5120},      {40, 245760, 8192},      {41, 245760, 8192},
                                 {42, 522240, 8704},      {50, 589824, 22080},     {51, 983040, 36864},
                                 {52, 2073600, 36864},    {60, 4177920, 139264},   {61, 8355840, 139264},
                                 {62, 16711680, 139264}};

int AutoLevel(std::uint32_t w_mbs, std::uint32_t h_mbs, std::uint32_t fps_num, std::uint32_t fps_den) {
  const std::uint64_t fs = static_cast<std::uint64_t>(w_mbs) * h_mbs;
  const std::uint64_t mbps = fps_den ? (fs * fps_num + fps_den - 1) / fps_den : fs * 30;
  for (const H264Level& l : kLevels) {
    if (fs > l.max_fs || mbps > l.max_mbps) continue;
    // Each dimension at most sqrt(8 * MaxFS) macroblocks (A.3.1).
    if (static_cast<std::uint64_t>(w_mbs) * w_mbs > 8ull * l.max_fs) continue;
    if (static_cast<std::uint64_t>(h_mbs) * h_mbs > 8ull * l.max_fs) continue;
    return l.idc;
  }
  return 62;
}

struct H264Stream {
  std::uint32_t width, height;
  std::uint32_t fps_num, fps_den;
  std::uint32_t level;  // NV_ENC_LEVEL value; 0 = auto
  NV_ENC_CONFIG_H264_VUI_PARAMETERS vui;
};

std::vector<std::uint8_t> H264Sps(const H264Stream& s) {
  const std::uint32_t w_mbs = (s.width + 15) / 16, h_mbs = (s.height + 15) / 16;
  int level = static_cast<int>(s.level);
  bool level_1b = false;
  if (level == NV_ENC_LEVEL_H264_1b) {
    level = 11;  // Baseline signals level 1b as level_idc 11 with constraint_set3_flag
    level_1b = true;
  } else if (level == NV_ENC_LEVEL_AUTOSELECT) {
    level = AutoLevel(w_mbs, h_mbs, s.fps_num, s.fps_den);
  }
  BitWriter b;
  b.U(8, 66);               // profile_idc: Baseline
  b.U(1, 1);                // constraint_set0_flag: obeys Baseline
  b.U(1, 1);                // constraint_set1_flag: obeys Main → Constrained Baseline
  b.U(1, 0);                // constraint_set2_flag
  b.U(1, level_1b ? 1 : 0); // constraint_set3_flag
  b.U(4, 0);                // constraint_set4/5_flag, reserved_zero_2bits
  b.U(8, static_cast<std::uint32_t>(level));
  b.Ue(0);                  // seq_parameter_set_id
  b.Ue(0);                  // log2_max_frame_num_minus4 → MaxFrameNum 16
  b.Ue(2);                  // pic_order_cnt_type: output order = decode order
  b.Ue(1);                  // max_num_ref_frames
  b.U(1, 0);                // gaps_in_frame_num_value_allowed_flag
  b.Ue(w_mbs - 1);          // pic_width_in_mbs_minus1
  b.Ue(h_mbs - 1);          // pic_height_in_map_units_minus1
  b.U(1, 1);                // frame_mbs_only_flag
  b.U(1, 1);                // direct_8x8_inference_flag
  const std::uint32_t crop_right = (w_mbs * 16 - s.width) / 2, crop_bottom = (h_mbs * 16 - s.height) / 2;
  const bool crop = crop_right != 0 || crop_bottom != 0;
  b.U(1, crop ? 1 : 0);     // frame_cropping_flag (units of 2 samples in 4:2:0)
  if (crop) {
    b.Ue(0);
    b.Ue(crop_right);
    b.Ue(0);
    b.Ue(crop_bottom);
  }
  const NV_ENC_CONFIG_H264_VUI_PARAMETERS& v = s.vui;
  const bool vui = v.overscanInfoPresentFlag || v.videoSignalTypePresentFlag || v.chromaSampleLocationFlag ||
                   v.bitstreamRestrictionFlag;
  b.U(1, vui ? 1 : 0);      // vui_parameters_present_flag
  if (vui) {
    b.U(1, 0);              // aspect_ratio_info_present_flag
    b.U(1, v.overscanInfoPresentFlag ? 1 : 0);
    if (v.overscanInfoPresentFlag) b.U(1, v.overscanInfo ? 1 : 0);
    b.U(1, v.videoSignalTypePresentFlag ? 1 : 0);
    if (v.videoSignalTypePresentFlag) {
      b.U(3, v.videoFormat & 7);
      b.U(1, v.videoFullRangeFlag ? 1 : 0);
      b.U(1, v.colourDescriptionPresentFlag ? 1 : 0);
      if (v.colourDescriptionPresentFlag) {
        b.U(8, v.colourPrimaries & 0xff);
        b.U(8, v.transferCharacteristics & 0xff);
        b.U(8, v.colourMatrix & 0xff);
      }
    }
    b.U(1, v.chromaSampleLocationFlag ? 1 : 0);
    if (v.chromaSampleLocationFlag) {
      b.Ue(v.chromaSampleLocationTop);
      b.Ue(v.chromaSampleLocationBot);
    }
    b.U(1, 0);              // timing_info_present_flag
    b.U(1, 0);              // nal_hrd_parameters_present_flag
    b.U(1, 0);              // vcl_hrd_parameters_present_flag
    b.U(1, 0);              // pic_struct_present_flag
    b.U(1, v.bitstreamRestrictionFlag ? 1 : 0);
    if (v.bitstreamRestrictionFlag) {
      b.U(1, 1);            // motion_vectors_over_pic_boundaries_flag
      b.Ue(0);              // max_bytes_per_pic_denom: no limit
      b.Ue(0);              // max_bits_per_mb_denom: no limit
      b.Ue(16);             // log2_max_mv_length_horizontal
      b.Ue(16);             // log2_max_mv_length_vertical
      b.Ue(0);              // max_num_reorder_frames
      b.Ue(1);              // max_dec_frame_buffering
    }
  }
  b.TrailingBits();
  return b.Data();
}

std::vector<std::uint8_t> H264Pps() {
  BitWriter b;
  b.Ue(0);    // pic_parameter_set_id
  b.Ue(0);    // seq_parameter_set_id
  b.U(1, 0);  // entropy_coding_mode_flag: CAVLC
  b.U(1, 0);  // bottom_field_pic_order_in_frame_present_flag
  b.Ue(0);    // num_slice_groups_minus1
  b.Ue(0);    // num_ref_idx_l0_default_active_minus1
  b.Ue(0);    // num_ref_idx_l1_default_active_minus1
  b.U(1, 0);  // weighted_pred_flag
  b.U(2, 0);  // weighted_bipred_idc
  b.Se(0);    // pic_init_qp_minus26
  b.Se(0);    // pic_init_qs_minus26
  b.Se(0);    // chroma_qp_index_offset
  b.U(1, 1);  // deblocking_filter_control_present_flag
  b.U(1, 0);  // constrained_intra_pred_flag
  b.U(1, 0);  // redundant_pic_cnt_present_flag
  b.TrailingBits();
  return b.Data();
}

// One slice holding the whole picture, every macroblock I_PCM (edge macroblocks repeat the last
// row/column of the picture).
std::vector<std::uint8_t> H264Slice(const I420& pic, bool idr, std::uint32_t frame_num, std::uint32_t idr_pic_id) {
  const int w_mbs = (pic.w + 15) / 16, h_mbs = (pic.h + 15) / 16;
  const int cw = pic.w / 2, ch = pic.h / 2;
  BitWriter b;
  b.Ue(0);               // first_mb_in_slice
  b.Ue(7);               // slice_type: I (all slices of the picture)
  b.Ue(0);               // pic_parameter_set_id
  b.U(4, frame_num & 15);
  if (idr) b.Ue(idr_pic_id);
  // pic_order_cnt_type 2: no POC syntax. I slice: no ref_pic_list_modification content.
  if (idr) {
    b.U(1, 0);           // no_output_of_prior_pics_flag
    b.U(1, 0);           // long_term_reference_flag
  } else {
    b.U(1, 0);           // adaptive_ref_pic_marking_mode_flag: sliding window
  }
  b.Se(0);               // slice_qp_delta
  b.Ue(1);               // disable_deblocking_filter_idc: off
  std::uint8_t block[384];
  for (int my = 0; my < h_mbs; ++my) {
    for (int mx = 0; mx < w_mbs; ++mx) {
      b.Ue(25);          // mb_type: I_PCM
      b.AlignZero();     // pcm_alignment_zero_bit
      std::uint8_t* o = block;
      const bool inside = (mx + 1) * 16 <= pic.w && (my + 1) * 16 <= pic.h;
      for (int y = 0; y < 16; ++y, o += 16) {
        const int sy = std::min(my * 16 + y, pic.h - 1);
        const std::uint8_t* row = &pic.y[static_cast<std::size_t>(sy) * pic.w];
        if (inside) {
          std::memcpy(o, row + mx * 16, 16);
        } else {
          for (int x = 0; x < 16; ++x) o[x] = row[std::min(mx * 16 + x, pic.w - 1)];
        }
      }
      for (const std::vector<std::uint8_t>* plane : {&pic.u, &pic.v}) {
        for (int y = 0; y < 8; ++y, o += 8) {
          const int sy = std::min(my * 8 + y, ch - 1);
          const std::uint8_t* row = &(*plane)[static_cast<std::size_t>(sy) * cw];
          if (inside) {
            std::memcpy(o, row + mx * 8, 8);
          } else {
            for (int x = 0; x < 8; ++x) o[x] = row[std::min(mx * 8 + x, cw - 1)];
          }
        }
      }
      b.Bytes(block, sizeof block);
    }
  }
  b.TrailingBits();      // rbsp_slice_trailing_bits
  return b.Data();
}

// ---------------------------------------------------------------------------------------------
// Optional cross-check with the fake libcuda.so.1: is [ptr, ptr+bytes) inside a live allocation?

using PointerGetAttributeFn = int (*)(void*, int, unsigned long long);

PointerGetAttributeFn FakeCudaQuery() {
  static PointerGetAttributeFn fn = nullptr;
  if (fn) return fn;
  // Only when libcuda.so.1 is already loaded (the encoder loads it before NVENC) and is the fake.
  void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!lib) return nullptr;
  if (!dlsym(lib, "arclight_fake_cuda_live_allocations")) {
    dlclose(lib);
    return nullptr;
  }
  fn = reinterpret_cast<PointerGetAttributeFn>(dlsym(lib, "cuPointerGetAttribute"));
  return fn;  // the handle stays open while fn is cached
}

// Empty when fine or when no fake CUDA is loaded; otherwise what is wrong.
std::string CheckDeviceRange(unsigned long long ptr, std::size_t bytes) {
  PointerGetAttributeFn query = FakeCudaQuery();
  if (!query) return {};
  unsigned long long start = 0;
  std::size_t size = 0;
  if (query(&start, 11 /* CU_POINTER_ATTRIBUTE_RANGE_START_ADDR */, ptr) != 0 ||
      query(&size, 12 /* CU_POINTER_ATTRIBUTE_RANGE_SIZE */, ptr) != 0)
    return "the CUDA pointer is not inside a live cuMemAlloc allocation";
  if (ptr - start + bytes > size)
    return "the surface (" + std::to_string(bytes) + " bytes) runs past the end of its CUDA allocation (" +
           std::to_string(size - (ptr - start)) + " bytes left from the pointer)";
  return {};
}

// ---------------------------------------------------------------------------------------------
// Sessions.

struct InputBuffer {
  NV_ENC_BUFFER_FORMAT format;
  std::uint32_t width, height;
  std::size_t pitch;
  std::vector<std::uint8_t> memory;
  bool locked = false;
};

struct Registration {
  unsigned long long ptr;
  std::uint32_t width, height, pitch;
  NV_ENC_BUFFER_FORMAT format;
  bool mapped = false;
};

struct Mapping {
  Registration* registration;
};

struct Bitstream {
  std::vector<std::uint8_t> data;
  bool ready = false;
  bool locked = false;
  NV_ENC_PIC_TYPE picture_type = NV_ENC_PIC_TYPE_UNKNOWN;
  std::uint64_t timestamp = 0, duration = 0;
  std::uint32_t frame_idx = 0;
};

struct Session {
  void* device = nullptr;
  std::string last_error;
  bool initialized = false;
  Codec codec = Codec::kNone;
  NV_ENC_INITIALIZE_PARAMS init{};
  NV_ENC_CONFIG config{};
  std::uint32_t width = 0, height = 0, max_width = 0, max_height = 0;
  std::uint64_t pictures = 0;           // encoded so far
  std::uint64_t since_idr = 0;          // pictures since the last IDR
  std::uint32_t frame_num = 0;          // of the last picture
  std::uint32_t idr_pic_id = 0;         // of the next IDR
  bool force_idr = false;               // from reconfigure (forceIDR, resetEncoder, new size)
  bool headers_due = true;              // SPS/PPS owed (first IDR, new size)
  std::map<void*, std::unique_ptr<InputBuffer>> inputs;
  std::map<void*, std::unique_ptr<Registration>> registrations;
  std::map<void*, std::unique_ptr<Mapping>> mappings;
  std::map<void*, std::unique_ptr<Bitstream>> bitstreams;
};

std::mutex g_mutex;
std::set<Session*> g_sessions;
// Pictures encoded by every session of this process, for ARCLIGHT_FAKE_NVENC_FAIL_AFTER_FRAMES.
std::uint64_t g_pictures = 0;

NVENCSTATUS Fail(Session* s, NVENCSTATUS status, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
NVENCSTATUS Fail(Session* s, NVENCSTATUS status, const char* fmt, ...) {
  if (s) {
    char buf[512];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, args);
    va_end(args);
    s->last_error = std::string("fake NVENC: ") + buf;
    JsonLine("error").Int("status", static_cast<int>(status)).Str("message", buf).Write();
  }
  return status;
}

// Resolves an encoder handle under g_mutex; null when unknown.
Session* Find(void* encoder) {
  auto* s = static_cast<Session*>(encoder);
  return g_sessions.count(s) ? s : nullptr;
}

#define SESSION_OR_RETURN(encoder)                                   \
  std::lock_guard<std::mutex> lock(g_mutex);                         \
  Session* s = Find(encoder);                                        \
  if (!s) return encoder ? NV_ENC_ERR_INVALID_ENCODERDEVICE : NV_ENC_ERR_INVALID_PTR

template <typename T>
T* Lookup(std::map<void*, std::unique_ptr<T>>& m, void* handle) {
  auto it = m.find(handle);
  return it == m.end() ? nullptr : it->second.get();
}

template <typename T>
void* Keep(std::map<void*, std::unique_ptr<T>>& m, std::unique_ptr<T> object) {
  void* handle = object.get();
  m[handle] = std::move(object);
  return handle;
}

// ---------------------------------------------------------------------------------------------
// The API.

NVENCSTATUS OpenEncodeSessionEx(NV_ENC_OPEN_ENCODE_SESSION_EX_PARAMS* p, void** encoder) {
  if (!p || !encoder) return NV_ENC_ERR_INVALID_PTR;
  *encoder = nullptr;
  if (p->version != NV_ENC_OPEN_ENCODE_SESSION_EX_PARAMS_VER) return NV_ENC_ERR_INVALID_VERSION;
  if (p->apiVersion != NVENCAPI_VERSION) return NV_ENC_ERR_INVALID_VERSION;
  if (p->deviceType != NV_ENC_DEVICE_TYPE_CUDA) return NV_ENC_ERR_UNSUPPORTED_DEVICE;
  if (!p->device) return NV_ENC_ERR_INVALID_DEVICE;
  if (GetMode() == Mode::kNoEncoder) return NV_ENC_ERR_UNSUPPORTED_DEVICE;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto* s = new Session;
  s->device = p->device;
  g_sessions.insert(s);
  *encoder = s;
  JsonLine("open").Str("deviceType", "cuda").Write();
  return NV_ENC_SUCCESS;
}

NVENCSTATUS GetEncodeGUIDCount(void* encoder, std::uint32_t* count) {
  SESSION_OR_RETURN(encoder);
  if (!count) return Fail(s, NV_ENC_ERR_INVALID_PTR, "encodeGUIDCount is null");
  *count = GetMode() == Mode::kNoHevc ? 1 : 2;
  return NV_ENC_SUCCESS;
}

NVENCSTATUS GetEncodeGUIDs(void* encoder, GUID* guids, std::uint32_t size, std::uint32_t* count) {
  SESSION_OR_RETURN(encoder);
  if (!guids || !count) return Fail(s, NV_ENC_ERR_INVALID_PTR, "GUIDs or GUIDCount is null");
  const GUID all[] = {NV_ENC_CODEC_H264_GUID, NV_ENC_CODEC_HEVC_GUID};
  const std::uint32_t n = std::min<std::uint32_t>(size, GetMode() == Mode::kNoHevc ? 1 : 2);
  for (std::uint32_t i = 0; i < n; ++i) guids[i] = all[i];
  *count = n;
  return NV_ENC_SUCCESS;
}

NVENCSTATUS GetEncodeProfileGUIDCount(void* encoder, GUID codec, std::uint32_t* count) {
  SESSION_OR_RETURN(encoder);
  if (!count) return Fail(s, NV_ENC_ERR_INVALID_PTR, "count is null");
  if (!CodecSupported(codec)) return Fail(s, NV_ENC_ERR_INVALID_PARAM, "unsupported encode GUID");
  *count = CodecOf(codec) == Codec::kH264 ? 4 : 2;
  return NV_ENC_SUCCESS;
}

NVENCSTATUS GetEncodeProfileGUIDs(void* encoder, GUID codec, GUID* guids, std::uint32_t size, std::uint32_t* count) {
  SESSION_OR_RETURN(encoder);
  if (!guids || !count) return Fail(s, NV_ENC_ERR_INVALID_PTR, "GUIDs or count is null");
  if (!CodecSupported(codec)) return Fail(s, NV_ENC_ERR_INVALID_PARAM, "unsupported encode GUID");
  const GUID h264[] = {NV_ENC_CODEC_PROFILE_AUTOSELECT_GUID, NV_ENC_H264_PROFILE_BASELINE_GUID,
                       NV_ENC_H264_PROFILE_MAIN_GUID, NV_ENC_H264_PROFILE_HIGH_GUID};
  const GUID hevc[] = {NV_ENC_CODEC_PROFILE_AUTOSELECT_GUID, NV_ENC_HEVC_PROFILE_MAIN_GUID};
  const bool is_h264 = CodecOf(codec) == Codec::kH264;
  const std::uint32_t n = std::min<std::uint32_t>(size, is_h264 ? 4 : 2);
  for (std::uint32_t i = 0; i < n; ++i) guids[i] = is_h264 ? h264[i] : hevc[i];
  *count = n;
  return NV_ENC_SUCCESS;
}

const NV_ENC_BUFFER_FORMAT kFormats[] = {NV_ENC_BUFFER_FORMAT_NV12, NV_ENC_BUFFER_FORMAT_YV12, NV_ENC_BUFFER_FORMAT_IYUV,
                                         NV_ENC_BUFFER_FORMAT_ARGB, NV_ENC_BUFFER_FORMAT_ABGR};

NVENCSTATUS GetInputFormatCount(void* encoder, GUID codec, std::uint32_t* count) {
  SESSION_OR_RETURN(encoder);
  if (!count) return Fail(s, NV_ENC_ERR_INVALID_PTR, "count is null");
  if (!CodecSupported(codec)) return Fail(s, NV_ENC_ERR_INVALID_PARAM, "unsupported encode GUID");
  *count = 5;
  return NV_ENC_SUCCESS;
}

NVENCSTATUS GetInputFormats(void* encoder, GUID codec, NV_ENC_BUFFER_FORMAT* formats, std::uint32_t size,
                            std::uint32_t* count) {
  SESSION_OR_RETURN(encoder);
  if (!formats || !count) return Fail(s, NV_ENC_ERR_INVALID_PTR, "formats or count is null");
  if (!CodecSupported(codec)) return Fail(s, NV_ENC_ERR_INVALID_PARAM, "unsupported encode GUID");
  const std::uint32_t n = std::min<std::uint32_t>(size, 5);
  for (std::uint32_t i = 0; i < n; ++i) formats[i] = kFormats[i];
  *count = n;
  return NV_ENC_SUCCESS;
}

// The fake's own limits (not a real GPU's).
NVENCSTATUS GetEncodeCaps(void* encoder, GUID codec, NV_ENC_CAPS_PARAM* caps, int* value) {
  SESSION_OR_RETURN(encoder);
  if (!caps || !value) return Fail(s, NV_ENC_ERR_INVALID_PTR, "capsParam or capsVal is null");
  if (caps->version != NV_ENC_CAPS_PARAM_VER) return Fail(s, NV_ENC_ERR_INVALID_VERSION, "NV_ENC_CAPS_PARAM version");
  if (!CodecSupported(codec)) return Fail(s, NV_ENC_ERR_INVALID_PARAM, "unsupported encode GUID");
  const bool h264 = CodecOf(codec) == Codec::kH264;
  switch (caps->capsToQuery) {
    case NV_ENC_CAPS_WIDTH_MAX: case NV_ENC_CAPS_HEIGHT_MAX: *value = 4096; break;
    case NV_ENC_CAPS_WIDTH_MIN: case NV_ENC_CAPS_HEIGHT_MIN: *value = 16; break;
    case NV_ENC_CAPS_MB_NUM_MAX: *value = 256 * 256; break;
    case NV_ENC_CAPS_MB_PER_SEC_MAX: *value = 983040; break;
    case NV_ENC_CAPS_LEVEL_MAX: *value = h264 ? NV_ENC_LEVEL_H264_62 : NV_ENC_LEVEL_HEVC_62; break;
    case NV_ENC_CAPS_LEVEL_MIN: *value = h264 ? NV_ENC_LEVEL_H264_1 : NV_ENC_LEVEL_HEVC_1; break;
    case NV_ENC_CAPS_SUPPORTED_RATECONTROL_MODES: *value = 0x3f; break;
    case NV_ENC_CAPS_SUPPORT_INTRA_REFRESH:
    case NV_ENC_CAPS_SINGLE_SLICE_INTRA_REFRESH:
    case NV_ENC_CAPS_SUPPORT_DYN_RES_CHANGE:
    case NV_ENC_CAPS_SUPPORT_DYN_BITRATE_CHANGE:
    case NV_ENC_CAPS_SUPPORT_DYN_FORCE_CONSTQP:
    case NV_ENC_CAPS_SUPPORT_DYN_RCMODE_CHANGE:
    case NV_ENC_CAPS_SUPPORT_CUSTOM_VBV_BUF_SIZE:
    case NV_ENC_CAPS_SUPPORT_REF_PIC_INVALIDATION:
    case NV_ENC_CAPS_SUPPORT_CONSTRAINED_ENCODING:
    case NV_ENC_CAPS_SUPPORT_DYNAMIC_SLICE_MODE:
    case NV_ENC_CAPS_SUPPORT_QPELMV:
    case NV_ENC_CAPS_NUM_ENCODER_ENGINES:
      *value = 1;
      break;
    default: *value = 0; break;  // B-frames, async, 10-bit, 4:4:4, lossless, ME-only, ...: none
  }
  return NV_ENC_SUCCESS;
}

NVENCSTATUS GetEncodePresetCount(void* encoder, GUID codec, std::uint32_t* count) {
  SESSION_OR_RETURN(encoder);
  if (!count) return Fail(s, NV_ENC_ERR_INVALID_PTR, "count is null");
  if (!CodecSupported(codec)) return Fail(s, NV_ENC_ERR_INVALID_PARAM, "unsupported encode GUID");
  *count = 7;
  return NV_ENC_SUCCESS;
}

NVENCSTATUS GetEncodePresetGUIDs(void* encoder, GUID codec, GUID* guids, std::uint32_t size, std::uint32_t* count) {
  SESSION_OR_RETURN(encoder);
  if (!guids || !count) return Fail(s, NV_ENC_ERR_INVALID_PTR, "GUIDs or count is null");
  if (!CodecSupported(codec)) return Fail(s, NV_ENC_ERR_INVALID_PARAM, "unsupported encode GUID");
  const std::uint32_t n = std::min<std::uint32_t>(size, 7);
  for (std::uint32_t i = 0; i < n; ++i) guids[i] = *kPresets[i];
  *count = n;
  return NV_ENC_SUCCESS;
}

// Plausible preset values (not NVIDIA's tables): GOP 250 with IDR period 250; P-frames only for
// the latency tunings; CBR for low/ultra-low latency, VBR for high quality, const QP for lossless.
NVENCSTATUS GetEncodePresetConfigEx(void* encoder, GUID codec, GUID preset, NV_ENC_TUNING_INFO tuning,
                                    NV_ENC_PRESET_CONFIG* out) {
  SESSION_OR_RETURN(encoder);
  if (!out) return Fail(s, NV_ENC_ERR_INVALID_PTR, "presetConfig is null");
  if (out->version != NV_ENC_PRESET_CONFIG_VER)
    return Fail(s, NV_ENC_ERR_INVALID_VERSION, "NV_ENC_PRESET_CONFIG version is not NV_ENC_PRESET_CONFIG_VER");
  if (out->presetCfg.version != NV_ENC_CONFIG_VER)
    return Fail(s, NV_ENC_ERR_INVALID_VERSION, "presetCfg.version is not NV_ENC_CONFIG_VER");
  if (!CodecSupported(codec)) return Fail(s, NV_ENC_ERR_INVALID_PARAM, "unsupported encode GUID");
  const int p = PresetNumber(preset);
  if (p == 0) return Fail(s, NV_ENC_ERR_INVALID_PARAM, "preset GUID is not one of P1..P7");
  if (tuning <= NV_ENC_TUNING_INFO_UNDEFINED || tuning >= NV_ENC_TUNING_INFO_COUNT)
    return Fail(s, NV_ENC_ERR_INVALID_PARAM, "tuningInfo %d is not a valid tuning", static_cast<int>(tuning));
  const bool h264 = CodecOf(codec) == Codec::kH264;
  const bool latency = tuning == NV_ENC_TUNING_INFO_LOW_LATENCY || tuning == NV_ENC_TUNING_INFO_ULTRA_LOW_LATENCY;
  NV_ENC_CONFIG& c = out->presetCfg;
  std::memset(&c, 0, sizeof c);
  c.version = NV_ENC_CONFIG_VER;
  c.profileGUID = NV_ENC_CODEC_PROFILE_AUTOSELECT_GUID;
  c.gopLength = 250;
  // The header: P3..P7 (H.264) / P2..P7 (HEVC) enable B-frames for high quality and lossless.
  c.frameIntervalP = !latency && p >= (h264 ? 3 : 2) ? 3 : 1;
  c.frameFieldMode = NV_ENC_PARAMS_FRAME_FIELD_MODE_FRAME;
  c.mvPrecision = NV_ENC_MV_PRECISION_QUARTER_PEL;
  NV_ENC_RC_PARAMS& rc = c.rcParams;
  rc.version = NV_ENC_RC_PARAMS_VER;
  rc.rateControlMode = tuning == NV_ENC_TUNING_INFO_LOSSLESS ? NV_ENC_PARAMS_RC_CONSTQP
                       : latency                             ? NV_ENC_PARAMS_RC_CBR
                                                             : NV_ENC_PARAMS_RC_VBR;
  rc.constQP = {28, 31, 25};
  rc.averageBitRate = 5000000;
  rc.maxBitRate = latency ? 0 : 10000000;
  rc.zeroReorderDelay = latency ? 1 : 0;
  rc.lowDelayKeyFrameScale = tuning == NV_ENC_TUNING_INFO_ULTRA_LOW_LATENCY ? 1 : 2;
  rc.multiPass = NV_ENC_MULTI_PASS_DISABLED;
  if (h264) {
    NV_ENC_CONFIG_H264& h = c.encodeCodecConfig.h264Config;
    h.level = NV_ENC_LEVEL_AUTOSELECT;
    h.idrPeriod = c.gopLength;
    h.chromaFormatIDC = 1;
    h.maxNumRefFrames = 0;
    h.entropyCodingMode = NV_ENC_H264_ENTROPY_CODING_MODE_AUTOSELECT;
  } else {
    NV_ENC_CONFIG_HEVC& h = c.encodeCodecConfig.hevcConfig;
    h.level = NV_ENC_LEVEL_AUTOSELECT;
    h.tier = NV_ENC_TIER_HEVC_MAIN;
    h.idrPeriod = c.gopLength;
    h.chromaFormatIDC = 1;
  }
  return NV_ENC_SUCCESS;
}

// Config fields common to the log of initialize; codec-specific ones picked by codec.
void LogConfig(JsonLine& line, const Session& s) {
  const NV_ENC_CONFIG& c = s.config;
  const NV_ENC_RC_PARAMS& rc = c.rcParams;
  line.Str("rateControl", RateControlName(rc.rateControlMode))
      .Num("averageBitRate", rc.averageBitRate)
      .Num("maxBitRate", rc.maxBitRate)
      .Num("vbvBufferSize", rc.vbvBufferSize)
      .Num("vbvInitialDelay", rc.vbvInitialDelay)
      .Str("multiPass", MultiPassName(rc.multiPass))
      .Bool("zeroReorderDelay", rc.zeroReorderDelay)
      .Num("gopLength", c.gopLength)
      .Int("frameIntervalP", c.frameIntervalP)
      .Str("profile", ProfileName(c.profileGUID));
  if (s.codec == Codec::kH264) {
    const NV_ENC_CONFIG_H264& h = c.encodeCodecConfig.h264Config;
    line.Num("idrPeriod", h.idrPeriod)
        .Num("level", h.level)
        .Bool("enableIntraRefresh", h.enableIntraRefresh)
        .Num("intraRefreshPeriod", h.intraRefreshPeriod)
        .Num("intraRefreshCnt", h.intraRefreshCnt)
        .Bool("repeatSPSPPS", h.repeatSPSPPS)
        .Bool("outputAUD", h.outputAUD)
        .Bool("disableSPSPPS", h.disableSPSPPS);
  } else {
    const NV_ENC_CONFIG_HEVC& h = c.encodeCodecConfig.hevcConfig;
    line.Num("idrPeriod", h.idrPeriod)
        .Num("level", h.level)
        .Bool("enableIntraRefresh", h.enableIntraRefresh)
        .Num("intraRefreshPeriod", h.intraRefreshPeriod)
        .Num("intraRefreshCnt", h.intraRefreshCnt)
        .Bool("repeatSPSPPS", h.repeatSPSPPS)
        .Bool("outputAUD", h.outputAUD)
        .Bool("disableSPSPPS", h.disableSPSPPS);
  }
}

NVENCSTATUS CheckConfig(Session* s, const NV_ENC_CONFIG& c) {
  if (c.version != NV_ENC_CONFIG_VER) return Fail(s, NV_ENC_ERR_INVALID_VERSION, "encodeConfig->version is not NV_ENC_CONFIG_VER");
  if (c.frameIntervalP < 0 || c.frameIntervalP > 1)
    return Fail(s, NV_ENC_ERR_UNSUPPORTED_PARAM, "frameIntervalP %d: the fake encodes no B-frames (use 1)", c.frameIntervalP);
  if (c.frameFieldMode != 0 && c.frameFieldMode != NV_ENC_PARAMS_FRAME_FIELD_MODE_FRAME)
    return Fail(s, NV_ENC_ERR_UNSUPPORTED_PARAM, "field encoding is not supported");
  return NV_ENC_SUCCESS;
}

NVENCSTATUS InitializeEncoder(void* encoder, NV_ENC_INITIALIZE_PARAMS* p) {
  SESSION_OR_RETURN(encoder);
  if (!p) return Fail(s, NV_ENC_ERR_INVALID_PTR, "createEncodeParams is null");
  if (p->version != NV_ENC_INITIALIZE_PARAMS_VER)
    return Fail(s, NV_ENC_ERR_INVALID_VERSION, "NV_ENC_INITIALIZE_PARAMS version is not NV_ENC_INITIALIZE_PARAMS_VER");
  if (s->initialized) return Fail(s, NV_ENC_ERR_INVALID_CALL, "the encoder is already initialised");
  if (!CodecSupported(p->encodeGUID)) return Fail(s, NV_ENC_ERR_INVALID_PARAM, "unsupported encode GUID");
  const int preset = PresetNumber(p->presetGUID);
  if (preset == 0) return Fail(s, NV_ENC_ERR_INVALID_PARAM, "preset GUID is not one of P1..P7");
  if (p->encodeWidth == 0 || p->encodeHeight == 0) return Fail(s, NV_ENC_ERR_INVALID_PARAM, "encodeWidth/encodeHeight is 0");
  if (p->encodeWidth > 4096 || p->encodeHeight > 4096) return Fail(s, NV_ENC_ERR_INVALID_PARAM, "size above 4096");
  if (p->encodeWidth % 2 || p->encodeHeight % 2)
    return Fail(s, NV_ENC_ERR_INVALID_PARAM, "odd size %ux%u: the fake needs even sizes for 4:2:0", p->encodeWidth, p->encodeHeight);
  if (p->frameRateNum == 0 || p->frameRateDen == 0) return Fail(s, NV_ENC_ERR_INVALID_PARAM, "frameRateNum/frameRateDen is 0");
  if (!p->encodeConfig) return Fail(s, NV_ENC_ERR_INVALID_PTR, "encodeConfig is null (the fake needs an explicit config)");
  if (NVENCSTATUS r = CheckConfig(s, *p->encodeConfig); r != NV_ENC_SUCCESS) return r;
  if (p->enableEncodeAsync) return Fail(s, NV_ENC_ERR_UNSUPPORTED_PARAM, "enableEncodeAsync: asynchronous mode is Windows-only");
  if (p->enableMEOnlyMode) return Fail(s, NV_ENC_ERR_UNSUPPORTED_PARAM, "motion-estimation-only mode");
  if ((p->maxEncodeWidth && p->maxEncodeWidth < p->encodeWidth) || (p->maxEncodeHeight && p->maxEncodeHeight < p->encodeHeight))
    return Fail(s, NV_ENC_ERR_INVALID_PARAM, "maxEncodeWidth/Height below encodeWidth/Height");
  s->codec = CodecOf(p->encodeGUID);
  s->init = *p;
  s->config = *p->encodeConfig;
  s->init.encodeConfig = &s->config;
  s->width = p->encodeWidth;
  s->height = p->encodeHeight;
  s->max_width = p->maxEncodeWidth ? p->maxEncodeWidth : p->encodeWidth;
  s->max_height = p->maxEncodeHeight ? p->maxEncodeHeight : p->encodeHeight;
  s->initialized = true;
  JsonLine line("initialize");
  line.Str("codec", s->codec == Codec::kH264 ? "h264" : "hevc")
      .Num("width", p->encodeWidth)
      .Num("height", p->encodeHeight)
      .Num("frameRateNum", p->frameRateNum)
      .Num("frameRateDen", p->frameRateDen)
      .Str("preset", "p" + std::to_string(preset))
      .Str("tuning", TuningName(p->tuningInfo))
      .Bool("enablePTD", p->enablePTD)
      .Num("maxEncodeWidth", p->maxEncodeWidth)
      .Num("maxEncodeHeight", p->maxEncodeHeight);
  LogConfig(line, *s);
  line.Write();
  return NV_ENC_SUCCESS;
}

NVENCSTATUS ReconfigureEncoder(void* encoder, NV_ENC_RECONFIGURE_PARAMS* p) {
  SESSION_OR_RETURN(encoder);
  if (!p) return Fail(s, NV_ENC_ERR_INVALID_PTR, "reInitEncodeParams is null");
  if (p->version != NV_ENC_RECONFIGURE_PARAMS_VER)
    return Fail(s, NV_ENC_ERR_INVALID_VERSION, "NV_ENC_RECONFIGURE_PARAMS version is not NV_ENC_RECONFIGURE_PARAMS_VER");
  if (!s->initialized) return Fail(s, NV_ENC_ERR_ENCODER_NOT_INITIALIZED, "reconfigure before nvEncInitializeEncoder");
  const NV_ENC_INITIALIZE_PARAMS& r = p->reInitEncodeParams;
  if (r.version != NV_ENC_INITIALIZE_PARAMS_VER)
    return Fail(s, NV_ENC_ERR_INVALID_VERSION, "reInitEncodeParams.version is not NV_ENC_INITIALIZE_PARAMS_VER");
  if (!SameGuid(r.encodeGUID, s->init.encodeGUID)) return Fail(s, NV_ENC_ERR_INVALID_PARAM, "reconfigure cannot change the codec");
  if (PresetNumber(r.presetGUID) == 0) return Fail(s, NV_ENC_ERR_INVALID_PARAM, "preset GUID is not one of P1..P7");
  if (r.encodeWidth == 0 || r.encodeHeight == 0 || r.frameRateNum == 0 || r.frameRateDen == 0)
    return Fail(s, NV_ENC_ERR_INVALID_PARAM, "encodeWidth/encodeHeight/frameRateNum/frameRateDen is 0");
  if (r.encodeWidth % 2 || r.encodeHeight % 2) return Fail(s, NV_ENC_ERR_INVALID_PARAM, "odd size");
  if (r.encodeWidth > s->max_width || r.encodeHeight > s->max_height)
    return Fail(s, NV_ENC_ERR_INVALID_PARAM, "new size %ux%u above maxEncodeWidth/Height %ux%u", r.encodeWidth,
                r.encodeHeight, s->max_width, s->max_height);
  if (r.enableEncodeAsync != s->init.enableEncodeAsync || r.enablePTD != s->init.enablePTD)
    return Fail(s, NV_ENC_ERR_INVALID_PARAM, "reconfigure cannot change enableEncodeAsync or enablePTD");
  if (r.encodeConfig) {
    if (NVENCSTATUS st = CheckConfig(s, *r.encodeConfig); st != NV_ENC_SUCCESS) return st;
    s->config = *r.encodeConfig;
  }
  const bool resized = r.encodeWidth != s->width || r.encodeHeight != s->height;
  const std::uint32_t max_w = s->max_width, max_h = s->max_height;
  s->init = r;
  s->init.encodeConfig = &s->config;
  s->init.maxEncodeWidth = max_w;
  s->init.maxEncodeHeight = max_h;
  s->width = r.encodeWidth;
  s->height = r.encodeHeight;
  // resetEncoder with picture-type decision on forces an IDR (header); a new size needs one too.
  if (p->forceIDR || (p->resetEncoder && r.enablePTD) || resized) s->force_idr = true;
  if (resized) s->headers_due = true;
  const NV_ENC_RC_PARAMS& rc = s->config.rcParams;
  JsonLine("reconfigure")
      .Num("width", s->width)
      .Num("height", s->height)
      .Num("frameRateNum", r.frameRateNum)
      .Num("frameRateDen", r.frameRateDen)
      .Str("rateControl", RateControlName(rc.rateControlMode))
      .Num("averageBitRate", rc.averageBitRate)
      .Num("maxBitRate", rc.maxBitRate)
      .Num("vbvBufferSize", rc.vbvBufferSize)
      .Num("vbvInitialDelay", rc.vbvInitialDelay)
      .Bool("resetEncoder", p->resetEncoder)
      .Bool("forceIDR", p->forceIDR)
      .Write();
  return NV_ENC_SUCCESS;
}

NVENCSTATUS CreateInputBuffer(void* encoder, NV_ENC_CREATE_INPUT_BUFFER* p) {
  SESSION_OR_RETURN(encoder);
  if (!p) return Fail(s, NV_ENC_ERR_INVALID_PTR, "createInputBufferParams is null");
  if (p->version != NV_ENC_CREATE_INPUT_BUFFER_VER)
    return Fail(s, NV_ENC_ERR_INVALID_VERSION, "NV_ENC_CREATE_INPUT_BUFFER version");
  if (!s->initialized) return Fail(s, NV_ENC_ERR_ENCODER_NOT_INITIALIZED, "input buffer before nvEncInitializeEncoder");
  if (p->width == 0 || p->height == 0 || p->width > 4096 || p->height > 4096)
    return Fail(s, NV_ENC_ERR_INVALID_PARAM, "input buffer size %ux%u", p->width, p->height);
  if (!FormatSupported(p->bufferFmt))
    return Fail(s, NV_ENC_ERR_UNSUPPORTED_PARAM, "buffer format 0x%x (the fake takes NV12, IYUV, YV12, ARGB, ABGR)",
                static_cast<unsigned>(p->bufferFmt));
  auto buffer = std::make_unique<InputBuffer>();
  buffer->format = p->bufferFmt;
  buffer->width = p->width;
  buffer->height = p->height;
  buffer->pitch = (RowBytes(p->bufferFmt, p->width) + 255) / 256 * 256;
  buffer->memory.assign(SurfaceBytes(p->bufferFmt, buffer->pitch, p->height), 0);
  p->inputBuffer = Keep(s->inputs, std::move(buffer));
  return NV_ENC_SUCCESS;
}

NVENCSTATUS DestroyInputBuffer(void* encoder, NV_ENC_INPUT_PTR handle) {
  SESSION_OR_RETURN(encoder);
  if (!s->inputs.erase(handle)) return Fail(s, NV_ENC_ERR_INVALID_PARAM, "not an input buffer of this session");
  return NV_ENC_SUCCESS;
}

NVENCSTATUS LockInputBuffer(void* encoder, NV_ENC_LOCK_INPUT_BUFFER* p) {
  SESSION_OR_RETURN(encoder);
  if (!p) return Fail(s, NV_ENC_ERR_INVALID_PTR, "lockInputBufferParams is null");
  if (p->version != NV_ENC_LOCK_INPUT_BUFFER_VER) return Fail(s, NV_ENC_ERR_INVALID_VERSION, "NV_ENC_LOCK_INPUT_BUFFER version");
  InputBuffer* b = Lookup(s->inputs, p->inputBuffer);
  if (!b) return Fail(s, NV_ENC_ERR_INVALID_PARAM, "not an input buffer of this session");
  b->locked = true;
  p->bufferDataPtr = b->memory.data();
  p->pitch = static_cast<std::uint32_t>(b->pitch);
  return NV_ENC_SUCCESS;
}

NVENCSTATUS UnlockInputBuffer(void* encoder, NV_ENC_INPUT_PTR handle) {
  SESSION_OR_RETURN(encoder);
  InputBuffer* b = Lookup(s->inputs, handle);
  if (!b) return Fail(s, NV_ENC_ERR_INVALID_PARAM, "not an input buffer of this session");
  if (!b->locked) return Fail(s, NV_ENC_ERR_INVALID_CALL, "input buffer is not locked");
  b->locked = false;
  return NV_ENC_SUCCESS;
}

NVENCSTATUS CreateBitstreamBuffer(void* encoder, NV_ENC_CREATE_BITSTREAM_BUFFER* p) {
  SESSION_OR_RETURN(encoder);
  if (!p) return Fail(s, NV_ENC_ERR_INVALID_PTR, "createBitstreamBufferParams is null");
  if (p->version != NV_ENC_CREATE_BITSTREAM_BUFFER_VER)
    return Fail(s, NV_ENC_ERR_INVALID_VERSION, "NV_ENC_CREATE_BITSTREAM_BUFFER version");
  if (!s->initialized) return Fail(s, NV_ENC_ERR_ENCODER_NOT_INITIALIZED, "bitstream buffer before nvEncInitializeEncoder");
  p->bitstreamBuffer = Keep(s->bitstreams, std::make_unique<Bitstream>());
  p->bitstreamBufferPtr = nullptr;
  return NV_ENC_SUCCESS;
}

NVENCSTATUS DestroyBitstreamBuffer(void* encoder, NV_ENC_OUTPUT_PTR handle) {
  SESSION_OR_RETURN(encoder);
  if (!s->bitstreams.erase(handle)) return Fail(s, NV_ENC_ERR_INVALID_PARAM, "not a bitstream buffer of this session");
  return NV_ENC_SUCCESS;
}

NVENCSTATUS RegisterResource(void* encoder, NV_ENC_REGISTER_RESOURCE* p) {
  SESSION_OR_RETURN(encoder);
  if (!p) return Fail(s, NV_ENC_ERR_INVALID_PTR, "registerResParams is null");
  if (p->version != NV_ENC_REGISTER_RESOURCE_VER) return Fail(s, NV_ENC_ERR_INVALID_VERSION, "NV_ENC_REGISTER_RESOURCE version");
  if (p->resourceType != NV_ENC_INPUT_RESOURCE_TYPE_CUDADEVICEPTR)
    return Fail(s, NV_ENC_ERR_UNIMPLEMENTED, "resourceType %d: the fake registers CUDA device pointers only",
                static_cast<int>(p->resourceType));
  if (p->bufferUsage != NV_ENC_INPUT_IMAGE) return Fail(s, NV_ENC_ERR_UNIMPLEMENTED, "bufferUsage: input images only");
  if (!p->resourceToRegister) return Fail(s, NV_ENC_ERR_INVALID_PTR, "resourceToRegister is null");
  if (!FormatSupported(p->bufferFormat))
    return Fail(s, NV_ENC_ERR_UNSUPPORTED_PARAM, "buffer format 0x%x (the fake takes NV12, IYUV, YV12, ARGB, ABGR)",
                static_cast<unsigned>(p->bufferFormat));
  if (p->width == 0 || p->height == 0) return Fail(s, NV_ENC_ERR_INVALID_PARAM, "width/height is 0");
  if (p->pitch < RowBytes(p->bufferFormat, p->width))
    return Fail(s, NV_ENC_ERR_INVALID_PARAM, "pitch %u below one row of %u pixels of %s", p->pitch, p->width,
                FormatName(p->bufferFormat));
  const auto ptr = static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(p->resourceToRegister));
  const std::string bad = CheckDeviceRange(ptr, SurfaceBytes(p->bufferFormat, p->pitch, p->height));
  if (!bad.empty()) return Fail(s, NV_ENC_ERR_RESOURCE_REGISTER_FAILED, "%s", bad.c_str());
  auto reg = std::make_unique<Registration>();
  reg->ptr = ptr;
  reg->width = p->width;
  reg->height = p->height;
  reg->pitch = p->pitch;
  reg->format = p->bufferFormat;
  p->registeredResource = Keep(s->registrations, std::move(reg));
  return NV_ENC_SUCCESS;
}

NVENCSTATUS UnregisterResource(void* encoder, NV_ENC_REGISTERED_PTR handle) {
  SESSION_OR_RETURN(encoder);
  Registration* reg = Lookup(s->registrations, handle);
  if (!reg) return Fail(s, NV_ENC_ERR_RESOURCE_NOT_REGISTERED, "not a registered resource of this session");
  if (reg->mapped) return Fail(s, NV_ENC_ERR_INVALID_CALL, "resource is still mapped: nvEncUnmapInputResource first");
  s->registrations.erase(handle);
  return NV_ENC_SUCCESS;
}

NVENCSTATUS MapInputResource(void* encoder, NV_ENC_MAP_INPUT_RESOURCE* p) {
  SESSION_OR_RETURN(encoder);
  if (!p) return Fail(s, NV_ENC_ERR_INVALID_PTR, "mapInputResParams is null");
  if (p->version != NV_ENC_MAP_INPUT_RESOURCE_VER) return Fail(s, NV_ENC_ERR_INVALID_VERSION, "NV_ENC_MAP_INPUT_RESOURCE version");
  Registration* reg = Lookup(s->registrations, p->registeredResource);
  if (!reg) return Fail(s, NV_ENC_ERR_RESOURCE_NOT_REGISTERED, "not a registered resource of this session");
  if (reg->mapped) return Fail(s, NV_ENC_ERR_MAP_FAILED, "resource is already mapped");
  reg->mapped = true;
  p->mappedResource = Keep(s->mappings, std::make_unique<Mapping>(Mapping{reg}));
  p->mappedBufferFmt = reg->format;
  return NV_ENC_SUCCESS;
}

NVENCSTATUS UnmapInputResource(void* encoder, NV_ENC_INPUT_PTR handle) {
  SESSION_OR_RETURN(encoder);
  Mapping* m = Lookup(s->mappings, handle);
  if (!m) return Fail(s, NV_ENC_ERR_RESOURCE_NOT_MAPPED, "not a mapped resource of this session");
  m->registration->mapped = false;
  s->mappings.erase(handle);
  return NV_ENC_SUCCESS;
}

NVENCSTATUS EncodePicture(void* encoder, NV_ENC_PIC_PARAMS* p) {
  SESSION_OR_RETURN(encoder);
  if (!p) return Fail(s, NV_ENC_ERR_INVALID_PTR, "encodePicParams is null");
  if (p->version != NV_ENC_PIC_PARAMS_VER) return Fail(s, NV_ENC_ERR_INVALID_VERSION, "NV_ENC_PIC_PARAMS version");
  if (!s->initialized) return Fail(s, NV_ENC_ERR_ENCODER_NOT_INITIALIZED, "encode before nvEncInitializeEncoder");
  const long long fail_after = FailAfterFrames();
  if (fail_after >= 0 && g_pictures >= static_cast<std::uint64_t>(fail_after) && !(p->encodePicFlags & NV_ENC_PIC_FLAG_EOS))
    return Fail(s, NV_ENC_ERR_DEVICE_NOT_EXIST, "the device is gone (ARCLIGHT_FAKE_NVENC_FAIL_AFTER_FRAMES=%lld)", fail_after);
  if (p->encodePicFlags & NV_ENC_PIC_FLAG_EOS) {
    // Synchronous mode holds nothing back: end of stream has nothing to flush.
    JsonLine("eos").Num("pictures", s->pictures).Write();
    return NV_ENC_SUCCESS;
  }

  Surface surface{};
  const char* input_kind = nullptr;
  if (InputBuffer* b = Lookup(s->inputs, p->inputBuffer)) {
    if (b->locked) return Fail(s, NV_ENC_ERR_LOCK_BUSY, "input buffer is still locked (nvEncUnlockInputBuffer first)");
    surface = Surface{b->memory.data(), b->pitch, b->width, b->height, b->format};
    input_kind = "host";
  } else if (Mapping* m = Lookup(s->mappings, p->inputBuffer)) {
    const Registration& r = *m->registration;
    const std::string bad = CheckDeviceRange(r.ptr, SurfaceBytes(r.format, r.pitch, r.height));
    if (!bad.empty()) return Fail(s, NV_ENC_ERR_INVALID_PARAM, "mapped resource: %s", bad.c_str());
    surface = Surface{reinterpret_cast<const std::uint8_t*>(static_cast<std::uintptr_t>(r.ptr)), r.pitch, r.width, r.height,
                      r.format};
    input_kind = "cuda";
  } else {
    return Fail(s, NV_ENC_ERR_INVALID_PARAM, "inputBuffer is neither an input buffer nor a mapped resource of this session");
  }
  Bitstream* out = Lookup(s->bitstreams, p->outputBitstream);
  if (!out) return Fail(s, NV_ENC_ERR_INVALID_PARAM, "outputBitstream is not a bitstream buffer of this session");
  if (out->locked) return Fail(s, NV_ENC_ERR_LOCK_BUSY, "output bitstream buffer is still locked");
  if (p->pictureStruct != NV_ENC_PIC_STRUCT_FRAME)
    return Fail(s, NV_ENC_ERR_INVALID_PARAM, "pictureStruct %d: progressive frames (NV_ENC_PIC_STRUCT_FRAME) only",
                static_cast<int>(p->pictureStruct));
  if (p->inputWidth != s->width || p->inputHeight != s->height)
    return Fail(s, NV_ENC_ERR_INVALID_PARAM, "inputWidth/inputHeight %ux%u differ from the encode size %ux%u", p->inputWidth,
                p->inputHeight, s->width, s->height);
  if (p->bufferFmt != surface.format)
    return Fail(s, NV_ENC_ERR_INVALID_PARAM, "bufferFmt %s differs from the buffer's format %s", FormatName(p->bufferFmt),
                FormatName(surface.format));
  if (surface.width < s->width || surface.height < s->height)
    return Fail(s, NV_ENC_ERR_INVALID_PARAM, "input surface %ux%u is smaller than the encode size %ux%u", surface.width,
                surface.height, s->width, s->height);

  // Picture type.
  const bool force_idr_flag = (p->encodePicFlags & NV_ENC_PIC_FLAG_FORCEIDR) != 0;
  const std::uint32_t idr_period = s->codec == Codec::kH264 ? s->config.encodeCodecConfig.h264Config.idrPeriod
                                                            : s->config.encodeCodecConfig.hevcConfig.idrPeriod;
  bool idr = s->pictures == 0 || s->force_idr;
  if (s->init.enablePTD) {
    idr = idr || force_idr_flag ||
          (idr_period != 0 && idr_period != NVENC_INFINITE_GOPLENGTH && s->since_idr >= idr_period);
  } else {
    switch (p->pictureType) {
      case NV_ENC_PIC_TYPE_IDR: idr = true; break;
      case NV_ENC_PIC_TYPE_I: case NV_ENC_PIC_TYPE_P: break;
      default:
        return Fail(s, NV_ENC_ERR_UNSUPPORTED_PARAM, "pictureType %d: the fake codes IDR, I and P only",
                    static_cast<int>(p->pictureType));
    }
  }
  const bool intra_only = s->config.frameIntervalP == 0 || (!s->init.enablePTD && p->pictureType == NV_ENC_PIC_TYPE_I);
  const NV_ENC_PIC_TYPE type = idr ? NV_ENC_PIC_TYPE_IDR : intra_only ? NV_ENC_PIC_TYPE_I : NV_ENC_PIC_TYPE_P;

  const bool want_headers = (p->encodePicFlags & NV_ENC_PIC_FLAG_OUTPUT_SPSPPS) != 0;
  std::vector<std::uint8_t> au;
  bool wrote_headers = false;
  if (s->codec == Codec::kH264) {
    const NV_ENC_CONFIG_H264& h = s->config.encodeCodecConfig.h264Config;
    const bool headers = !h.disableSPSPPS && (want_headers || (idr && (s->headers_due || h.repeatSPSPPS)));
    if (h.outputAUD) AppendNal(au, {0x09}, {0x10});  // access_unit_delimiter: primary_pic_type 0, stop bit
    if (headers) {
      H264Stream stream{s->width, s->height, s->init.frameRateNum, s->init.frameRateDen, h.level, h.h264VUIParameters};
      AppendNal(au, {0x67}, H264Sps(stream));  // nal_ref_idc 3, type 7
      AppendNal(au, {0x68}, H264Pps());        // nal_ref_idc 3, type 8
      wrote_headers = true;
    }
    const std::uint32_t frame_num = idr ? 0 : (s->frame_num + 1) & 15;
    const I420 pic = ToI420(surface, static_cast<int>(s->width), static_cast<int>(s->height));
    AppendNal(au, {static_cast<std::uint8_t>(idr ? 0x65 : 0x61)}, H264Slice(pic, idr, frame_num, s->idr_pic_id));
    s->frame_num = frame_num;
  } else {
    // HEVC marker (not decodable): see the top of this file.
    const std::uint64_t n = s->pictures;
    const std::vector<std::uint8_t> payload = {static_cast<std::uint8_t>(n >> 24), static_cast<std::uint8_t>(n >> 16),
                                               static_cast<std::uint8_t>(n >> 8), static_cast<std::uint8_t>(n), 0x80};
    AppendNal(au, {static_cast<std::uint8_t>((idr ? 19 : 1) << 1), 0x01}, payload);
  }
  if (idr) {
    s->idr_pic_id = (s->idr_pic_id + 1) & 0xffff;
    s->since_idr = 0;
    s->force_idr = false;
    s->headers_due = false;
  }
  ++s->since_idr;

  out->data = std::move(au);
  out->ready = true;
  out->picture_type = type;
  out->timestamp = p->inputTimeStamp;
  out->duration = p->inputDuration;
  out->frame_idx = p->frameIdx;
  JsonLine("encode")
      .Num("frameIndex", s->pictures)
      .Num("frameIdx", p->frameIdx)
      .Str("input", input_kind)
      .Str("bufferFormat", FormatName(surface.format))
      .Bool("forceIdr", force_idr_flag)
      .Bool("outputSpsPps", want_headers)
      .Bool("wroteSpsPps", wrote_headers)
      .Str("pictureType", type == NV_ENC_PIC_TYPE_IDR ? "idr" : type == NV_ENC_PIC_TYPE_I ? "i" : "p")
      .Num("inputTimeStamp", p->inputTimeStamp)
      .Num("bytes", out->data.size())
      .Write();
  ++s->pictures;
  ++g_pictures;
  return NV_ENC_SUCCESS;
}

NVENCSTATUS LockBitstream(void* encoder, NV_ENC_LOCK_BITSTREAM* p) {
  SESSION_OR_RETURN(encoder);
  if (!p) return Fail(s, NV_ENC_ERR_INVALID_PTR, "lockBitstreamBufferParams is null");
  if (p->version != NV_ENC_LOCK_BITSTREAM_VER) return Fail(s, NV_ENC_ERR_INVALID_VERSION, "NV_ENC_LOCK_BITSTREAM version");
  Bitstream* b = Lookup(s->bitstreams, p->outputBitstream);
  if (!b) return Fail(s, NV_ENC_ERR_INVALID_PARAM, "outputBitstream is not a bitstream buffer of this session");
  if (b->locked) return Fail(s, NV_ENC_ERR_LOCK_BUSY, "bitstream buffer is already locked");
  if (!b->ready) {
    if (p->doNotWait) return Fail(s, NV_ENC_ERR_LOCK_BUSY, "no encoded picture in this bitstream buffer yet");
    return Fail(s, NV_ENC_ERR_INVALID_CALL, "no picture was encoded into this bitstream buffer (a real driver would wait)");
  }
  b->locked = true;
  p->bitstreamBufferPtr = b->data.data();
  p->bitstreamSizeInBytes = static_cast<std::uint32_t>(b->data.size());
  p->frameIdx = b->frame_idx;
  p->hwEncodeStatus = 0;
  p->numSlices = 1;
  if (p->sliceOffsets) p->sliceOffsets[0] = 0;
  p->outputTimeStamp = b->timestamp;
  p->outputDuration = b->duration;
  p->pictureType = b->picture_type;
  p->pictureStruct = NV_ENC_PIC_STRUCT_FRAME;
  p->frameAvgQP = 0;
  p->frameSatd = 0;
  p->ltrFrame = 0;
  p->ltrFrameIdx = 0;
  p->ltrFrameBitmap = 0;
  p->temporalId = 0;
  p->intraMBCount = ((s->width + 15) / 16) * ((s->height + 15) / 16);
  p->interMBCount = 0;
  p->averageMVX = 0;
  p->averageMVY = 0;
  p->alphaLayerSizeInBytes = 0;
  return NV_ENC_SUCCESS;
}

NVENCSTATUS UnlockBitstream(void* encoder, NV_ENC_OUTPUT_PTR handle) {
  SESSION_OR_RETURN(encoder);
  Bitstream* b = Lookup(s->bitstreams, handle);
  if (!b) return Fail(s, NV_ENC_ERR_INVALID_PARAM, "not a bitstream buffer of this session");
  if (!b->locked) return Fail(s, NV_ENC_ERR_INVALID_CALL, "bitstream buffer is not locked");
  b->locked = false;
  b->ready = false;
  return NV_ENC_SUCCESS;
}

// SPS + PPS (Annex B, with start codes) of the current H.264 stream.
NVENCSTATUS GetSequenceParams(void* encoder, NV_ENC_SEQUENCE_PARAM_PAYLOAD* p) {
  SESSION_OR_RETURN(encoder);
  if (!p) return Fail(s, NV_ENC_ERR_INVALID_PTR, "sequenceParamPayload is null");
  if (p->version != NV_ENC_SEQUENCE_PARAM_PAYLOAD_VER)
    return Fail(s, NV_ENC_ERR_INVALID_VERSION, "NV_ENC_SEQUENCE_PARAM_PAYLOAD version");
  if (!s->initialized) return Fail(s, NV_ENC_ERR_ENCODER_NOT_INITIALIZED, "sequence params before nvEncInitializeEncoder");
  if (s->codec != Codec::kH264) return Fail(s, NV_ENC_ERR_UNIMPLEMENTED, "the fake HEVC stream has no parameter sets");
  if (!p->spsppsBuffer || !p->outSPSPPSPayloadSize) return Fail(s, NV_ENC_ERR_INVALID_PTR, "spsppsBuffer or outSPSPPSPayloadSize is null");
  const NV_ENC_CONFIG_H264& h = s->config.encodeCodecConfig.h264Config;
  std::vector<std::uint8_t> bytes;
  AppendNal(bytes, {0x67}, H264Sps({s->width, s->height, s->init.frameRateNum, s->init.frameRateDen, h.level, h.h264VUIParameters}));
  AppendNal(bytes, {0x68}, H264Pps());
  if (bytes.size() > p->inBufferSize) return Fail(s, NV_ENC_ERR_NOT_ENOUGH_BUFFER, "inBufferSize %u < %zu", p->inBufferSize, bytes.size());
  std::memcpy(p->spsppsBuffer, bytes.data(), bytes.size());
  *p->outSPSPPSPayloadSize = static_cast<std::uint32_t>(bytes.size());
  return NV_ENC_SUCCESS;
}

NVENCSTATUS SetIOCudaStreams(void* encoder, NV_ENC_CUSTREAM_PTR, NV_ENC_CUSTREAM_PTR) {
  SESSION_OR_RETURN(encoder);
  (void)s;
  return NV_ENC_SUCCESS;  // everything is synchronous here
}

NVENCSTATUS InvalidateRefFrames(void* encoder, std::uint64_t) {
  SESSION_OR_RETURN(encoder);
  (void)s;
  return NV_ENC_SUCCESS;  // every picture is intra: nothing refers to anything
}

NVENCSTATUS DestroyEncoder(void* encoder) {
  std::lock_guard<std::mutex> lock(g_mutex);
  Session* s = Find(encoder);
  if (!s) return encoder ? NV_ENC_ERR_INVALID_ENCODERDEVICE : NV_ENC_ERR_INVALID_PTR;
  // What the caller did not free (the driver frees it; tests may want to know).
  JsonLine("destroy")
      .Num("pictures", s->pictures)
      .Num("leakedInputBuffers", s->inputs.size())
      .Num("leakedBitstreamBuffers", s->bitstreams.size())
      .Num("leakedRegistrations", s->registrations.size())
      .Num("leakedMappings", s->mappings.size())
      .Write();
  g_sessions.erase(s);
  delete s;
  return NV_ENC_SUCCESS;
}

const char* GetLastErrorString(void* encoder) {
  std::lock_guard<std::mutex> lock(g_mutex);
  Session* s = Find(encoder);
  if (!s) return "fake NVENC: invalid encoder handle";
  return s->last_error.c_str();
}

// NV_ENC_ERR_UNIMPLEMENTED with the signature of the function-list entry F.
template <typename F>
struct Unimplemented;
template <typename... A>
struct Unimplemented<NVENCSTATUS (*)(A...)> {
  static NVENCSTATUS Call(A...) { return NV_ENC_ERR_UNIMPLEMENTED; }
};

}  // namespace

extern "C" {

__attribute__((visibility("default"))) NVENCSTATUS NvEncodeAPIGetMaxSupportedVersion(uint32_t* version) {
  if (!version) return NV_ENC_ERR_INVALID_PTR;
  *version = (NVENCAPI_MAJOR_VERSION << 4) | NVENCAPI_MINOR_VERSION;
  return NV_ENC_SUCCESS;
}

__attribute__((visibility("default"))) NVENCSTATUS NvEncodeAPICreateInstance(NV_ENCODE_API_FUNCTION_LIST* f) {
  if (!f) return NV_ENC_ERR_INVALID_PTR;
  if (f->version != NV_ENCODE_API_FUNCTION_LIST_VER) return NV_ENC_ERR_INVALID_VERSION;
  f->nvEncOpenEncodeSession = &Unimplemented<PNVENCOPENENCODESESSION>::Call;
  f->nvEncGetEncodeGUIDCount = &GetEncodeGUIDCount;
  f->nvEncGetEncodeProfileGUIDCount = &GetEncodeProfileGUIDCount;
  f->nvEncGetEncodeProfileGUIDs = &GetEncodeProfileGUIDs;
  f->nvEncGetEncodeGUIDs = &GetEncodeGUIDs;
  f->nvEncGetInputFormatCount = &GetInputFormatCount;
  f->nvEncGetInputFormats = &GetInputFormats;
  f->nvEncGetEncodeCaps = &GetEncodeCaps;
  f->nvEncGetEncodePresetCount = &GetEncodePresetCount;
  f->nvEncGetEncodePresetGUIDs = &GetEncodePresetGUIDs;
  f->nvEncGetEncodePresetConfig = &Unimplemented<PNVENCGETENCODEPRESETCONFIG>::Call;
  f->nvEncInitializeEncoder = &InitializeEncoder;
  f->nvEncCreateInputBuffer = &CreateInputBuffer;
  f->nvEncDestroyInputBuffer = &DestroyInputBuffer;
  f->nvEncCreateBitstreamBuffer = &CreateBitstreamBuffer;
  f->nvEncDestroyBitstreamBuffer = &DestroyBitstreamBuffer;
  f->nvEncEncodePicture = &EncodePicture;
  f->nvEncLockBitstream = &LockBitstream;
  f->nvEncUnlockBitstream = &UnlockBitstream;
  f->nvEncLockInputBuffer = &LockInputBuffer;
  f->nvEncUnlockInputBuffer = &UnlockInputBuffer;
  f->nvEncGetEncodeStats = &Unimplemented<PNVENCGETENCODESTATS>::Call;
  f->nvEncGetSequenceParams = &GetSequenceParams;
  f->nvEncRegisterAsyncEvent = &Unimplemented<PNVENCREGISTERASYNCEVENT>::Call;
  f->nvEncUnregisterAsyncEvent = &Unimplemented<PNVENCUNREGISTERASYNCEVENT>::Call;
  f->nvEncMapInputResource = &MapInputResource;
  f->nvEncUnmapInputResource = &UnmapInputResource;
  f->nvEncDestroyEncoder = &DestroyEncoder;
  f->nvEncInvalidateRefFrames = &InvalidateRefFrames;
  f->nvEncOpenEncodeSessionEx = &OpenEncodeSessionEx;
  f->nvEncRegisterResource = &RegisterResource;
  f->nvEncUnregisterResource = &UnregisterResource;
  f->nvEncReconfigureEncoder = &ReconfigureEncoder;
  f->nvEncCreateMVBuffer = &Unimplemented<PNVENCCREATEMVBUFFER>::Call;
  f->nvEncDestroyMVBuffer = &Unimplemented<PNVENCDESTROYMVBUFFER>::Call;
  f->nvEncRunMotionEstimationOnly = &Unimplemented<PNVENCRUNMOTIONESTIMATIONONLY>::Call;
  f->nvEncGetLastErrorString = &GetLastErrorString;
  f->nvEncSetIOCudaStreams = &SetIOCudaStreams;
  f->nvEncGetEncodePresetConfigEx = &GetEncodePresetConfigEx;
  f->nvEncGetSequenceParamEx = &Unimplemented<PNVENCGETSEQUENCEPARAMEX>::Call;
  return NV_ENC_SUCCESS;
}

}  // extern "C"
