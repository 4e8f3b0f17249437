// The Node-API binding: validates JS arguments (TypeError for wrong types and values, RangeError
// for wrong sizes — never a crash) and calls the pure C++ core in colour_convert.cc.
//
// Exports:
//   convertToYuv(src, dst, width, height, format, layout, scale, target, threads): undefined
//   version(): string
//   features(): { nvenc: <compiled in>, colourConvert: true }
//   trimAllocator(): boolean — glibc's malloc_trim(0); see TrimAllocator below
//   nvencProbe, openNvencEncoder: see nvenc_binding.cc; CudaBuffer, cudaDeviceInfo: cuda_binding.cc
#include <napi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "colour_convert.h"
#include "cuda_binding.h"
#include "nvenc_binding.h"

#ifndef ARCLIGHT_NATIVE_VERSION
#define ARCLIGHT_NATIVE_VERSION "0.0.0"
#endif

namespace {

using arclight::colour::ChannelOrder;
using arclight::colour::ConvertOptions;
using arclight::colour::SampleLayout;
using arclight::colour::YuvFormat;

[[noreturn]] void ThrowType(Napi::Env env, const std::string& message) {
  throw Napi::TypeError::New(env, "convertToYuv: " + message);
}
[[noreturn]] void ThrowRange(Napi::Env env, const std::string& message) {
  throw Napi::RangeError::New(env, "convertToYuv: " + message);
}

// A JS number that is an integer; anything else (non-number, NaN, fractional) is a TypeError.
int IntegerArg(const Napi::Value& value, const char* name, double min, double max) {
  Napi::Env env = value.Env();
  if (!value.IsNumber()) ThrowType(env, std::string(name) + " must be a number");
  const double d = value.As<Napi::Number>().DoubleValue();
  if (!std::isfinite(d) || std::trunc(d) != d) ThrowType(env, std::string(name) + " must be an integer");
  if (d < min || d > max) {
    ThrowRange(env, std::string(name) + " must be between " + std::to_string(static_cast<long long>(min)) +
                        " and " + std::to_string(static_cast<long long>(max)) + ", got " +
                        std::to_string(static_cast<long long>(d)));
  }
  return static_cast<int>(d);
}

std::string StringArg(const Napi::Value& value, const char* name, const char* allowed) {
  if (!value.IsString()) ThrowType(value.Env(), std::string(name) + " must be a string (" + allowed + ")");
  return value.As<Napi::String>().Utf8Value();
}

ChannelOrder FormatArg(const Napi::Value& value) {
  const std::string s = StringArg(value, "format", "'rgb', 'rgba' or 'bgr'");
  if (s == "rgb") return ChannelOrder::kRgb;
  if (s == "rgba") return ChannelOrder::kRgba;
  if (s == "bgr") return ChannelOrder::kBgr;
  ThrowType(value.Env(), "format must be 'rgb', 'rgba' or 'bgr', got '" + s + "'");
}

SampleLayout LayoutArg(const Napi::Value& value) {
  const std::string s = StringArg(value, "layout", "'hwc' or 'chw'");
  if (s == "hwc") return SampleLayout::kInterleaved;
  if (s == "chw") return SampleLayout::kPlanar;
  ThrowType(value.Env(), "layout must be 'hwc' or 'chw', got '" + s + "'");
}

YuvFormat TargetArg(const Napi::Value& value) {
  const std::string s = StringArg(value, "target", "'i420' or 'nv12'");
  if (s == "i420") return YuvFormat::kI420;
  if (s == "nv12") return YuvFormat::kNv12;
  ThrowType(value.Env(), "target must be 'i420' or 'nv12', got '" + s + "'");
}

bool IsTypedArrayOf(const Napi::Value& value, napi_typedarray_type type) {
  return value.IsTypedArray() && value.As<Napi::TypedArray>().TypedArrayType() == type;
}

Napi::Value ConvertToYuv(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 9) {
    ThrowType(env, "expected 9 arguments (src, dst, width, height, format, layout, scale, target, threads), got " +
                       std::to_string(info.Length()));
  }
  const bool isFloat = IsTypedArrayOf(info[0], napi_float32_array);
  if (!isFloat && !IsTypedArrayOf(info[0], napi_uint8_array)) {
    ThrowType(env, "src must be a Uint8Array or a Float32Array");
  }
  if (!IsTypedArrayOf(info[1], napi_uint8_array)) ThrowType(env, "dst must be a Uint8Array");

