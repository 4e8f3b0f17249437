// TEST DOUBLE — not NVIDIA code, not a CUDA implementation.
//
// A fake `libcuda.so.1` for machines with no GPU: just enough of the CUDA driver API for
// Arclight's NVENC encoder (native/src/nvenc/) to run its code paths end to end in tests. It is
// loaded in place of the real driver through ARCLIGHT_LIBCUDA (see CMakeLists.txt and
// test/support/fake-nvenc-driver.ts, which build it). Types and signatures come from the
// ffnvcodec headers (dynlink_cuda.h); every export is extern "C" with the tcu* signature.
//
// What it models:
//   - "Device memory" is host memory from malloc, tracked in a table (base → size) under a
//     std::mutex. CUdeviceptr values are those host addresses, so the fake NVENC library can read
//     the pixels of a registered CUDADEVICEPTR resource directly. Copies check that every device
//     byte they touch lies inside one live allocation (CUDA_ERROR_INVALID_VALUE otherwise), which
//     catches out-of-bounds copies and host pointers passed as device pointers.
//   - One primary context per device, reference counted; a per-thread context stack
//     (cuCtxPushCurrent_v2 / cuCtxPopCurrent_v2). Allocation, free and copies need a current
//     context (CUDA_ERROR_INVALID_CONTEXT without one), as with the real driver.
//   - cuMemAllocPitch_v2 pads rows to 512 bytes.
//   - Device facts (cuDeviceGetAttribute, cuDeviceTotalMem_v2, cuMemGetInfo_v2, cuDriverGetVersion):
//     compute capability 0.0, 1 multiprocessor, 1 GiB total, driver 0.0 — values no real GPU
//     reports, so a figure taken on the fake cannot pass for a real one.
//   - "Pinned" host memory (cuMemAllocHost_v2 / cuMemFreeHost) is malloc, counted for leak checks;
//     streams are tokens and cuMemcpy2DAsync_v2 copies at once (cuStreamSynchronize has nothing to
//     wait for).
//
// Environment:
//   ARCLIGHT_FAKE_CUDA_DEVICES  device count (default 1; 0 → cuDeviceGetCount reports 0)
//   ARCLIGHT_FAKE_CUDA_INIT     "fail" → cuInit returns CUDA_ERROR_NO_DEVICE
//
// Extra exports for tests (not CUDA API): arclight_fake_cuda_live_allocations(),
// arclight_fake_cuda_live_bytes(), arclight_fake_cuda_live_host_allocations() and
// arclight_fake_cuda_live_streams() — what is still allocated, to check for leaks.
#include <dynlink_cuda.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

// CUresult values the header's abbreviated enum does not name (numbers from the CUDA driver API).
constexpr CUresult kSuccess = CUDA_SUCCESS;
constexpr CUresult kInvalidValue = static_cast<CUresult>(1);
constexpr CUresult kOutOfMemory = static_cast<CUresult>(2);
constexpr CUresult kNotInitialized = static_cast<CUresult>(3);
constexpr CUresult kNoDevice = static_cast<CUresult>(100);
constexpr CUresult kInvalidDevice = static_cast<CUresult>(101);
constexpr CUresult kInvalidContext = static_cast<CUresult>(201);
constexpr CUresult kNotSupported = static_cast<CUresult>(801);

// CUpointer_attribute values (CUDA driver API; dynlink_cuda.h does not define the enum).
constexpr int kPointerAttributeMemoryType = 2;
constexpr int kPointerAttributeDeviceOrdinal = 9;
constexpr int kPointerAttributeRangeStartAddr = 11;
constexpr int kPointerAttributeRangeSize = 12;

constexpr int kMaxDevices = 16;
constexpr std::size_t kPitchAlignment = 512;
constexpr const char* kDeviceName = "Arclight fake GPU (test double)";
constexpr std::size_t kFakeTotalMemory = std::size_t{1} << 30;
// CUdevice_attribute values the fake answers.
constexpr int kAttributeMultiprocessorCount = 16;
constexpr int kAttributeComputeCapabilityMajor = 75;
constexpr int kAttributeComputeCapabilityMinor = 76;

}  // namespace

// The header declares CUcontext as a pointer to this incomplete struct; the fake defines it.
struct CUctx_st {
  int device = 0;
  int refcount = 0;
};

