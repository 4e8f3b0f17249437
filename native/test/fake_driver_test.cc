// Tests of the fake NVIDIA driver pair (native/test/fake-driver/: a TEST DOUBLE for machines with
// no GPU). Usage: fake_driver_test <path to fake libcuda.so.1> <path to fake libnvidia-encode.so.1>
// (CTest passes both; see CMakeLists.txt). Exit status 0 = pass.
//
// Loads both libraries with dlopen, as the encoder does, and checks: the CUDA calls (errors
// before cuInit, env-driven device count and init failure, pitched allocations, 2-D copies
// host↔device and device↔device, pointer attributes, leaks); the NVENC session calls and modes;
// H.264 output at 64x48 and 50x30 (cropping) from host NV12 buffers, CUDA NV12 surfaces and host
// ARGB buffers: NAL unit types, SPS fields, picture types, and the pictures themselves, read
// back by a small I_PCM parser (exact for YUV input, ±2 of a float BT.601 reference for RGB);
// the HEVC marker; the JSON log. When an `ffmpeg` binary is on PATH the H.264 streams are also
// decoded by it and compared the same way (skipped with a note otherwise).
#include <dlfcn.h>
#include <dynlink_cuda.h>
#include <nvEncodeAPI.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

int failures = 0;

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      ++failures;                                                                \
      std::fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);       \
    }                                                                            \
  } while (0)

#define CHECK_EQ(a, b)                                                                                     \
  do {                                                                                                     \
    const long long va_ = static_cast<long long>(a), vb_ = static_cast<long long>(b);                      \
    if (va_ != vb_) {                                                                                      \
      ++failures;                                                                                          \
      std::fprintf(stderr, "FAIL %s:%d: %s == %s (%lld vs %lld)\n", __FILE__, __LINE__, #a, #b, va_, vb_); \
    }                                                                                                      \
  } while (0)

// ---------------------------------------------------------------------------------------------
// The CUDA entry points, from the fake library.

struct Cuda {
  tcuInit* Init;
  tcuDeviceGetCount* DeviceGetCount;
  tcuDeviceGet* DeviceGet;
  tcuDeviceGetName* DeviceGetName;
  tcuDevicePrimaryCtxRetain* PrimaryCtxRetain;
  tcuDevicePrimaryCtxRelease* PrimaryCtxRelease;
  tcuCtxPushCurrent_v2* CtxPush;
  tcuCtxPopCurrent_v2* CtxPop;
  tcuMemAlloc_v2* MemAlloc;
  tcuMemAllocPitch_v2* MemAllocPitch;
  tcuMemFree_v2* MemFree;
  tcuMemcpyHtoD_v2* MemcpyHtoD;
  tcuMemcpyDtoH_v2* MemcpyDtoH;
  tcuMemcpy2D_v2* Memcpy2D;
  tcuGetErrorName* GetErrorName;
  tcuGetErrorString* GetErrorString;
  CUresult (*PointerGetAttribute)(void*, int, CUdeviceptr);
  size_t (*LiveAllocations)();
};

template <typename T>
void Sym(void* lib, const char* name, T*& out) {
  out = reinterpret_cast<T*>(dlsym(lib, name));
  if (!out) {
    std::fprintf(stderr, "FAIL: symbol %s missing\n", name);
    std::exit(1);
  }
}

Cuda LoadCuda(void* lib) {
  Cuda c{};
  Sym(lib, "cuInit", c.Init);
  Sym(lib, "cuDeviceGetCount", c.DeviceGetCount);
  Sym(lib, "cuDeviceGet", c.DeviceGet);
  Sym(lib, "cuDeviceGetName", c.DeviceGetName);
  Sym(lib, "cuDevicePrimaryCtxRetain", c.PrimaryCtxRetain);
  Sym(lib, "cuDevicePrimaryCtxRelease", c.PrimaryCtxRelease);
  Sym(lib, "cuCtxPushCurrent_v2", c.CtxPush);
  Sym(lib, "cuCtxPopCurrent_v2", c.CtxPop);
  Sym(lib, "cuMemAlloc_v2", c.MemAlloc);
  Sym(lib, "cuMemAllocPitch_v2", c.MemAllocPitch);
  Sym(lib, "cuMemFree_v2", c.MemFree);
  Sym(lib, "cuMemcpyHtoD_v2", c.MemcpyHtoD);
  Sym(lib, "cuMemcpyDtoH_v2", c.MemcpyDtoH);
  Sym(lib, "cuMemcpy2D_v2", c.Memcpy2D);
  Sym(lib, "cuGetErrorName", c.GetErrorName);
  Sym(lib, "cuGetErrorString", c.GetErrorString);
  c.PointerGetAttribute = reinterpret_cast<CUresult (*)(void*, int, CUdeviceptr)>(dlsym(lib, "cuPointerGetAttribute"));
  c.LiveAllocations = reinterpret_cast<size_t (*)()>(dlsym(lib, "arclight_fake_cuda_live_allocations"));
  if (!c.PointerGetAttribute || !c.LiveAllocations) {
    std::fprintf(stderr, "FAIL: cuPointerGetAttribute / arclight_fake_cuda_live_allocations missing\n");
    std::exit(1);
  }
  return c;
}

CUcontext TestCuda(const Cuda& cu) {
  int n = -1;
  // Before cuInit.
  CHECK_EQ(cu.DeviceGetCount(&n), 3);
  // Init failure by environment, then success.
  setenv("ARCLIGHT_FAKE_CUDA_INIT", "fail", 1);
  CHECK_EQ(cu.Init(0), 100);
  CHECK_EQ(cu.DeviceGetCount(&n), 3);
  unsetenv("ARCLIGHT_FAKE_CUDA_INIT");
  CHECK_EQ(cu.Init(0), 0);
  setenv("ARCLIGHT_FAKE_CUDA_DEVICES", "0", 1);
  CHECK_EQ(cu.DeviceGetCount(&n), 0);
  CHECK_EQ(n, 0);
  setenv("ARCLIGHT_FAKE_CUDA_DEVICES", "2", 1);
  CHECK_EQ(cu.DeviceGetCount(&n), 0);
  CHECK_EQ(n, 2);
  unsetenv("ARCLIGHT_FAKE_CUDA_DEVICES");
  CHECK_EQ(cu.DeviceGetCount(&n), 0);
  CHECK_EQ(n, 1);
  CUdevice dev = -1;
  CHECK_EQ(cu.DeviceGet(&dev, 1), 101);
  CHECK_EQ(cu.DeviceGet(&dev, 0), 0);
  char name[64] = {};
  CHECK_EQ(cu.DeviceGetName(name, sizeof name, dev), 0);
  CHECK(std::string(name) == "Arclight fake GPU (test double)");
  const char* text = nullptr;
  CHECK_EQ(cu.GetErrorName(static_cast<CUresult>(100), &text), 0);
  CHECK(text && std::string(text) == "CUDA_ERROR_NO_DEVICE");
  CHECK_EQ(cu.GetErrorString(static_cast<CUresult>(1), &text), 0);
  CHECK(text && std::string(text) == "invalid argument");

  CUdeviceptr d = 0;
  CHECK_EQ(cu.MemAlloc(&d, 100), 201);  // no current context
  CUcontext ctx = nullptr;
  CHECK_EQ(cu.PrimaryCtxRetain(&ctx, dev), 0);
  CHECK(ctx != nullptr);
  CHECK_EQ(cu.CtxPush(ctx), 0);

  // Pitched allocation, 2-D copies host → device → device → host.
  const size_t w = 37, h = 5;
  size_t pitch = 0;
  CUdeviceptr a = 0, b = 0;
  CHECK_EQ(cu.MemAllocPitch(&a, &pitch, w, h, 4), 0);
  CHECK_EQ(pitch, 512);
  CHECK_EQ(cu.MemAlloc(&b, 1000), 0);
  std::vector<uint8_t> src(50 * h), back(w * h, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = src.data();
  c.srcPitch = 50;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = a;
  c.dstPitch = pitch;
  c.WidthInBytes = w;
  c.Height = h;
  CHECK_EQ(cu.Memcpy2D(&c), 0);
  CUDA_MEMCPY2D dd{};
  dd.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  dd.srcDevice = a;
  dd.srcPitch = pitch;
  dd.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  dd.dstDevice = b;
  dd.dstPitch = 40;
  dd.dstXInBytes = 2;
  dd.dstY = 1;
  dd.WidthInBytes = w;
  dd.Height = h;
  CHECK_EQ(cu.Memcpy2D(&dd), 0);
  CUDA_MEMCPY2D dh{};
  dh.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  dh.srcDevice = b;
  dh.srcPitch = 40;
  dh.srcXInBytes = 2;
  dh.srcY = 1;
  dh.dstMemoryType = CU_MEMORYTYPE_HOST;
  dh.dstHost = back.data();
  dh.dstPitch = w;
  dh.WidthInBytes = w;
  dh.Height = h;
  CHECK_EQ(cu.Memcpy2D(&dh), 0);
  bool same = true;
  for (size_t y = 0; y < h; ++y)
    for (size_t x = 0; x < w; ++x) same = same && back[y * w + x] == src[y * 50 + x];
  CHECK(same);
  // Out of bounds: 6 rows of pitch 200 do not fit in 1000 bytes.
  CUDA_MEMCPY2D oob = c;
  oob.dstDevice = b;
  oob.dstPitch = 200;
  oob.Height = 6;
  oob.srcPitch = 50;
  std::vector<uint8_t> big(50 * 6);
  oob.srcHost = big.data();
  CHECK_EQ(cu.Memcpy2D(&oob), 1);
  // A host pointer where a device pointer belongs.
  CHECK_EQ(cu.MemcpyHtoD(static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(big.data())), src.data(), 10), 1);
  CHECK_EQ(cu.MemcpyHtoD(b + 990, src.data(), 10), 0);
  CHECK_EQ(cu.MemcpyHtoD(b + 991, src.data(), 10), 1);
  uint8_t tail[10];
  CHECK_EQ(cu.MemcpyDtoH(tail, b + 990, 10), 0);
  CHECK(std::memcmp(tail, src.data(), 10) == 0);

  // Pointer attributes, anywhere inside an allocation.
  CUdeviceptr start = 0;
  size_t size = 0;
  int ordinal = -1;
  unsigned int type = 0;
  CHECK_EQ(cu.PointerGetAttribute(&start, 11, b + 123), 0);
  CHECK(start == b);
  CHECK_EQ(cu.PointerGetAttribute(&size, 12, b + 123), 0);
  CHECK_EQ(size, 1000);
  CHECK_EQ(cu.PointerGetAttribute(&ordinal, 9, b + 999), 0);
  CHECK_EQ(ordinal, 0);
  CHECK_EQ(cu.PointerGetAttribute(&type, 2, a), 0);
  CHECK_EQ(type, CU_MEMORYTYPE_DEVICE);
  CHECK_EQ(cu.PointerGetAttribute(&size, 12, b + 1000), 1);
  CHECK_EQ(cu.PointerGetAttribute(&size, 12, static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(big.data()))), 1);

  CHECK_EQ(cu.LiveAllocations(), 2);
  CHECK_EQ(cu.MemFree(b + 1), 1);
  CHECK_EQ(cu.MemFree(a), 0);
  CHECK_EQ(cu.MemFree(b), 0);
  CHECK_EQ(cu.MemFree(b), 1);
  CHECK_EQ(cu.LiveAllocations(), 0);
  CUcontext popped = nullptr;
  CHECK_EQ(cu.CtxPop(&popped), 0);
  CHECK(popped == ctx);
  CHECK_EQ(cu.CtxPop(&popped), 201);
  return ctx;  // still retained
}

