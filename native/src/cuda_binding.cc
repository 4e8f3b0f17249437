// The Node-API side of Arclight's CUDA support, for frames a model keeps in GPU memory:
//
//   cudaDeviceInfo(device = 0): Promise<{ ordinal, name, computeCapability, multiprocessors,
//       totalMemoryBytes, freeMemoryBytes, driverVersion, driverLibrary }>   (rejects with why not)
//   CudaBuffer(bytes, device = 0): { devicePtr: bigint, size, upload(bytes, offset = 0), download(),
//       copyFromDevice(srcPtr, bytes, offset = 0),
//       downloadFrame({ width, height, pitch, layout }): Promise<{ data, copyMs, convertMs }>, free() }
//
// downloadFrame is the runtime's host copy of a CUDA frame for software encoders: it runs on
// libuv's thread pool (pinned staging memory, the buffer's own stream; nvenc/cuda_frame_download.h),
// so the JavaScript thread never waits on the GPU. upload/download/copyFromDevice are synchronous:
// they serve tests, benchmarks and a model's own set-up, not the per-frame path.
#include "cuda_binding.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#include "binding_args.h"

#ifdef ARCLIGHT_HAVE_NVENC
#include "nvenc/cuda_driver.h"
#include "nvenc/cuda_frame_download.h"
#include "nvenc/device_allocation.h"
#endif

namespace arclight::binding {

namespace {

[[maybe_unused]] constexpr const char* kCudaCompiledOut =
    "CUDA support is compiled out: the NVENC headers (Debian libffmpeg-nvenc-dev, /usr/include/ffnvcodec) were not found "
    "when the addon was built";

}  // namespace

#ifndef ARCLIGHT_HAVE_NVENC

void RegisterCuda(Napi::Env env, Napi::Object exports) {
  exports.Set("cudaDeviceInfo", Napi::Function::New(env, [](const Napi::CallbackInfo& info) -> Napi::Value {
    DeviceArg(info, 0);
    auto deferred = Napi::Promise::Deferred::New(info.Env());
    deferred.Reject(Napi::Error::New(info.Env(), kCudaCompiledOut).Value());
    return deferred.Promise();
  }, "cudaDeviceInfo"));
  exports.Set("CudaBuffer", Napi::Function::New(env, [](const Napi::CallbackInfo& info) -> Napi::Value {
    throw Napi::Error::New(info.Env(), kCudaCompiledOut);
  }, "CudaBuffer"));
}

#else

namespace {

using arclight::nvenc::CudaDriver;
using arclight::nvenc::DeviceAllocation;
using arclight::nvenc::FrameLayout;
using arclight::nvenc::FrameShape;
using arclight::nvenc::ScopedContext;

// ---------------------------------------------------------------------------------------------
// cudaDeviceInfo

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int ccMajor = 0;
  int ccMinor = 0;
  int multiprocessors = 0;
  std::size_t totalBytes = 0;
  std::size_t freeBytes = 0;
  int driverVersion = 0;
  std::string library;
};

// "" on success. Retaining the primary context creates it (what any CUDA use would do first);
// free memory is read inside it.
std::string ReadDeviceInfo(int ordinal, DeviceInfo* out) {
  std::string error;
  const CudaDriver* cuda = arclight::nvenc::LoadCudaDriver(&error);
  if (cuda == nullptr) return error;
  out->ordinal = ordinal;
  out->library = cuda->library;
  CUdevice device = 0;
  CUresult r = cuda->cuDeviceGet(&device, ordinal);
  if (r != CUDA_SUCCESS) return "cuDeviceGet(" + std::to_string(ordinal) + ") failed: " + cuda->ErrorName(r);
  char name[256] = {0};
  if ((r = cuda->cuDeviceGetName(name, sizeof name, device)) != CUDA_SUCCESS) return "cuDeviceGetName failed: " + cuda->ErrorName(r);
  out->name = name;
  const auto attribute = [&](int which, int* value) {
    return cuda->cuDeviceGetAttribute(value, static_cast<CUdevice_attribute>(which), device);
  };
  if ((r = attribute(arclight::nvenc::kAttributeComputeCapabilityMajor, &out->ccMajor)) != CUDA_SUCCESS ||
      (r = attribute(arclight::nvenc::kAttributeComputeCapabilityMinor, &out->ccMinor)) != CUDA_SUCCESS ||
      (r = attribute(arclight::nvenc::kAttributeMultiprocessorCount, &out->multiprocessors)) != CUDA_SUCCESS) {
    return "cuDeviceGetAttribute failed: " + cuda->ErrorName(r);
  }
  if ((r = cuda->cuDeviceTotalMem(&out->totalBytes, device)) != CUDA_SUCCESS) return "cuDeviceTotalMem failed: " + cuda->ErrorName(r);
  if ((r = cuda->cuDriverGetVersion(&out->driverVersion)) != CUDA_SUCCESS) return "cuDriverGetVersion failed: " + cuda->ErrorName(r);
  CUcontext context = nullptr;
  if ((r = cuda->cuDevicePrimaryCtxRetain(&context, device)) != CUDA_SUCCESS) return "cuDevicePrimaryCtxRetain failed: " + cuda->ErrorName(r);
  {
    ScopedContext current(*cuda, context);
    std::size_t total = 0;
    r = current.ok() ? cuda->cuMemGetInfo(&out->freeBytes, &total) : CUDA_SUCCESS;
    if (!current.ok()) error = "cuCtxPushCurrent failed";
  }
  cuda->cuDevicePrimaryCtxRelease(device);
  if (!error.empty()) return error;
  if (r != CUDA_SUCCESS) return "cuMemGetInfo failed: " + cuda->ErrorName(r);
  return "";
}

class DeviceInfoWorker : public Napi::AsyncWorker {
 public:
  DeviceInfoWorker(Napi::Env env, int ordinal) : Napi::AsyncWorker(env), ordinal_(ordinal), deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }
  void Execute() override {
    const std::string error = ReadDeviceInfo(ordinal_, &info_);
    if (!error.empty()) SetError(error);
  }
  void OnOK() override {
    Napi::Env env = Env();
    Napi::Object out = Napi::Object::New(env);
    out.Set("ordinal", info_.ordinal);
    out.Set("name", info_.name);
    out.Set("computeCapability", std::to_string(info_.ccMajor) + "." + std::to_string(info_.ccMinor));
    out.Set("multiprocessors", info_.multiprocessors);
    out.Set("totalMemoryBytes", static_cast<double>(info_.totalBytes));
    out.Set("freeMemoryBytes", static_cast<double>(info_.freeBytes));
    // The driver reports 1000 × major + 10 × minor (13000 → "13.0").
    out.Set("driverVersion", std::to_string(info_.driverVersion / 1000) + "." + std::to_string((info_.driverVersion % 1000) / 10));
    out.Set("driverLibrary", info_.library);
    deferred_.Resolve(out);
  }
  void OnError(const Napi::Error& error) override { deferred_.Reject(error.Value()); }