namespace {

struct Allocation {
  std::size_t size;
  int device;
};

std::mutex g_mutex;
std::atomic<bool> g_initialized{false};
std::map<std::uintptr_t, Allocation> g_allocations;  // base address → allocation
std::map<void*, std::size_t> g_host_allocations;       // pinned host memory → size
int g_live_streams = 0;
struct FakeStream {
  int device;
};
CUctx_st g_contexts[kMaxDevices];
thread_local std::vector<CUctx_st*> t_stack;

int DeviceCount() {
  const char* env = std::getenv("ARCLIGHT_FAKE_CUDA_DEVICES");
  if (!env || !*env) return 1;
  char* end = nullptr;
  long n = std::strtol(env, &end, 10);
  if (end == env || n < 0) return 1;
  return n > kMaxDevices ? kMaxDevices : static_cast<int>(n);
}

bool ValidDevice(CUdevice dev) { return dev >= 0 && dev < DeviceCount(); }

bool IsOurContext(const CUctx_st* ctx) {
  for (const auto& c : g_contexts)
    if (&c == ctx) return true;
  return false;
}

// Caller holds g_mutex. The allocation holding [ptr, ptr+len), or end() when none does (len 0
// asks for the allocation holding ptr).
std::map<std::uintptr_t, Allocation>::iterator FindRange(std::uintptr_t ptr, std::size_t len) {
  auto it = g_allocations.upper_bound(ptr);
  if (it == g_allocations.begin()) return g_allocations.end();
  --it;
  const std::uintptr_t base = it->first;
  const std::size_t size = it->second.size;
  if (ptr < base || ptr - base >= size) return g_allocations.end();
  if (len > size - (ptr - base)) return g_allocations.end();
  return it;
}

CUresult NeedContext() {
  if (!g_initialized.load()) return kNotInitialized;
  if (t_stack.empty()) return kInvalidContext;
  return kSuccess;
}

CUresult Allocate(CUdeviceptr* dptr, std::size_t bytes) {
  if (CUresult r = NeedContext(); r != kSuccess) return r;
  if (!dptr || bytes == 0) return kInvalidValue;
  void* p = std::malloc(bytes);
  if (!p) return kOutOfMemory;
  // Fresh device memory is not zeroed on a GPU either; fill with a pattern so a test that
  // forgets to upload sees garbage-looking (but deterministic) pixels.
  std::memset(p, 0xCD, bytes);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_allocations[reinterpret_cast<std::uintptr_t>(p)] = Allocation{bytes, t_stack.back()->device};
  *dptr = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(p));
  return kSuccess;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) CUresult cuInit(unsigned int flags) {
  if (flags != 0) return kInvalidValue;
  const char* mode = std::getenv("ARCLIGHT_FAKE_CUDA_INIT");
  if (mode && std::strcmp(mode, "fail") == 0) return kNoDevice;
  g_initialized.store(true);
  return kSuccess;
}

__attribute__((visibility("default"))) CUresult cuDeviceGetCount(int* count) {
  if (!g_initialized.load()) return kNotInitialized;
  if (!count) return kInvalidValue;
  *count = DeviceCount();
  return kSuccess;
}

__attribute__((visibility("default"))) CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (!g_initialized.load()) return kNotInitialized;
  if (!device) return kInvalidValue;
  if (!ValidDevice(ordinal)) return kInvalidDevice;
  *device = ordinal;
  return kSuccess;
}

__attribute__((visibility("default"))) CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (!g_initialized.load()) return kNotInitialized;
  if (!name || len <= 0) return kInvalidValue;
  if (!ValidDevice(dev)) return kInvalidDevice;
  std::strncpy(name, kDeviceName, static_cast<std::size_t>(len) - 1);
  name[len - 1] = '\0';
  return kSuccess;
}

__attribute__((visibility("default"))) CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  if (!g_initialized.load()) return kNotInitialized;
  if (!pctx) return kInvalidValue;
  if (!ValidDevice(dev)) return kInvalidDevice;
  std::lock_guard<std::mutex> lock(g_mutex);
  g_contexts[dev].device = dev;
  ++g_contexts[dev].refcount;
  *pctx = &g_contexts[dev];
  return kSuccess;
}

__attribute__((visibility("default"))) CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  if (!g_initialized.load()) return kNotInitialized;
  if (!ValidDevice(dev)) return kInvalidDevice;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_contexts[dev].refcount <= 0) return kInvalidContext;
  --g_contexts[dev].refcount;
  return kSuccess;
}

__attribute__((visibility("default"))) CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  if (!g_initialized.load()) return kNotInitialized;
  std::lock_guard<std::mutex> lock(g_mutex);
  // Only retained primary contexts are valid: pushing one that was released (or never retained)
  // is a use-after-release bug in the caller.
  if (!ctx || !IsOurContext(ctx) || ctx->refcount <= 0) return kInvalidContext;
  t_stack.push_back(ctx);
  return kSuccess;
}