  ConvertOptions o;
  o.width = IntegerArg(info[2], "width", 1, arclight::colour::kMaxDimension);
  o.height = IntegerArg(info[3], "height", 1, arclight::colour::kMaxDimension);
  o.order = FormatArg(info[4]);
  o.layout = LayoutArg(info[5]);
  if (isFloat) {
    if (!info[6].IsNumber()) ThrowType(env, "scale must be a number (1 or 255) for Float32Array input");
    const double scale = info[6].As<Napi::Number>().DoubleValue();
    if (scale != 1 && scale != 255) ThrowType(env, "scale must be 1 or 255, got " + std::to_string(scale));
    o.scale = static_cast<float>(scale);
  }
  o.target = TargetArg(info[7]);
  if (!info[8].IsNumber()) ThrowType(env, "threads must be a number");
  const double threads = info[8].As<Napi::Number>().DoubleValue();
  if (!(threads >= 1) || std::trunc(threads) != threads) ThrowType(env, "threads must be an integer >= 1");
  o.threads = static_cast<int>(std::min<double>(threads, arclight::colour::kMaxThreads));

  // Lengths are in elements; a detached buffer reads as length 0 and fails here.
  const std::size_t wantSrc = arclight::colour::SourceSampleCount(o.width, o.height, o.order);
  const std::size_t wantDst = arclight::colour::YuvFrameSize(o.width, o.height);
  const std::size_t srcLength = info[0].As<Napi::TypedArray>().ElementLength();
  const std::size_t dstLength = info[1].As<Napi::TypedArray>().ElementLength();
  if (srcLength != wantSrc) {
    ThrowRange(env, "src holds " + std::to_string(srcLength) + " samples; " + std::to_string(o.width) + "x" +
                        std::to_string(o.height) + " " + StringArg(info[4], "format", "") + " needs exactly " +
                        std::to_string(wantSrc));
  }
  if (dstLength != wantDst) {
    ThrowRange(env, "dst holds " + std::to_string(dstLength) + " bytes; " + std::to_string(o.width) + "x" +
                        std::to_string(o.height) + " 4:2:0 needs exactly " + std::to_string(wantDst));
  }

  std::uint8_t* dst = info[1].As<Napi::Uint8Array>().Data();
  if (isFloat) {
    arclight::colour::ConvertToYuv(info[0].As<Napi::Float32Array>().Data(), dst, o);
  } else {
    arclight::colour::ConvertToYuv(info[0].As<Napi::Uint8Array>().Data(), dst, o);
  }
  return env.Undefined();
}

Napi::Value Version(const Napi::CallbackInfo& info) { return Napi::String::New(info.Env(), ARCLIGHT_NATIVE_VERSION); }

Napi::Value Features(const Napi::CallbackInfo& info) {
  Napi::Object features = Napi::Object::New(info.Env());
  features.Set("nvenc", arclight::binding::NvencCompiledIn());
  features.Set("colourConvert", true);
  return features;
}

// glibc's malloc_trim(0): gives the pages of every free chunk in every arena back to the system.
// Why the runtime calls it (after an encoder is freed): runtime/native/allocator.ts. Returns
// whether memory was released; false without glibc.
Napi::Value TrimAllocator(const Napi::CallbackInfo& info) {
#if defined(__GLIBC__)
  return Napi::Boolean::New(info.Env(), malloc_trim(0) == 1);
#else
  return Napi::Boolean::New(info.Env(), false);
#endif
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("convertToYuv", Napi::Function::New(env, ConvertToYuv, "convertToYuv"));
  exports.Set("version", Napi::Function::New(env, Version, "version"));
  exports.Set("features", Napi::Function::New(env, Features, "features"));
  exports.Set("trimAllocator", Napi::Function::New(env, TrimAllocator, "trimAllocator"));
  arclight::binding::RegisterNvenc(env, exports);
  arclight::binding::RegisterCuda(env, exports);
  return exports;
}

}  // namespace

NODE_API_MODULE(arclight_native, Init)