// ---------------------------------------------------------------------------------------------
// A reader for what the fake writes: Annex-B NAL units, and I_PCM H.264 pictures.

std::vector<std::vector<uint8_t>> SplitNals(const uint8_t* p, size_t n) {
  std::vector<std::vector<uint8_t>> nals;
  std::vector<size_t> starts;  // first byte after each start code
  for (size_t i = 0; i + 2 < n; ++i)
    if (p[i] == 0 && p[i + 1] == 0 && p[i + 2] == 1) {
      starts.push_back(i + 3);
      i += 2;
    }
  for (size_t k = 0; k < starts.size(); ++k) {
    size_t end = k + 1 < starts.size() ? starts[k + 1] - 3 : n;
    while (end > starts[k] && p[end - 1] == 0) --end;  // zero_byte of the next start code
    std::vector<uint8_t> rbsp;  // header + payload without emulation-prevention bytes
    int zeros = 0;
    for (size_t i = starts[k]; i < end; ++i) {
      if (zeros >= 2 && p[i] == 3) {
        zeros = 0;
        continue;
      }
      rbsp.push_back(p[i]);
      zeros = p[i] == 0 ? zeros + 1 : 0;
    }
    nals.push_back(std::move(rbsp));
  }
  return nals;
}

class BitReader {
 public:
  BitReader(const std::vector<uint8_t>& d, size_t byte) : d_(d), pos_(byte * 8) {}
  uint32_t U(int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
      const size_t byte = pos_ / 8;
      const int bit = byte < d_.size() ? (d_[byte] >> (7 - pos_ % 8)) & 1 : 0;
      if (byte >= d_.size()) overrun_ = true;
      v = (v << 1) | static_cast<uint32_t>(bit);
      ++pos_;
    }
    return v;
  }
  uint32_t Ue() {
    int zeros = 0;
    while (U(1) == 0 && zeros < 32) ++zeros;
    return (zeros ? U(zeros) : 0) + (1u << zeros) - 1;
  }
  int32_t Se() {
    const uint32_t k = Ue();
    return k & 1 ? static_cast<int32_t>((k + 1) / 2) : -static_cast<int32_t>(k / 2);
  }
  void Align() {
    while (pos_ % 8) U(1);
  }
  bool overrun() const { return overrun_; }
  // Only rbsp_trailing_bits left: a 1 then zeros to the end.
  bool AtTrailingBits() {
    if (U(1) != 1) return false;
    while (pos_ % 8)
      if (U(1) != 0) return false;
    return pos_ / 8 == d_.size();
  }

 private:
  const std::vector<uint8_t>& d_;
  size_t pos_;
  bool overrun_ = false;
};

struct Sps {
  int profile = 0, constraints = 0, level = 0;
  int poc_type = -1, log2_max_frame_num = 0, max_refs = 0;
  int w_mbs = 0, h_mbs = 0;
  int crop_left = 0, crop_right = 0, crop_top = 0, crop_bottom = 0;
  bool ok = false;
};

Sps ParseSps(const std::vector<uint8_t>& nal) {
  Sps s;
  BitReader b(nal, 1);
  s.profile = static_cast<int>(b.U(8));
  s.constraints = static_cast<int>(b.U(8));
  s.level = static_cast<int>(b.U(8));
  b.Ue();  // sps id
  s.log2_max_frame_num = static_cast<int>(b.Ue()) + 4;
  s.poc_type = static_cast<int>(b.Ue());
  s.max_refs = static_cast<int>(b.Ue());
  b.U(1);
  s.w_mbs = static_cast<int>(b.Ue()) + 1;
  s.h_mbs = static_cast<int>(b.Ue()) + 1;
  const bool frame_mbs_only = b.U(1);
  b.U(1);
  if (b.U(1)) {
    s.crop_left = static_cast<int>(b.Ue());
    s.crop_right = static_cast<int>(b.Ue());
    s.crop_top = static_cast<int>(b.Ue());
    s.crop_bottom = static_cast<int>(b.Ue());
  }
  const bool vui = b.U(1);
  s.ok = frame_mbs_only && !vui && b.AtTrailingBits() && !b.overrun();
  return s;
}