__attribute__((visibility("default"))) CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
  if (!g_initialized.load()) return kNotInitialized;
  if (t_stack.empty()) return kInvalidContext;
  CUctx_st* top = t_stack.back();
  t_stack.pop_back();
  if (pctx) *pctx = top;
  return kSuccess;
}

__attribute__((visibility("default"))) CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  return Allocate(dptr, bytesize);
}

__attribute__((visibility("default"))) CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch,
                                                                   size_t widthInBytes, size_t height,
                                                                   unsigned int elementSizeBytes) {
  if (CUresult r = NeedContext(); r != kSuccess) return r;
  if (!dptr || !pPitch || widthInBytes == 0 || height == 0) return kInvalidValue;
  if (elementSizeBytes != 4 && elementSizeBytes != 8 && elementSizeBytes != 16) return kInvalidValue;
  const std::size_t pitch = (widthInBytes + kPitchAlignment - 1) / kPitchAlignment * kPitchAlignment;
  if (height > SIZE_MAX / pitch) return kOutOfMemory;
  CUresult r = Allocate(dptr, pitch * height);
  if (r == kSuccess) *pPitch = pitch;
  return r;
}

__attribute__((visibility("default"))) CUresult cuMemFree_v2(CUdeviceptr dptr) {
  if (CUresult r = NeedContext(); r != kSuccess) return r;
  if (dptr == 0) return kSuccess;
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_allocations.find(static_cast<std::uintptr_t>(dptr));
    if (it == g_allocations.end()) return kInvalidValue;  // not a base address of a live allocation
    p = reinterpret_cast<void*>(it->first);
    g_allocations.erase(it);
  }
  std::free(p);
  return kSuccess;
}

__attribute__((visibility("default"))) CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes) {
  if (CUresult r = NeedContext(); r != kSuccess) return r;
  if (bytes == 0) return kSuccess;
  if (!src) return kInvalidValue;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (FindRange(static_cast<std::uintptr_t>(dst), bytes) == g_allocations.end()) return kInvalidValue;
  std::memmove(reinterpret_cast<void*>(static_cast<std::uintptr_t>(dst)), src, bytes);
  return kSuccess;
}

__attribute__((visibility("default"))) CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) {
  if (CUresult r = NeedContext(); r != kSuccess) return r;
  if (bytes == 0) return kSuccess;
  if (!dst) return kInvalidValue;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (FindRange(static_cast<std::uintptr_t>(src), bytes) == g_allocations.end()) return kInvalidValue;
  std::memmove(dst, reinterpret_cast<const void*>(static_cast<std::uintptr_t>(src)), bytes);
  return kSuccess;
}

__attribute__((visibility("default"))) CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  if (CUresult r = NeedContext(); r != kSuccess) return r;
  if (bytes == 0) return kSuccess;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (FindRange(static_cast<std::uintptr_t>(src), bytes) == g_allocations.end() ||
      FindRange(static_cast<std::uintptr_t>(dst), bytes) == g_allocations.end()) {
    return kInvalidValue;
  }
  std::memmove(reinterpret_cast<void*>(static_cast<std::uintptr_t>(dst)), reinterpret_cast<const void*>(static_cast<std::uintptr_t>(src)), bytes);
  return kSuccess;
}