 private:
  int ordinal_;
  Napi::Promise::Deferred deferred_;
  DeviceInfo info_;
};

Napi::Value CudaDeviceInfo(const Napi::CallbackInfo& info) {
  auto* worker = new DeviceInfoWorker(info.Env(), DeviceArg(info, 0));
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

// ---------------------------------------------------------------------------------------------
// CudaBuffer#downloadFrame

class DownloadWorker : public Napi::AsyncWorker {
 public:
  DownloadWorker(Napi::Env env, std::shared_ptr<DeviceAllocation> allocation, FrameShape shape, Napi::Uint8Array out)
      : Napi::AsyncWorker(env),
        allocation_(std::move(allocation)),
        shape_(shape),
        out_(Napi::Persistent(out)),
        data_(out.Data()),
        deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }
  void Execute() override {
    const std::string error = arclight::nvenc::DownloadI420(*allocation_, shape_, data_, &times_);
    if (!error.empty()) SetError(error);
  }
  void OnOK() override {
    Napi::Env env = Env();
    Napi::Object result = Napi::Object::New(env);
    result.Set("data", out_.Value());
    result.Set("copyMs", times_.copyMs);
    result.Set("convertMs", times_.convertMs);
    deferred_.Resolve(result);
  }
  void OnError(const Napi::Error& error) override { deferred_.Reject(error.Value()); }

 private:
  std::shared_ptr<DeviceAllocation> allocation_;  // keeps the memory alive if free() is called meanwhile
  FrameShape shape_;
  Napi::Reference<Napi::Uint8Array> out_;  // keeps the output alive while the worker writes it
  std::uint8_t* data_;
  arclight::nvenc::DownloadTimes times_;
  Napi::Promise::Deferred deferred_;
};

FrameLayout ParseLayout(Napi::Env env, const Napi::Value& value) {
  if (!value.IsString()) ThrowType(env, "layout must be a string");
  const std::string layout = value.As<Napi::String>().Utf8Value();
  if (layout == "nv12") return FrameLayout::kNv12;
  if (layout == "i420") return FrameLayout::kI420;
  if (layout == "rgba") return FrameLayout::kRgba;
  if (layout == "bgra") return FrameLayout::kBgra;
  ThrowType(env, "layout must be 'nv12', 'i420', 'rgba' or 'bgra', got '" + layout + "'");
}