struct I420 {
  int w = 0, h = 0;
  std::vector<uint8_t> y, u, v;
};

// Parses an I_PCM slice (the fake's layout) into a cropped I420 picture; reports header fields.
bool ParseSlice(const std::vector<uint8_t>& nal, const Sps& sps, I420& out, int& frame_num) {
  const int type = nal[0] & 31;
  BitReader b(nal, 1);
  if (b.Ue() != 0 || b.Ue() != 7 || b.Ue() != 0) return false;
  frame_num = static_cast<int>(b.U(sps.log2_max_frame_num));
  if (type == 5) {
    b.Ue();        // idr_pic_id
    b.U(2);        // no_output_of_prior_pics_flag, long_term_reference_flag
  } else {
    if (b.U(1) != 0) return false;  // adaptive_ref_pic_marking_mode_flag
  }
  if (b.Se() != 0) return false;    // slice_qp_delta
  if (b.Ue() != 1) return false;    // disable_deblocking_filter_idc
  const int fw = sps.w_mbs * 16, fh = sps.h_mbs * 16;
  std::vector<uint8_t> y(static_cast<size_t>(fw) * fh), u(static_cast<size_t>(fw / 2) * (fh / 2)), v(u.size());
  for (int my = 0; my < sps.h_mbs; ++my)
    for (int mx = 0; mx < sps.w_mbs; ++mx) {
      if (b.Ue() != 25) return false;
      b.Align();
      for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) y[static_cast<size_t>(my * 16 + r) * fw + mx * 16 + c] = static_cast<uint8_t>(b.U(8));
      for (std::vector<uint8_t>* plane : {&u, &v})
        for (int r = 0; r < 8; ++r)
          for (int c = 0; c < 8; ++c)
            (*plane)[static_cast<size_t>(my * 8 + r) * (fw / 2) + mx * 8 + c] = static_cast<uint8_t>(b.U(8));
    }
  if (!b.AtTrailingBits() || b.overrun()) return false;
  out.w = fw - 2 * (sps.crop_left + sps.crop_right);
  out.h = fh - 2 * (sps.crop_top + sps.crop_bottom);
  out.y.clear();
  out.u.clear();
  out.v.clear();
  for (int r = 0; r < out.h; ++r) out.y.insert(out.y.end(), &y[static_cast<size_t>(r) * fw], &y[static_cast<size_t>(r) * fw] + out.w);
  for (int r = 0; r < out.h / 2; ++r) {
    out.u.insert(out.u.end(), &u[static_cast<size_t>(r) * (fw / 2)], &u[static_cast<size_t>(r) * (fw / 2)] + out.w / 2);
    out.v.insert(out.v.end(), &v[static_cast<size_t>(r) * (fw / 2)], &v[static_cast<size_t>(r) * (fw / 2)] + out.w / 2);
  }
  return true;
}

// Largest absolute difference between two I420 pictures (999 when the sizes differ).
int MaxDiff(const I420& a, const I420& b) {
  if (a.w != b.w || a.h != b.h || a.y.size() != b.y.size() || a.u.size() != b.u.size()) return 999;
  int m = 0;
  for (size_t i = 0; i < a.y.size(); ++i) m = std::max(m, std::abs(a.y[i] - b.y[i]));
  for (size_t i = 0; i < a.u.size(); ++i) m = std::max(m, std::max(std::abs(a.u[i] - b.u[i]), std::abs(a.v[i] - b.v[i])));
  return m;
}

// ---------------------------------------------------------------------------------------------
// Test pictures.

// A YUV gradient that moves with `t`, covering 16..235 / 16..240.
I420 YuvPicture(int w, int h, int t) {
  I420 p;
  p.w = w;
  p.h = h;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) p.y.push_back(static_cast<uint8_t>(16 + (x * 219 / std::max(1, w - 1) + y * 3 + t * 11) % 220));
  for (int y = 0; y < h / 2; ++y)
    for (int x = 0; x < w / 2; ++x) {
      p.u.push_back(static_cast<uint8_t>(16 + (x * 9 + t * 5) % 225));
      p.v.push_back(static_cast<uint8_t>(16 + (y * 13 + x + t * 7) % 225));
    }
  return p;
}

// RGB gradient (R along x, G along y, B diagonal), bytes in memory R, G, B.
void RgbPixel(int x, int y, int w, int h, int& r, int& g, int& b) {
  r = x * 255 / std::max(1, w - 1);
  g = y * 255 / std::max(1, h - 1);
  b = (x + y) * 255 / std::max(1, w + h - 2);
}

// Float BT.601 limited-range reference of the RGB gradient (chroma from 2x2 averages).
I420 RgbReference(int w, int h) {
  I420 p;
  p.w = w;
  p.h = h;
  auto round = [](double v) { return static_cast<uint8_t>(std::clamp(std::floor(v + 0.5), 0.0, 255.0)); };
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      int r, g, b;
      RgbPixel(x, y, w, h, r, g, b);
      p.y.push_back(round(16 + (65.481 * r + 128.553 * g + 24.966 * b) / 255));
    }
  for (int y = 0; y < h / 2; ++y)
    for (int x = 0; x < w / 2; ++x) {
      double r = 0, g = 0, b = 0;
      for (int dy = 0; dy < 2; ++dy)
        for (int dx = 0; dx < 2; ++dx) {
          int rr, gg, bb;
          RgbPixel(2 * x + dx, 2 * y + dy, w, h, rr, gg, bb);
          r += rr / 4.0;
          g += gg / 4.0;
          b += bb / 4.0;
        }
      p.u.push_back(round(128 + (-37.797 * r - 74.203 * g + 112.0 * b) / 255));
      p.v.push_back(round(128 + (112.0 * r - 93.786 * g - 18.214 * b) / 255));
    }
  return p;
}

// Writes an I420 picture as NV12 at `pitch`, chroma after `rows` luma rows.
void WriteNv12(const I420& p, uint8_t* base, size_t pitch, int rows) {
  for (int y = 0; y < p.h; ++y) std::memcpy(base + y * pitch, &p.y[static_cast<size_t>(y) * p.w], p.w);
  uint8_t* uv = base + pitch * rows;
  for (int y = 0; y < p.h / 2; ++y)
    for (int x = 0; x < p.w / 2; ++x) {
      uv[y * pitch + 2 * x] = p.u[static_cast<size_t>(y) * (p.w / 2) + x];
      uv[y * pitch + 2 * x + 1] = p.v[static_cast<size_t>(y) * (p.w / 2) + x];
    }
}

// ---------------------------------------------------------------------------------------------
// NVENC.

struct Encoded {
  std::vector<uint8_t> bytes;
  NV_ENC_PIC_TYPE type;
  uint64_t timestamp;
};

struct Harness {
  NV_ENCODE_API_FUNCTION_LIST api{};
  CUcontext ctx = nullptr;
  void* enc = nullptr;
  NV_ENC_CONFIG config{};
  NV_ENC_INITIALIZE_PARAMS init{};

  NVENCSTATUS Open() {
    NV_ENC_OPEN_ENCODE_SESSION_EX_PARAMS p{};
    p.version = NV_ENC_OPEN_ENCODE_SESSION_EX_PARAMS_VER;
    p.deviceType = NV_ENC_DEVICE_TYPE_CUDA;
    p.device = ctx;
    p.apiVersion = NVENCAPI_VERSION;
    return api.nvEncOpenEncodeSessionEx(&p, &enc);
  }