__attribute__((visibility("default"))) CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D* c) {
  if (CUresult r = NeedContext(); r != kSuccess) return r;
  if (!c) return kInvalidValue;
  if (c->WidthInBytes == 0 || c->Height == 0) return kSuccess;
  const auto side_ok = [](CUmemorytype type) { return type == CU_MEMORYTYPE_HOST || type == CU_MEMORYTYPE_DEVICE; };
  if (c->srcMemoryType == CU_MEMORYTYPE_ARRAY || c->dstMemoryType == CU_MEMORYTYPE_ARRAY) return kNotSupported;
  if (!side_ok(c->srcMemoryType) || !side_ok(c->dstMemoryType)) return kInvalidValue;
  // Rows must not overlap themselves: a pitch narrower than a row is invalid (real driver too).
  if (c->Height > 1 && (c->srcPitch < c->srcXInBytes + c->WidthInBytes || c->dstPitch < c->dstXInBytes + c->WidthInBytes))
    return kInvalidValue;

  const bool src_dev = c->srcMemoryType == CU_MEMORYTYPE_DEVICE;
  const bool dst_dev = c->dstMemoryType == CU_MEMORYTYPE_DEVICE;
  const std::uintptr_t src_base =
      src_dev ? static_cast<std::uintptr_t>(c->srcDevice) : reinterpret_cast<std::uintptr_t>(c->srcHost);
  const std::uintptr_t dst_base =
      dst_dev ? static_cast<std::uintptr_t>(c->dstDevice) : reinterpret_cast<std::uintptr_t>(c->dstHost);
  if (src_base == 0 || dst_base == 0) return kInvalidValue;
  const std::uintptr_t src0 = src_base + c->srcY * c->srcPitch + c->srcXInBytes;
  const std::uintptr_t dst0 = dst_base + c->dstY * c->dstPitch + c->dstXInBytes;
  // Bytes from the first copied byte to one past the last one.
  const std::size_t src_span = (c->Height - 1) * c->srcPitch + c->WidthInBytes;
  const std::size_t dst_span = (c->Height - 1) * c->dstPitch + c->WidthInBytes;

  std::lock_guard<std::mutex> lock(g_mutex);
  if (src_dev && FindRange(src0, src_span) == g_allocations.end()) return kInvalidValue;
  if (dst_dev && FindRange(dst0, dst_span) == g_allocations.end()) return kInvalidValue;
  for (std::size_t row = 0; row < c->Height; ++row) {
    std::memmove(reinterpret_cast<void*>(dst0 + row * c->dstPitch),
                 reinterpret_cast<const void*>(src0 + row * c->srcPitch), c->WidthInBytes);
  }
  return kSuccess;
}

__attribute__((visibility("default"))) CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice dev) {
  if (!g_initialized.load()) return kNotInitialized;
  if (!value) return kInvalidValue;
  if (!ValidDevice(dev)) return kInvalidDevice;
  switch (static_cast<int>(attribute)) {
    case kAttributeMultiprocessorCount: *value = 1; return kSuccess;
    case kAttributeComputeCapabilityMajor: *value = 0; return kSuccess;
    case kAttributeComputeCapabilityMinor: *value = 0; return kSuccess;
    default: return kInvalidValue;
  }
}

__attribute__((visibility("default"))) CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  if (!g_initialized.load()) return kNotInitialized;
  if (!bytes) return kInvalidValue;
  if (!ValidDevice(dev)) return kInvalidDevice;
  *bytes = kFakeTotalMemory;
  return kSuccess;
}

__attribute__((visibility("default"))) CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  if (CUresult r = NeedContext(); r != kSuccess) return r;
  if (!free || !total) return kInvalidValue;
  std::lock_guard<std::mutex> lock(g_mutex);
  std::size_t used = 0;
  for (const auto& [base, a] : g_allocations) used += a.size;
  *total = kFakeTotalMemory;
  *free = used >= kFakeTotalMemory ? 0 : kFakeTotalMemory - used;
  return kSuccess;
}

__attribute__((visibility("default"))) CUresult cuDriverGetVersion(int* version) {
  if (!version) return kInvalidValue;
  *version = 0;
  return kSuccess;
}

__attribute__((visibility("default"))) CUresult cuMemAllocHost_v2(void** pointer, size_t bytes) {
  if (CUresult r = NeedContext(); r != kSuccess) return r;
  if (!pointer || bytes == 0) return kInvalidValue;
  void* p = std::malloc(bytes);
  if (!p) return kOutOfMemory;
  std::lock_guard<std::mutex> lock(g_mutex);
  g_host_allocations[p] = bytes;
  *pointer = p;
  return kSuccess;
}

__attribute__((visibility("default"))) CUresult cuMemFreeHost(void* pointer) {
  if (CUresult r = NeedContext(); r != kSuccess) return r;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_host_allocations.find(pointer);
    if (it == g_host_allocations.end()) return kInvalidValue;
    g_host_allocations.erase(it);
  }
  std::free(pointer);
  return kSuccess;
}

__attribute__((visibility("default"))) CUresult cuStreamCreate(CUstream* stream, unsigned int flags) {
  if (CUresult r = NeedContext(); r != kSuccess) return r;
  if (!stream || flags > 1) return kInvalidValue;
  std::lock_guard<std::mutex> lock(g_mutex);
  ++g_live_streams;
  *stream = reinterpret_cast<CUstream>(new FakeStream{t_stack.back()->device});
  return kSuccess;
}