// ---------------------------------------------------------------------------------------------
// CudaBuffer: device memory owned by JavaScript (tests, benchmarks, and the runtime's pool of
// copies of emitted CUDA frames; a model brings its own memory, e.g. from onnxruntime's CUDA provider).

class CudaBufferObject : public Napi::ObjectWrap<CudaBufferObject> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "CudaBuffer",
                       {InstanceMethod("upload", &CudaBufferObject::Upload), InstanceMethod("download", &CudaBufferObject::Download),
                        InstanceMethod("downloadFrame", &CudaBufferObject::DownloadFrame),
                        InstanceMethod("copyFromDevice", &CudaBufferObject::CopyFromDevice),
                        InstanceMethod("free", &CudaBufferObject::Free),
                        InstanceAccessor("devicePtr", &CudaBufferObject::DevicePtr, nullptr),
                        InstanceAccessor("size", &CudaBufferObject::Size, nullptr)});
  }

  explicit CudaBufferObject(const Napi::CallbackInfo& info) : Napi::ObjectWrap<CudaBufferObject>(info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsNumber()) ThrowType(env, "CudaBuffer(bytes, device = 0): bytes must be a number");
    const double bytes = info[0].As<Napi::Number>().DoubleValue();
    if (!(bytes >= 1) || std::trunc(bytes) != bytes || bytes > 16.0 * (1 << 30)) ThrowRange(env, "bytes must be an integer from 1 to 16 GiB");
    const int device = DeviceArg(info, 1);
    std::string error;
    const CudaDriver* cuda = arclight::nvenc::LoadCudaDriver(&error);
    if (cuda == nullptr) throw Napi::Error::New(env, "CUDA is unavailable: " + error);
    allocation_ = DeviceAllocation::Create(*cuda, device, static_cast<std::size_t>(bytes), &error);
    if (!allocation_) throw Napi::Error::New(env, error);
    size_ = static_cast<std::size_t>(bytes);
  }

 private:
  DeviceAllocation& Live(Napi::Env env) const {
    if (!allocation_) throw Napi::Error::New(env, "CudaBuffer is freed");
    return *allocation_;
  }

  Napi::Value Upload(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    DeviceAllocation& a = Live(env);
    if (info.Length() < 1 || !info[0].IsTypedArray() || info[0].As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) {
      ThrowType(env, "upload(bytes, offset = 0): bytes must be a Uint8Array");
    }
    Napi::Uint8Array bytes = info[0].As<Napi::Uint8Array>();
    std::size_t offset = 0;
    if (info.Length() > 1 && !info[1].IsUndefined()) offset = static_cast<std::size_t>(IntegerOption(env, info[1], "offset", 0, 0x7fffffff));
    if (offset + bytes.ElementLength() > size_) ThrowRange(env, "upload runs past the end of the buffer");
    ScopedContext current(a.cuda(), a.context());
    const CUresult r = a.cuda().cuMemcpyHtoD(a.ptr() + offset, bytes.Data(), bytes.ElementLength());
    if (r != CUDA_SUCCESS) throw Napi::Error::New(env, "cuMemcpyHtoD failed: " + a.cuda().ErrorName(r));
    return env.Undefined();
  }

  // copyFromDevice(srcPtr: bigint, bytes, offset = 0): device-to-device, the source checked to lie
  // inside one allocation on this buffer's device (a model's output buffer), so a bad pointer is a
  // RangeError rather than a GPU fault.
  Napi::Value CopyFromDevice(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    DeviceAllocation& a = Live(env);
    const CudaDriver& cuda = a.cuda();
    if (info.Length() < 2 || !info[0].IsBigInt()) ThrowType(env, "copyFromDevice(srcPtr: bigint, bytes, offset = 0)");
    bool lossless = false;
    const std::uint64_t src = info[0].As<Napi::BigInt>().Uint64Value(&lossless);
    if (!lossless || src == 0) ThrowRange(env, "srcPtr must be a non-null 64-bit device pointer");
    const std::size_t bytes = static_cast<std::size_t>(IntegerOption(env, info[1], "bytes", 1, 0x7fffffff));
    std::size_t offset = 0;
    if (info.Length() > 2 && !info[2].IsUndefined()) offset = static_cast<std::size_t>(IntegerOption(env, info[2], "offset", 0, 0x7fffffff));
    if (offset + bytes > size_) ThrowRange(env, "the copy runs past the end of this buffer");
    ScopedContext current(cuda, a.context());
    int ordinal = -1;
    CUdeviceptr start = 0;
    std::size_t range = 0;
    CUresult r = cuda.cuPointerGetAttribute(&ordinal, arclight::nvenc::kPointerAttributeDeviceOrdinal, src);
    if (r != CUDA_SUCCESS) ThrowRange(env, "srcPtr is not CUDA device memory: " + cuda.ErrorName(r));
    if (cuda.cuPointerGetAttribute(&start, arclight::nvenc::kPointerAttributeRangeStartAddr, src) != CUDA_SUCCESS ||
        cuda.cuPointerGetAttribute(&range, arclight::nvenc::kPointerAttributeRangeSize, src) != CUDA_SUCCESS) {
      ThrowRange(env, "the allocation srcPtr points into could not be queried");
    }
    if (ordinal != a.ordinal()) ThrowRange(env, "srcPtr is on CUDA device " + std::to_string(ordinal) + ", this buffer on " + std::to_string(a.ordinal()));
    if (src < start || src - start + bytes > range) {
      ThrowRange(env, "the source (" + std::to_string(bytes) + " bytes) runs past the end of its CUDA allocation (" + std::to_string(range) + " bytes)");
    }
    r = cuda.cuMemcpyDtoD(a.ptr() + offset, src, bytes);
    if (r != CUDA_SUCCESS) throw Napi::Error::New(env, "cuMemcpyDtoD failed: " + cuda.ErrorName(r));
    return env.Undefined();
  }

  Napi::Value Download(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    DeviceAllocation& a = Live(env);
    Napi::Uint8Array out = Napi::Uint8Array::New(env, size_);
    ScopedContext current(a.cuda(), a.context());
    const CUresult r = a.cuda().cuMemcpyDtoH(out.Data(), a.ptr(), size_);
    if (r != CUDA_SUCCESS) throw Napi::Error::New(env, "cuMemcpyDtoH failed: " + a.cuda().ErrorName(r));
    return out;
  }

  // downloadFrame({ width, height, pitch, layout }): the frame at the buffer's start as packed I420,
  // copied and converted on the thread pool. Shape mistakes throw here; CUDA failures reject.
  Napi::Value DownloadFrame(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Live(env);
    if (info.Length() < 1 || !info[0].IsObject()) ThrowType(env, "downloadFrame({ width, height, pitch, layout })");
    Napi::Object o = info[0].As<Napi::Object>();
    FrameShape shape;
    shape.width = IntegerOption(env, o.Get("width"), "width", 2, 16384);
    shape.height = IntegerOption(env, o.Get("height"), "height", 2, 16384);
    if (shape.width % 2 != 0 || shape.height % 2 != 0) ThrowRange(env, "width and height must be even (4:2:0)");
    shape.pitch = static_cast<std::size_t>(IntegerOption(env, o.Get("pitch"), "pitch", 1, 0x7fffffff));
    shape.layout = ParseLayout(env, o.Get("layout"));
    const std::size_t rowBytes = static_cast<std::size_t>(shape.width) * (shape.layout == FrameLayout::kRgba || shape.layout == FrameLayout::kBgra ? 4 : 1);
    if (shape.pitch < rowBytes) ThrowRange(env, "pitch must be at least " + std::to_string(rowBytes));
    const std::size_t span = arclight::nvenc::FrameSpan(shape);
    if (span > size_) ThrowRange(env, "the frame (" + std::to_string(span) + " bytes) runs past the end of this buffer (" + std::to_string(size_) + " bytes)");
    Napi::Uint8Array out = Napi::Uint8Array::New(env, arclight::nvenc::I420Size(shape));
    auto* worker = new DownloadWorker(env, allocation_, shape, out);
    Napi::Promise promise = worker->Promise();
    worker->Queue();
    return promise;
  }

  Napi::Value Free(const Napi::CallbackInfo& info) {
    // A download in flight holds its own reference: the memory goes when it finishes.
    allocation_.reset();
    return info.Env().Undefined();
  }

  Napi::Value DevicePtr(const Napi::CallbackInfo& info) {
    return Napi::BigInt::New(info.Env(), static_cast<std::uint64_t>(Live(info.Env()).ptr()));
  }

  Napi::Value Size(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), static_cast<double>(size_)); }

  std::shared_ptr<DeviceAllocation> allocation_;
  std::size_t size_ = 0;
};

}  // namespace

void RegisterCuda(Napi::Env env, Napi::Object exports) {
  exports.Set("cudaDeviceInfo", Napi::Function::New(env, CudaDeviceInfo, "cudaDeviceInfo"));
  exports.Set("CudaBuffer", CudaBufferObject::Define(env));
}

#endif

}  // namespace arclight::binding