  NVENCSTATUS Init(GUID codec, int w, int h, bool repeat_headers) {
    NV_ENC_PRESET_CONFIG preset{};
    preset.version = NV_ENC_PRESET_CONFIG_VER;
    preset.presetCfg.version = NV_ENC_CONFIG_VER;
    NVENCSTATUS st = api.nvEncGetEncodePresetConfigEx(enc, codec, NV_ENC_PRESET_P4_GUID, NV_ENC_TUNING_INFO_LOW_LATENCY, &preset);
    if (st != NV_ENC_SUCCESS) return st;
    config = preset.presetCfg;
    config.gopLength = NVENC_INFINITE_GOPLENGTH;
    config.frameIntervalP = 1;
    config.rcParams.rateControlMode = NV_ENC_PARAMS_RC_CBR;
    config.rcParams.averageBitRate = 2000000;
    if (std::memcmp(&codec, &NV_ENC_CODEC_H264_GUID, sizeof codec) == 0) {
      config.encodeCodecConfig.h264Config.idrPeriod = NVENC_INFINITE_GOPLENGTH;
      config.encodeCodecConfig.h264Config.repeatSPSPPS = repeat_headers;
    } else {
      config.encodeCodecConfig.hevcConfig.idrPeriod = NVENC_INFINITE_GOPLENGTH;
    }
    init = NV_ENC_INITIALIZE_PARAMS{};
    init.version = NV_ENC_INITIALIZE_PARAMS_VER;
    init.encodeGUID = codec;
    init.presetGUID = NV_ENC_PRESET_P4_GUID;
    init.tuningInfo = NV_ENC_TUNING_INFO_LOW_LATENCY;
    init.encodeWidth = static_cast<uint32_t>(w);
    init.encodeHeight = static_cast<uint32_t>(h);
    init.frameRateNum = 30;
    init.frameRateDen = 1;
    init.enablePTD = 1;
    init.encodeConfig = &config;
    return api.nvEncInitializeEncoder(enc, &init);
  }

  // Encodes one picture from `input` (format fmt) and reads the bitstream back.
  NVENCSTATUS Encode(void* input, NV_ENC_BUFFER_FORMAT fmt, void* bitstream, uint32_t flags, uint64_t ts, Encoded& out) {
    NV_ENC_PIC_PARAMS pic{};
    pic.version = NV_ENC_PIC_PARAMS_VER;
    pic.inputWidth = init.encodeWidth;
    pic.inputHeight = init.encodeHeight;
    pic.inputBuffer = input;
    pic.outputBitstream = bitstream;
    pic.bufferFmt = fmt;
    pic.pictureStruct = NV_ENC_PIC_STRUCT_FRAME;
    pic.encodePicFlags = flags;
    pic.inputTimeStamp = ts;
    pic.frameIdx = static_cast<uint32_t>(ts);
    NVENCSTATUS st = api.nvEncEncodePicture(enc, &pic);
    if (st != NV_ENC_SUCCESS) return st;
    NV_ENC_LOCK_BITSTREAM lock{};
    lock.version = NV_ENC_LOCK_BITSTREAM_VER;
    lock.outputBitstream = bitstream;
    st = api.nvEncLockBitstream(enc, &lock);
    if (st != NV_ENC_SUCCESS) return st;
    const auto* p = static_cast<const uint8_t*>(lock.bitstreamBufferPtr);
    out.bytes.assign(p, p + lock.bitstreamSizeInBytes);
    out.type = lock.pictureType;
    out.timestamp = lock.outputTimeStamp;
    CHECK_EQ(lock.frameIdx, static_cast<uint32_t>(ts));
    return api.nvEncUnlockBitstream(enc, bitstream);
  }

  void* CreateBitstream() {
    NV_ENC_CREATE_BITSTREAM_BUFFER b{};
    b.version = NV_ENC_CREATE_BITSTREAM_BUFFER_VER;
    CHECK_EQ(api.nvEncCreateBitstreamBuffer(enc, &b), 0);
    return b.bitstreamBuffer;
  }
};

std::vector<int> NalTypes(const std::vector<uint8_t>& au) {
  std::vector<int> types;
  for (const auto& nal : SplitNals(au.data(), au.size())) types.push_back(nal.empty() ? -1 : nal[0] & 31);
  return types;
}

// Checks an H.264 access unit and returns its picture (the SPS is remembered across calls).
I420 Decode(const std::vector<uint8_t>& au, Sps& sps, int& frame_num) {
  I420 pic;
  for (const auto& nal : SplitNals(au.data(), au.size())) {
    const int type = nal[0] & 31;
    if (type == 7) sps = ParseSps(nal);
    if (type == 1 || type == 5) CHECK(ParseSlice(nal, sps, pic, frame_num));
  }
  return pic;
}

bool HaveFfmpeg() { return std::system("ffmpeg -version >/dev/null 2>&1") == 0; }

// Decodes an H.264 elementary stream with ffmpeg into I420 frames; empty on failure.
std::vector<I420> FfmpegDecode(const std::vector<uint8_t>& stream, int w, int h, const std::string& dir, const std::string& name) {
  const std::string in = dir + "/" + name + ".h264", out = dir + "/" + name + ".yuv";
  std::ofstream(in, std::ios::binary).write(reinterpret_cast<const char*>(stream.data()), static_cast<std::streamsize>(stream.size()));
  const std::string cmd = "ffmpeg -v error -y -f h264 -i '" + in + "' -f rawvideo -pix_fmt yuv420p '" + out + "'";
  if (std::system(cmd.c_str()) != 0) return {};
  std::ifstream f(out, std::ios::binary);
  std::vector<uint8_t> raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t frame = static_cast<size_t>(w) * h * 3 / 2;
  std::vector<I420> frames;
  for (size_t off = 0; off + frame <= raw.size(); off += frame) {
    I420 p;
    p.w = w;
    p.h = h;
    const size_t ys = static_cast<size_t>(w) * h, cs = ys / 4;
    p.y.assign(raw.begin() + static_cast<long>(off), raw.begin() + static_cast<long>(off + ys));
    p.u.assign(raw.begin() + static_cast<long>(off + ys), raw.begin() + static_cast<long>(off + ys + cs));
    p.v.assign(raw.begin() + static_cast<long>(off + ys + cs), raw.begin() + static_cast<long>(off + ys + 2 * cs));
    frames.push_back(std::move(p));
  }
  return frames;
}