__attribute__((visibility("default"))) CUresult cuStreamSynchronize(CUstream stream) {
  if (CUresult r = NeedContext(); r != kSuccess) return r;
  return stream ? kSuccess : kInvalidValue;
}

__attribute__((visibility("default"))) CUresult cuStreamDestroy_v2(CUstream stream) {
  if (CUresult r = NeedContext(); r != kSuccess) return r;
  if (!stream) return kInvalidValue;
  std::lock_guard<std::mutex> lock(g_mutex);
  --g_live_streams;
  delete reinterpret_cast<FakeStream*>(stream);
  return kSuccess;
}

__attribute__((visibility("default"))) CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D* c, CUstream stream) {
  if (!stream) return kInvalidValue;  // the fake has no default stream to stand in for
  return cuMemcpy2D_v2(c);
}

__attribute__((visibility("default"))) CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr ptr) {
  if (!g_initialized.load()) return kNotInitialized;
  if (!data) return kInvalidValue;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = FindRange(static_cast<std::uintptr_t>(ptr), 0);
  if (it == g_allocations.end()) return kInvalidValue;
  switch (attribute) {
    case kPointerAttributeMemoryType:
      *static_cast<unsigned int*>(data) = CU_MEMORYTYPE_DEVICE;
      return kSuccess;
    case kPointerAttributeDeviceOrdinal:
      *static_cast<int*>(data) = it->second.device;
      return kSuccess;
    case kPointerAttributeRangeStartAddr:
      *static_cast<CUdeviceptr*>(data) = static_cast<CUdeviceptr>(it->first);
      return kSuccess;
    case kPointerAttributeRangeSize:
      *static_cast<size_t*>(data) = it->second.size;
      return kSuccess;
    default:
      return kInvalidValue;
  }
}

__attribute__((visibility("default"))) CUresult cuGetErrorName(CUresult error, const char** pstr) {
  if (!pstr) return kInvalidValue;
  switch (static_cast<int>(error)) {
    case 0: *pstr = "CUDA_SUCCESS"; return kSuccess;
    case 1: *pstr = "CUDA_ERROR_INVALID_VALUE"; return kSuccess;
    case 2: *pstr = "CUDA_ERROR_OUT_OF_MEMORY"; return kSuccess;
    case 3: *pstr = "CUDA_ERROR_NOT_INITIALIZED"; return kSuccess;
    case 4: *pstr = "CUDA_ERROR_DEINITIALIZED"; return kSuccess;
    case 100: *pstr = "CUDA_ERROR_NO_DEVICE"; return kSuccess;
    case 101: *pstr = "CUDA_ERROR_INVALID_DEVICE"; return kSuccess;
    case 201: *pstr = "CUDA_ERROR_INVALID_CONTEXT"; return kSuccess;
    case 801: *pstr = "CUDA_ERROR_NOT_SUPPORTED"; return kSuccess;
    case 999: *pstr = "CUDA_ERROR_UNKNOWN"; return kSuccess;
    default: *pstr = nullptr; return kInvalidValue;
  }
}

__attribute__((visibility("default"))) CUresult cuGetErrorString(CUresult error, const char** pstr) {
  if (!pstr) return kInvalidValue;
  switch (static_cast<int>(error)) {
    case 0: *pstr = "no error"; return kSuccess;
    case 1: *pstr = "invalid argument"; return kSuccess;
    case 2: *pstr = "out of memory"; return kSuccess;
    case 3: *pstr = "initialization error"; return kSuccess;
    case 4: *pstr = "driver shutting down"; return kSuccess;
    case 100: *pstr = "no CUDA-capable device is detected"; return kSuccess;
    case 101: *pstr = "invalid device ordinal"; return kSuccess;
    case 201: *pstr = "invalid device context"; return kSuccess;
    case 801: *pstr = "operation not supported"; return kSuccess;
    case 999: *pstr = "unknown error"; return kSuccess;
    default: *pstr = nullptr; return kInvalidValue;
  }
}

// Test-only exports (not part of the CUDA API).
__attribute__((visibility("default"))) size_t arclight_fake_cuda_live_allocations() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_allocations.size();
}

__attribute__((visibility("default"))) size_t arclight_fake_cuda_live_bytes() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::size_t total = 0;
  for (const auto& [base, a] : g_allocations) total += a.size;
  return total;
}

__attribute__((visibility("default"))) size_t arclight_fake_cuda_live_host_allocations() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_host_allocations.size();
}

__attribute__((visibility("default"))) int arclight_fake_cuda_live_streams() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_live_streams;
}

}  // extern "C"