void TestNvenc(void* lib, const Cuda& cu, CUcontext ctx, const std::string& dir, bool ffmpeg) {
  NVENCSTATUS (*get_max)(uint32_t*) = reinterpret_cast<NVENCSTATUS (*)(uint32_t*)>(dlsym(lib, "NvEncodeAPIGetMaxSupportedVersion"));
  NVENCSTATUS (*create)(NV_ENCODE_API_FUNCTION_LIST*) =
      reinterpret_cast<NVENCSTATUS (*)(NV_ENCODE_API_FUNCTION_LIST*)>(dlsym(lib, "NvEncodeAPICreateInstance"));
  if (!get_max || !create) {
    std::fprintf(stderr, "FAIL: NVENC entry points missing\n");
    std::exit(1);
  }
  uint32_t max = 0;
  CHECK_EQ(get_max(&max), 0);
  CHECK_EQ(max, (11u << 4) | 1u);
  Harness hx;
  hx.ctx = ctx;
  hx.api.version = NV_ENCODE_API_FUNCTION_LIST_VER - 1;
  CHECK_EQ(create(&hx.api), NV_ENC_ERR_INVALID_VERSION);
  hx.api.version = NV_ENCODE_API_FUNCTION_LIST_VER;
  CHECK_EQ(create(&hx.api), 0);
  const NV_ENCODE_API_FUNCTION_LIST& api = hx.api;
  CHECK(api.nvEncOpenEncodeSessionEx && api.nvEncEncodePicture && api.nvEncGetLastErrorString && api.nvEncGetEncodeStats);

  const std::string log = dir + "/nvenc.jsonl";
  setenv("ARCLIGHT_FAKE_NVENC_LOG", log.c_str(), 1);

  // Modes and session checks.
  setenv("ARCLIGHT_FAKE_NVENC_MODE", "no-encoder", 1);
  CHECK_EQ(hx.Open(), NV_ENC_ERR_UNSUPPORTED_DEVICE);
  CHECK(hx.enc == nullptr);
  setenv("ARCLIGHT_FAKE_NVENC_MODE", "ok", 1);
  {
    NV_ENC_OPEN_ENCODE_SESSION_EX_PARAMS p{};
    p.version = NV_ENC_OPEN_ENCODE_SESSION_EX_PARAMS_VER;
    p.deviceType = NV_ENC_DEVICE_TYPE_CUDA;
    p.device = ctx;
    p.apiVersion = NVENCAPI_VERSION + 1;
    void* e = nullptr;
    CHECK_EQ(api.nvEncOpenEncodeSessionEx(&p, &e), NV_ENC_ERR_INVALID_VERSION);
    p.apiVersion = NVENCAPI_VERSION;
    p.device = nullptr;
    CHECK(api.nvEncOpenEncodeSessionEx(&p, &e) != NV_ENC_SUCCESS);
  }
  CHECK_EQ(hx.Open(), 0);
  uint32_t count = 0;
  GUID guids[4];
  CHECK_EQ(api.nvEncGetEncodeGUIDCount(hx.enc, &count), 0);
  CHECK_EQ(count, 2);
  CHECK_EQ(api.nvEncGetEncodeGUIDs(hx.enc, guids, 4, &count), 0);
  CHECK_EQ(count, 2);
  CHECK(std::memcmp(&guids[1], &NV_ENC_CODEC_HEVC_GUID, sizeof(GUID)) == 0);
  setenv("ARCLIGHT_FAKE_NVENC_MODE", "no-hevc", 1);
  CHECK_EQ(api.nvEncGetEncodeGUIDs(hx.enc, guids, 4, &count), 0);
  CHECK_EQ(count, 1);
  CHECK(std::memcmp(&guids[0], &NV_ENC_CODEC_H264_GUID, sizeof(GUID)) == 0);
  unsetenv("ARCLIGHT_FAKE_NVENC_MODE");

  // Bad initialisations leave the session usable.
  CHECK_EQ(hx.Init(NV_ENC_CODEC_H264_GUID, 63, 48, true), NV_ENC_ERR_INVALID_PARAM);  // odd width
  CHECK(std::string(api.nvEncGetLastErrorString(hx.enc)).find("odd size") != std::string::npos);
  {
    NV_ENC_PRESET_CONFIG preset{};
    preset.version = NV_ENC_PRESET_CONFIG_VER;
    preset.presetCfg.version = NV_ENC_CONFIG_VER;
    CHECK_EQ(api.nvEncGetEncodePresetConfigEx(hx.enc, NV_ENC_CODEC_H264_GUID, NV_ENC_CODEC_H264_GUID,
                                              NV_ENC_TUNING_INFO_LOW_LATENCY, &preset),
             NV_ENC_ERR_INVALID_PARAM);
    CHECK_EQ(api.nvEncGetEncodePresetConfigEx(hx.enc, NV_ENC_CODEC_H264_GUID, NV_ENC_PRESET_P7_GUID,
                                              NV_ENC_TUNING_INFO_ULTRA_LOW_LATENCY, &preset),
             0);
    CHECK_EQ(preset.presetCfg.frameIntervalP, 1);
    CHECK_EQ(preset.presetCfg.rcParams.rateControlMode, NV_ENC_PARAMS_RC_CBR);
  }

  // --- H.264, 64x48, host NV12, repeatSPSPPS: frames IDR, forced IDR, P.
  CHECK_EQ(hx.Init(NV_ENC_CODEC_H264_GUID, 64, 48, true), 0);
  CHECK_EQ(hx.Init(NV_ENC_CODEC_H264_GUID, 64, 48, true), NV_ENC_ERR_INVALID_CALL);  // twice
  NV_ENC_CREATE_INPUT_BUFFER cib{};
  cib.version = NV_ENC_CREATE_INPUT_BUFFER_VER;
  cib.width = 64;
  cib.height = 48;
  cib.bufferFmt = NV_ENC_BUFFER_FORMAT_NV12;
  CHECK_EQ(api.nvEncCreateInputBuffer(hx.enc, &cib), 0);
  void* bs = hx.CreateBitstream();
  std::vector<uint8_t> stream;  // the whole elementary stream, for ffmpeg
  std::vector<I420> sent;
  Sps sps;
  const uint32_t flags[3] = {0, NV_ENC_PIC_FLAG_FORCEIDR, 0};
  const std::vector<int> expect_nals[3] = {{7, 8, 5}, {7, 8, 5}, {1}};
  const NV_ENC_PIC_TYPE expect_type[3] = {NV_ENC_PIC_TYPE_IDR, NV_ENC_PIC_TYPE_IDR, NV_ENC_PIC_TYPE_P};
  for (int i = 0; i < 3; ++i) {
    NV_ENC_LOCK_INPUT_BUFFER lk{};
    lk.version = NV_ENC_LOCK_INPUT_BUFFER_VER;
    lk.inputBuffer = cib.inputBuffer;
    CHECK_EQ(api.nvEncLockInputBuffer(hx.enc, &lk), 0);
    CHECK_EQ(lk.pitch, 256);
    const I420 pic = YuvPicture(64, 48, i);
    WriteNv12(pic, static_cast<uint8_t*>(lk.bufferDataPtr), lk.pitch, 48);
    if (i == 0) {  // encoding a locked buffer is refused
      Encoded e;
      CHECK_EQ(hx.Encode(cib.inputBuffer, NV_ENC_BUFFER_FORMAT_NV12, bs, 0, 0, e), NV_ENC_ERR_LOCK_BUSY);
    }
    CHECK_EQ(api.nvEncUnlockInputBuffer(hx.enc, cib.inputBuffer), 0);
    Encoded e;
    CHECK_EQ(hx.Encode(cib.inputBuffer, NV_ENC_BUFFER_FORMAT_NV12, bs, flags[i], 1000 + i, e), 0);
    CHECK(NalTypes(e.bytes) == expect_nals[i]);
    CHECK_EQ(e.type, expect_type[i]);
    CHECK_EQ(e.timestamp, 1000 + i);
    int frame_num = -1;
    const I420 got = Decode(e.bytes, sps, frame_num);
    CHECK_EQ(MaxDiff(got, pic), 0);
    CHECK_EQ(frame_num, i == 2 ? 1 : 0);
    stream.insert(stream.end(), e.bytes.begin(), e.bytes.end());
    sent.push_back(pic);
  }
  CHECK(sps.ok);
  CHECK_EQ(sps.profile, 66);
  CHECK_EQ(sps.constraints & 0x40, 0x40);  // constraint_set1_flag
  CHECK_EQ(sps.poc_type, 2);
  CHECK_EQ(sps.log2_max_frame_num, 4);
  CHECK_EQ(sps.max_refs, 1);
  CHECK_EQ(sps.w_mbs, 4);
  CHECK_EQ(sps.h_mbs, 3);
  CHECK_EQ(sps.crop_right + sps.crop_bottom, 0);
  // Bitstream buffers: nothing to lock after unlock; wrong format refused.
  {
    NV_ENC_LOCK_BITSTREAM lock{};
    lock.version = NV_ENC_LOCK_BITSTREAM_VER;
    lock.outputBitstream = bs;
    CHECK(api.nvEncLockBitstream(hx.enc, &lock) != NV_ENC_SUCCESS);
    Encoded e;
    CHECK_EQ(hx.Encode(cib.inputBuffer, NV_ENC_BUFFER_FORMAT_IYUV, bs, 0, 9, e), NV_ENC_ERR_INVALID_PARAM);
  }
  // Reconfigure with forceIDR: the next picture is an IDR (SPS/PPS: repeatSPSPPS).
  {
    NV_ENC_RECONFIGURE_PARAMS rc{};
    rc.version = NV_ENC_RECONFIGURE_PARAMS_VER;
    rc.reInitEncodeParams = hx.init;
    hx.config.rcParams.averageBitRate = 1000000;
    rc.forceIDR = 1;
    CHECK_EQ(api.nvEncReconfigureEncoder(hx.enc, &rc), 0);
    Encoded e;
    CHECK_EQ(hx.Encode(cib.inputBuffer, NV_ENC_BUFFER_FORMAT_NV12, bs, 0, 1003, e), 0);
    CHECK(NalTypes(e.bytes) == (std::vector<int>{7, 8, 5}));
    CHECK_EQ(e.type, NV_ENC_PIC_TYPE_IDR);
    stream.insert(stream.end(), e.bytes.begin(), e.bytes.end());
    sent.push_back(sent.back());
  }
  if (ffmpeg) {
    const std::vector<I420> decoded = FfmpegDecode(stream, 64, 48, dir, "nv12_64x48");
    CHECK_EQ(decoded.size(), sent.size());
    for (size_t i = 0; i < decoded.size() && i < sent.size(); ++i) CHECK_EQ(MaxDiff(decoded[i], sent[i]), 0);
  }
  CHECK_EQ(api.nvEncDestroyInputBuffer(hx.enc, cib.inputBuffer), 0);
  CHECK_EQ(api.nvEncDestroyBitstreamBuffer(hx.enc, bs), 0);
  CHECK_EQ(api.nvEncDestroyEncoder(hx.enc), 0);
  CHECK_EQ(api.nvEncDestroyEncoder(hx.enc), NV_ENC_ERR_INVALID_ENCODERDEVICE);

  // --- H.264, 50x30 (cropping), CUDA NV12 surface, no repeatSPSPPS: the forced IDR has no SPS.
  CHECK_EQ(hx.Open(), 0);
  CHECK_EQ(hx.Init(NV_ENC_CODEC_H264_GUID, 50, 30, false), 0);
  CHECK_EQ(cu.CtxPush(ctx), 0);
  CUdeviceptr surface = 0;
  size_t pitch = 0;
  CHECK_EQ(cu.MemAllocPitch(&surface, &pitch, 50, 30 * 3 / 2, 4), 0);
  NV_ENC_REGISTER_RESOURCE reg{};
  reg.version = NV_ENC_REGISTER_RESOURCE_VER;
  reg.resourceType = NV_ENC_INPUT_RESOURCE_TYPE_CUDADEVICEPTR;
  reg.width = 50;
  reg.height = 30;
  reg.pitch = static_cast<uint32_t>(pitch);
  reg.resourceToRegister = reinterpret_cast<void*>(static_cast<uintptr_t>(surface));
  reg.bufferFormat = NV_ENC_BUFFER_FORMAT_NV12;
  reg.bufferUsage = NV_ENC_INPUT_IMAGE;
  {
    NV_ENC_REGISTER_RESOURCE too_tall = reg;
    too_tall.height = 32;  // the surface holds 45 rows, not 32 * 3/2 = 48
    CHECK_EQ(api.nvEncRegisterResource(hx.enc, &too_tall), NV_ENC_ERR_RESOURCE_REGISTER_FAILED);
  }
  CHECK_EQ(api.nvEncRegisterResource(hx.enc, &reg), 0);
  bs = hx.CreateBitstream();
  stream.clear();
  sent.clear();
  const std::vector<int> expect_cuda_nals[3] = {{7, 8, 5}, {5}, {1}};
  for (int i = 0; i < 3; ++i) {
    const I420 pic = YuvPicture(50, 30, i + 3);
    std::vector<uint8_t> host(pitch * 45);
    WriteNv12(pic, host.data(), pitch, 30);
    CHECK_EQ(cu.MemcpyHtoD(surface, host.data(), host.size()), 0);
    NV_ENC_MAP_INPUT_RESOURCE map{};
    map.version = NV_ENC_MAP_INPUT_RESOURCE_VER;
    map.registeredResource = reg.registeredResource;
    CHECK_EQ(api.nvEncMapInputResource(hx.enc, &map), 0);
    CHECK_EQ(map.mappedBufferFmt, NV_ENC_BUFFER_FORMAT_NV12);
    Encoded e;
    CHECK_EQ(hx.Encode(map.mappedResource, NV_ENC_BUFFER_FORMAT_NV12, bs, flags[i], 2000 + i, e), 0);
    CHECK_EQ(api.nvEncUnmapInputResource(hx.enc, map.mappedResource), 0);
    CHECK(NalTypes(e.bytes) == expect_cuda_nals[i]);
    CHECK_EQ(e.type, expect_type[i]);
    int frame_num = -1;
    CHECK_EQ(MaxDiff(Decode(e.bytes, sps, frame_num), pic), 0);
    stream.insert(stream.end(), e.bytes.begin(), e.bytes.end());
    sent.push_back(pic);
  }
  CHECK_EQ(sps.w_mbs, 4);
  CHECK_EQ(sps.h_mbs, 2);
  CHECK_EQ(sps.crop_right, 7);
  CHECK_EQ(sps.crop_bottom, 1);
  if (ffmpeg) {
    const std::vector<I420> decoded = FfmpegDecode(stream, 50, 30, dir, "cuda_nv12_50x30");
    CHECK_EQ(decoded.size(), sent.size());
    for (size_t i = 0; i < decoded.size() && i < sent.size(); ++i) CHECK_EQ(MaxDiff(decoded[i], sent[i]), 0);
  }
  CHECK_EQ(api.nvEncUnregisterResource(hx.enc, reg.registeredResource), 0);
  CHECK_EQ(cu.MemFree(surface), 0);
  CHECK_EQ(api.nvEncDestroyBitstreamBuffer(hx.enc, bs), 0);
  CHECK_EQ(api.nvEncDestroyEncoder(hx.enc), 0);

  // --- H.264, 64x48, host ARGB (bytes B, G, R, A): ±2 of a float BT.601 reference.
  CHECK_EQ(hx.Open(), 0);
  CHECK_EQ(hx.Init(NV_ENC_CODEC_H264_GUID, 64, 48, true), 0);
  cib = NV_ENC_CREATE_INPUT_BUFFER{};
  cib.version = NV_ENC_CREATE_INPUT_BUFFER_VER;
  cib.width = 64;
  cib.height = 48;
  cib.bufferFmt = NV_ENC_BUFFER_FORMAT_ARGB;
  CHECK_EQ(api.nvEncCreateInputBuffer(hx.enc, &cib), 0);
  {
    NV_ENC_LOCK_INPUT_BUFFER lk{};
    lk.version = NV_ENC_LOCK_INPUT_BUFFER_VER;
    lk.inputBuffer = cib.inputBuffer;
    CHECK_EQ(api.nvEncLockInputBuffer(hx.enc, &lk), 0);
    CHECK_EQ(lk.pitch, 256);  // 64 * 4 bytes
    auto* base = static_cast<uint8_t*>(lk.bufferDataPtr);
    for (int y = 0; y < 48; ++y)
      for (int x = 0; x < 64; ++x) {
        int r, g, b;
        RgbPixel(x, y, 64, 48, r, g, b);
        uint8_t* px = base + y * lk.pitch + x * 4;
        px[0] = static_cast<uint8_t>(b);
        px[1] = static_cast<uint8_t>(g);
        px[2] = static_cast<uint8_t>(r);
        px[3] = 255;
      }
    CHECK_EQ(api.nvEncUnlockInputBuffer(hx.enc, cib.inputBuffer), 0);
  }
  bs = hx.CreateBitstream();
  stream.clear();
  const I420 reference = RgbReference(64, 48);
  for (int i = 0; i < 2; ++i) {
    Encoded e;
    CHECK_EQ(hx.Encode(cib.inputBuffer, NV_ENC_BUFFER_FORMAT_ARGB, bs, 0, 3000 + i, e), 0);
    int frame_num = -1;
    const int diff = MaxDiff(Decode(e.bytes, sps, frame_num), reference);
    CHECK(diff <= 2);
    stream.insert(stream.end(), e.bytes.begin(), e.bytes.end());
  }
  if (ffmpeg) {
    const std::vector<I420> decoded = FfmpegDecode(stream, 64, 48, dir, "argb_64x48");
    CHECK_EQ(decoded.size(), 2);
    for (const I420& d : decoded) CHECK(MaxDiff(d, reference) <= 2);
  }
  // Leaks are reported in the log; the driver frees them.
  CHECK_EQ(api.nvEncDestroyEncoder(hx.enc), 0);

  // --- H.264 options: AUD, VUI, IDR period 2 without repeatSPSPPS, OUTPUT_SPSPPS, a resize by
  // reconfigure (within maxEncodeWidth/Height), nvEncGetSequenceParams, end of stream.
  CHECK_EQ(hx.Open(), 0);
  {
    NV_ENC_PRESET_CONFIG preset{};
    preset.version = NV_ENC_PRESET_CONFIG_VER;
    preset.presetCfg.version = NV_ENC_CONFIG_VER;
    CHECK_EQ(api.nvEncGetEncodePresetConfigEx(hx.enc, NV_ENC_CODEC_H264_GUID, NV_ENC_PRESET_P1_GUID,
                                              NV_ENC_TUNING_INFO_ULTRA_LOW_LATENCY, &preset),
             0);
    hx.config = preset.presetCfg;
    NV_ENC_CONFIG_H264& h264 = hx.config.encodeCodecConfig.h264Config;
    h264.idrPeriod = 2;
    h264.outputAUD = 1;
    h264.repeatSPSPPS = 0;
    h264.h264VUIParameters.videoSignalTypePresentFlag = 1;
    h264.h264VUIParameters.videoFormat = 5;
    h264.h264VUIParameters.colourDescriptionPresentFlag = 1;
    h264.h264VUIParameters.colourPrimaries = 6;
    h264.h264VUIParameters.transferCharacteristics = 6;
    h264.h264VUIParameters.colourMatrix = 6;
    h264.h264VUIParameters.bitstreamRestrictionFlag = 1;
    hx.init = NV_ENC_INITIALIZE_PARAMS{};
    hx.init.version = NV_ENC_INITIALIZE_PARAMS_VER;
    hx.init.encodeGUID = NV_ENC_CODEC_H264_GUID;
    hx.init.presetGUID = NV_ENC_PRESET_P1_GUID;
    hx.init.tuningInfo = NV_ENC_TUNING_INFO_ULTRA_LOW_LATENCY;
    hx.init.encodeWidth = 64;
    hx.init.encodeHeight = 48;
    hx.init.maxEncodeWidth = 128;
    hx.init.maxEncodeHeight = 96;
    hx.init.frameRateNum = 60;
    hx.init.frameRateDen = 1;
    hx.init.enablePTD = 1;
    hx.init.encodeConfig = &hx.config;
    CHECK_EQ(api.nvEncInitializeEncoder(hx.enc, &hx.init), 0);
  }
  cib = NV_ENC_CREATE_INPUT_BUFFER{};
  cib.version = NV_ENC_CREATE_INPUT_BUFFER_VER;
  cib.width = 128;
  cib.height = 96;
  cib.bufferFmt = NV_ENC_BUFFER_FORMAT_NV12;
  CHECK_EQ(api.nvEncCreateInputBuffer(hx.enc, &cib), 0);
  bs = hx.CreateBitstream();
  auto fill = [&](const I420& pic) {
    NV_ENC_LOCK_INPUT_BUFFER lk{};
    lk.version = NV_ENC_LOCK_INPUT_BUFFER_VER;
    lk.inputBuffer = cib.inputBuffer;
    CHECK_EQ(api.nvEncLockInputBuffer(hx.enc, &lk), 0);
    WriteNv12(pic, static_cast<uint8_t*>(lk.bufferDataPtr), lk.pitch, 96);
    CHECK_EQ(api.nvEncUnlockInputBuffer(hx.enc, cib.inputBuffer), 0);
  };
  stream.clear();
  sent.clear();
  const uint32_t option_flags[4] = {0, 0, 0, NV_ENC_PIC_FLAG_OUTPUT_SPSPPS};
  const std::vector<int> option_nals[4] = {{9, 7, 8, 5}, {9, 1}, {9, 5}, {9, 7, 8, 1}};
  std::vector<uint8_t> headers;  // SPS + PPS NAL units as written in the first access unit
  for (int i = 0; i < 4; ++i) {
    const I420 pic = YuvPicture(64, 48, i + 9);
    fill(pic);
    Encoded e;
    CHECK_EQ(hx.Encode(cib.inputBuffer, NV_ENC_BUFFER_FORMAT_NV12, bs, option_flags[i], 4000 + i, e), 0);
    CHECK(NalTypes(e.bytes) == option_nals[i]);
    CHECK_EQ(e.type, i % 2 ? NV_ENC_PIC_TYPE_P : NV_ENC_PIC_TYPE_IDR);
    if (i == 0) {  // from the SPS start code to the slice start code (4-byte start codes)
      std::vector<long> at;
      for (size_t k = 0; k + 3 < e.bytes.size(); ++k)
        if (e.bytes[k] == 0 && e.bytes[k + 1] == 0 && e.bytes[k + 2] == 0 && e.bytes[k + 3] == 1) at.push_back(static_cast<long>(k));
      CHECK_EQ(at.size(), 4);
      if (at.size() == 4) headers.assign(e.bytes.begin() + at[1], e.bytes.begin() + at[3]);
    }
    stream.insert(stream.end(), e.bytes.begin(), e.bytes.end());
    sent.push_back(pic);
  }
  {
    std::vector<uint8_t> buffer(256);
    uint32_t size = 0;
    NV_ENC_SEQUENCE_PARAM_PAYLOAD seq{};
    seq.version = NV_ENC_SEQUENCE_PARAM_PAYLOAD_VER;
    seq.inBufferSize = static_cast<uint32_t>(buffer.size());
    seq.spsppsBuffer = buffer.data();
    seq.outSPSPPSPayloadSize = &size;
    CHECK_EQ(api.nvEncGetSequenceParams(hx.enc, &seq), 0);
    CHECK(std::vector<uint8_t>(buffer.begin(), buffer.begin() + size) == headers);
  }
  if (ffmpeg) {
    const std::vector<I420> decoded = FfmpegDecode(stream, 64, 48, dir, "options_64x48");
    CHECK_EQ(decoded.size(), sent.size());
    for (size_t i = 0; i < decoded.size() && i < sent.size(); ++i) CHECK_EQ(MaxDiff(decoded[i], sent[i]), 0);
  }
  {
    NV_ENC_RECONFIGURE_PARAMS rc{};
    rc.version = NV_ENC_RECONFIGURE_PARAMS_VER;
    rc.reInitEncodeParams = hx.init;
    rc.reInitEncodeParams.encodeWidth = 256;  // above maxEncodeWidth
    CHECK_EQ(api.nvEncReconfigureEncoder(hx.enc, &rc), NV_ENC_ERR_INVALID_PARAM);
    rc.reInitEncodeParams.encodeWidth = hx.init.encodeWidth = 96;
    rc.reInitEncodeParams.encodeHeight = hx.init.encodeHeight = 64;
    CHECK_EQ(api.nvEncReconfigureEncoder(hx.enc, &rc), 0);
    const I420 pic = YuvPicture(96, 64, 20);
    fill(pic);
    Encoded e;
    CHECK_EQ(hx.Encode(cib.inputBuffer, NV_ENC_BUFFER_FORMAT_NV12, bs, 0, 4004, e), 0);
    CHECK(NalTypes(e.bytes) == (std::vector<int>{9, 7, 8, 5}));
    if (ffmpeg) {
      const std::vector<I420> decoded = FfmpegDecode(e.bytes, 96, 64, dir, "resized_96x64");
      CHECK_EQ(decoded.size(), 1);
      if (!decoded.empty()) CHECK_EQ(MaxDiff(decoded[0], pic), 0);
    }
    NV_ENC_PIC_PARAMS eos{};
    eos.version = NV_ENC_PIC_PARAMS_VER;
    eos.encodePicFlags = NV_ENC_PIC_FLAG_EOS;
    CHECK_EQ(api.nvEncEncodePicture(hx.enc, &eos), 0);
  }
  CHECK_EQ(api.nvEncDestroyInputBuffer(hx.enc, cib.inputBuffer), 0);
  CHECK_EQ(api.nvEncDestroyBitstreamBuffer(hx.enc, bs), 0);
  CHECK_EQ(api.nvEncDestroyEncoder(hx.enc), 0);

  // --- HEVC marker stream.
  CHECK_EQ(hx.Open(), 0);
  CHECK_EQ(hx.Init(NV_ENC_CODEC_HEVC_GUID, 64, 48, false), 0);
  cib.bufferFmt = NV_ENC_BUFFER_FORMAT_NV12;
  CHECK_EQ(api.nvEncCreateInputBuffer(hx.enc, &cib), 0);
  bs = hx.CreateBitstream();
  {
    Encoded e0, e1;
    CHECK_EQ(hx.Encode(cib.inputBuffer, NV_ENC_BUFFER_FORMAT_NV12, bs, 0, 1, e0), 0);
    CHECK_EQ(hx.Encode(cib.inputBuffer, NV_ENC_BUFFER_FORMAT_NV12, bs, 0, 2, e1), 0);
    CHECK(e0.bytes == (std::vector<uint8_t>{0, 0, 0, 1, 0x26, 0x01, 0, 0, 3, 0, 0, 0x80}));
    CHECK(e1.bytes == (std::vector<uint8_t>{0, 0, 0, 1, 0x02, 0x01, 0, 0, 3, 0, 1, 0x80}));
    CHECK_EQ(e0.type, NV_ENC_PIC_TYPE_IDR);
    CHECK_EQ(e1.type, NV_ENC_PIC_TYPE_P);
  }
  CHECK_EQ(api.nvEncDestroyEncoder(hx.enc), 0);

  // No B-frames.
  CHECK_EQ(hx.Open(), 0);
  {
    NV_ENC_PRESET_CONFIG preset{};
    preset.version = NV_ENC_PRESET_CONFIG_VER;
    preset.presetCfg.version = NV_ENC_CONFIG_VER;
    CHECK_EQ(api.nvEncGetEncodePresetConfigEx(hx.enc, NV_ENC_CODEC_H264_GUID, NV_ENC_PRESET_P4_GUID,
                                              NV_ENC_TUNING_INFO_HIGH_QUALITY, &preset),
             0);
    CHECK_EQ(preset.presetCfg.frameIntervalP, 3);
    NV_ENC_INITIALIZE_PARAMS init{};
    init.version = NV_ENC_INITIALIZE_PARAMS_VER;
    init.encodeGUID = NV_ENC_CODEC_H264_GUID;
    init.presetGUID = NV_ENC_PRESET_P4_GUID;
    init.tuningInfo = NV_ENC_TUNING_INFO_HIGH_QUALITY;
    init.encodeWidth = 64;
    init.encodeHeight = 48;
    init.frameRateNum = 30;
    init.frameRateDen = 1;
    init.enablePTD = 1;
    init.encodeConfig = &preset.presetCfg;
    CHECK_EQ(api.nvEncInitializeEncoder(hx.enc, &init), NV_ENC_ERR_UNSUPPORTED_PARAM);
  }
  CHECK_EQ(api.nvEncDestroyEncoder(hx.enc), 0);
  CHECK_EQ(cu.LiveAllocations(), 0);
  CUcontext popped = nullptr;
  CHECK_EQ(cu.CtxPop(&popped), 0);

  // The log: one JSON object per line.
  std::ifstream f(log);
  std::string line, all;
  int lines = 0, encodes = 0, idrs = 0;
  while (std::getline(f, line)) {
    ++lines;
    CHECK(line.size() > 2 && line.front() == '{' && line.back() == '}');
    if (line.find("\"event\":\"encode\"") != std::string::npos) ++encodes;
    if (line.find("\"pictureType\":\"idr\"") != std::string::npos) ++idrs;
    all += line + "\n";
  }
  CHECK_EQ(encodes, 4 + 3 + 2 + 5 + 2);
  CHECK_EQ(idrs, 3 + 2 + 1 + 3 + 1);
  for (const char* needle :
       {"{\"event\":\"initialize\",\"codec\":\"h264\",\"width\":64,\"height\":48,\"frameRateNum\":30,\"frameRateDen\":1,"
        "\"preset\":\"p4\",\"tuning\":\"low_latency\"",
        "\"rateControl\":\"cbr\",\"averageBitRate\":2000000", "\"gopLength\":4294967295", "\"repeatSPSPPS\":true",
        "{\"event\":\"reconfigure\"", "\"averageBitRate\":1000000", "\"forceIDR\":true", "\"input\":\"cuda\"",
        "\"bufferFormat\":\"ARGB\"", "\"forceIdr\":true", "\"codec\":\"hevc\"", "\"inputTimeStamp\":2001",
        "\"leakedInputBuffers\":1", "{\"event\":\"eos\",\"pictures\":5}", "\"outputAUD\":true",
        "{\"event\":\"error\",\"status\":8,\"message\":\"new size 256x48 above"}) {
    if (all.find(needle) == std::string::npos) {
      ++failures;
      std::fprintf(stderr, "FAIL: log lacks %s\n", needle);
    }
  }
  if (failures) std::fprintf(stderr, "log:\n%s", all.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <fake libcuda.so.1> <fake libnvidia-encode.so.1>\n", argv[0]);
    return 2;
  }
  void* cuda_lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  void* nvenc_lib = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
  if (!cuda_lib || !nvenc_lib) {
    std::fprintf(stderr, "FAIL: dlopen: %s\n", dlerror());
    return 1;
  }
  char dir_template[] = "/tmp/arclight-fake-driver-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (!dir) {
    std::perror("mkdtemp");
    return 1;
  }
  const bool ffmpeg = HaveFfmpeg();
  const Cuda cu = LoadCuda(cuda_lib);
  CUcontext ctx = TestCuda(cu);
  TestNvenc(nvenc_lib, cu, ctx, dir, ffmpeg);
  CHECK_EQ(cu.PrimaryCtxRelease(0), 0);
  std::system(("rm -rf '" + std::string(dir) + "'").c_str());
  if (!ffmpeg) std::printf("note: no ffmpeg on PATH, decode-by-ffmpeg checks skipped\n");
  if (failures) {
    std::fprintf(stderr, "%d failure(s)\n", failures);
    return 1;
  }
  std::printf("fake driver: all checks passed%s\n", ffmpeg ? " (streams decoded by ffmpeg)" : "");
  return 0;
}
