// The Node-API side of the NVENC encoder (nvenc/nvenc_encoder.h). Everything that may take long —
// loading the driver, opening a session, encoding — runs on libuv's thread pool and answers with a
// promise; argument mistakes throw at once (TypeError / RangeError), never crash.
//
// Exports:
//   nvencProbe(device = 0): Promise<{ available, reason?, deviceName?, codecs, driverApi?, compiledIn }>
//   openNvencEncoder(options): Promise<NvencEncoder>
//   NvencEncoder#encode(frame: Uint8Array | { devicePtr: bigint, pitch: number, format? }, forceIdr, timestampUs)
//       : Promise<{ data: Buffer, keyframe: boolean, timestampUs: number }>   (one at a time)
//   NvencEncoder#setBitrate(kbps), NvencEncoder#close()
// (CudaBuffer and cudaDeviceInfo: cuda_binding.cc.)
#include "nvenc_binding.h"

#include "binding_args.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#ifdef ARCLIGHT_HAVE_NVENC
#include "nvenc/cuda_driver.h"
#include "nvenc/nvenc_encoder.h"
#endif

namespace arclight::binding {

namespace {

constexpr const char* kCompiledOut =
    "compiled out: the NVENC headers (Debian libffmpeg-nvenc-dev, /usr/include/ffnvcodec) were not found when the addon "
    "was built";

}  // namespace

#ifndef ARCLIGHT_HAVE_NVENC

bool NvencCompiledIn() { return false; }

void RegisterNvenc(Napi::Env env, Napi::Object exports) {
  exports.Set("nvencProbe", Napi::Function::New(env, [](const Napi::CallbackInfo& info) -> Napi::Value {
    DeviceArg(info, 0);
    Napi::Object result = Napi::Object::New(info.Env());
    result.Set("available", false);
    result.Set("reason", kCompiledOut);
    result.Set("codecs", Napi::Array::New(info.Env()));
    result.Set("compiledIn", false);
    auto deferred = Napi::Promise::Deferred::New(info.Env());
    deferred.Resolve(result);
    return deferred.Promise();
  }, "nvencProbe"));
  exports.Set("openNvencEncoder", Napi::Function::New(env, [](const Napi::CallbackInfo& info) -> Napi::Value {
    auto deferred = Napi::Promise::Deferred::New(info.Env());
    deferred.Reject(Napi::Error::New(info.Env(), std::string("NVENC is ") + kCompiledOut).Value());
    return deferred.Promise();
  }, "openNvencEncoder"));
}

#else

namespace {

using arclight::nvenc::Codec;
using arclight::nvenc::DeviceFrame;
using arclight::nvenc::EncodedPicture;
using arclight::nvenc::Encoder;
using arclight::nvenc::EncoderConfig;
using arclight::nvenc::InputFormat;

std::string StringOption(Napi::Env env, const Napi::Value& value, const std::string& name) {
  if (!value.IsString()) ThrowType(env, name + " must be a string");
  return value.As<Napi::String>().Utf8Value();
}

InputFormat ParseInput(Napi::Env env, const Napi::Value& value, const std::string& name) {
  const std::string input = StringOption(env, value, name);
  if (input == "nv12") return InputFormat::kNv12;
  if (input == "i420") return InputFormat::kI420;
  if (input == "bgra") return InputFormat::kBgra;
  if (input == "rgba") return InputFormat::kRgba;
  ThrowType(env, name + " must be 'nv12', 'i420', 'bgra' or 'rgba', got '" + input + "'");
}

// What a JS encoder object and its in-flight encode share: the encode may outlive close() (and the
// object itself), so the last holder frees the NVENC session.
struct EncoderState {
  std::mutex mutex;
  std::unique_ptr<Encoder> encoder;
  bool busy = false;
  bool closed = false;
  int pendingBitrateKbps = 0;
};

EncoderConfig ParseConfig(Napi::Env env, const Napi::Value& value) {
  if (!value.IsObject()) ThrowType(env, "openNvencEncoder: options must be an object");
  Napi::Object o = value.As<Napi::Object>();
  // Every key must be one this parser reads: a misspelt option fails loudly, and the TypeScript
  // declaration (runtime/native/native-addon.ts) is tested against this list.
  static const char* const kKnown[] = {"codec", "width", "height", "fps", "bitrateKbps", "input", "rateControl", "preset",
                                       "tuning", "vbvMs", "profile", "intraRefresh", "device"};
  Napi::Array keys = o.GetPropertyNames();
  for (uint32_t i = 0; i < keys.Length(); i++) {
    const std::string key = keys.Get(i).ToString().Utf8Value();
    bool known = false;
    for (const char* k : kKnown) known = known || key == k;
    if (!known) ThrowType(env, "openNvencEncoder: unknown option '" + key + "'");
  }
  EncoderConfig c;
  const std::string codec = StringOption(env, o.Get("codec"), "codec");
  if (codec == "h264") c.codec = Codec::kH264;
  else if (codec == "h265") c.codec = Codec::kHevc;
  else ThrowType(env, "codec must be 'h264' or 'h265', got '" + codec + "'");
  c.width = IntegerOption(env, o.Get("width"), "width", 16, 8192);
  c.height = IntegerOption(env, o.Get("height"), "height", 16, 8192);
  if (c.width % 2 != 0 || c.height % 2 != 0) ThrowRange(env, "width and height must be even (4:2:0)");
  c.fps = IntegerOption(env, o.Get("fps"), "fps", 1, 240);
  c.bitrateKbps = IntegerOption(env, o.Get("bitrateKbps"), "bitrateKbps", 1, 800000);
  c.input = ParseInput(env, o.Get("input"), "input");
  if (!o.Get("rateControl").IsUndefined()) {
    const std::string rc = StringOption(env, o.Get("rateControl"), "rateControl");
    if (rc == "cbr") c.rateControl = arclight::nvenc::RateControl::kCbr;
    else if (rc == "vbr") c.rateControl = arclight::nvenc::RateControl::kVbr;
    else ThrowType(env, "rateControl must be 'cbr' or 'vbr', got '" + rc + "'");
  }
  if (!o.Get("preset").IsUndefined()) c.preset = IntegerOption(env, o.Get("preset"), "preset", 1, 7);
  if (!o.Get("tuning").IsUndefined()) {
    const std::string t = StringOption(env, o.Get("tuning"), "tuning");
    if (t == "low-latency") c.tuning = arclight::nvenc::Tuning::kLowLatency;
    else if (t == "ultra-low-latency") c.tuning = arclight::nvenc::Tuning::kUltraLowLatency;
    else ThrowType(env, "tuning must be 'low-latency' or 'ultra-low-latency', got '" + t + "'");
  }
  if (!o.Get("vbvMs").IsUndefined()) c.vbvMs = IntegerOption(env, o.Get("vbvMs"), "vbvMs", 1, 10000);
  if (!o.Get("profile").IsUndefined()) {
    const std::string p = StringOption(env, o.Get("profile"), "profile");
    if (p == "constrained-baseline") c.h264Profile = arclight::nvenc::H264Profile::kConstrainedBaseline;
    else if (p == "high") c.h264Profile = arclight::nvenc::H264Profile::kHigh;
    else ThrowType(env, "profile must be 'constrained-baseline' or 'high', got '" + p + "'");
    if (c.codec != Codec::kH264) ThrowType(env, "profile is an H.264 option");
  }
  const Napi::Value refresh = o.Get("intraRefresh");
  if (!refresh.IsUndefined() && !(refresh.IsBoolean() && !refresh.As<Napi::Boolean>().Value())) {
    if (!refresh.IsObject()) ThrowType(env, "intraRefresh must be false or { period, frames }");
    Napi::Object r = refresh.As<Napi::Object>();
    c.intraRefreshPeriod = IntegerOption(env, r.Get("period"), "intraRefresh.period", 2, 100000);
    c.intraRefreshFrames = IntegerOption(env, r.Get("frames"), "intraRefresh.frames", 1, c.intraRefreshPeriod - 1);
  }
  if (!o.Get("device").IsUndefined()) c.device = IntegerOption(env, o.Get("device"), "device", 0, 63);
  return c;
}

// ---------------------------------------------------------------------------------------------
// nvencProbe

class ProbeWorker : public Napi::AsyncWorker {
 public:
  ProbeWorker(Napi::Env env, int device) : Napi::AsyncWorker(env), device_(device), deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }
  void Execute() override { result_ = arclight::nvenc::Probe(device_); }
  void OnOK() override {
    Napi::Env env = Env();
    Napi::Object out = Napi::Object::New(env);
    out.Set("available", result_.available);
    if (!result_.available) out.Set("reason", result_.reason);
    if (!result_.deviceName.empty()) out.Set("deviceName", result_.deviceName);
    Napi::Array codecs = Napi::Array::New(env);
    uint32_t n = 0;
    if (result_.h264) codecs.Set(n++, "h264");
    if (result_.hevc) codecs.Set(n++, "h265");
    out.Set("codecs", codecs);
    if (!result_.driverApi.empty()) out.Set("driverApi", result_.driverApi);
    out.Set("compiledIn", true);
    deferred_.Resolve(out);
  }

 private:
  int device_;
  Napi::Promise::Deferred deferred_;
  arclight::nvenc::ProbeResult result_;
};

Napi::Value NvencProbe(const Napi::CallbackInfo& info) {
  auto* worker = new ProbeWorker(info.Env(), DeviceArg(info, 0));
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

// ---------------------------------------------------------------------------------------------
// NvencEncoder

class NvencEncoderObject : public Napi::ObjectWrap<NvencEncoderObject> {
 public:
  static Napi::FunctionReference* constructor;

  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "NvencEncoder",
                       {InstanceMethod("encode", &NvencEncoderObject::Encode),
                        InstanceMethod("setBitrate", &NvencEncoderObject::SetBitrate),
                        InstanceMethod("close", &NvencEncoderObject::Close),
                        InstanceAccessor("closed", &NvencEncoderObject::Closed, nullptr)});
  }

  // Made only by openNvencEncoder, which passes the opened encoder as an External.
  explicit NvencEncoderObject(const Napi::CallbackInfo& info) : Napi::ObjectWrap<NvencEncoderObject>(info) {
    if (info.Length() != 1 || !info[0].IsExternal()) ThrowType(info.Env(), "NvencEncoder: use openNvencEncoder(options)");
    auto* opened = info[0].As<Napi::External<std::unique_ptr<Encoder>>>().Data();
    state_ = std::make_shared<EncoderState>();
    state_->encoder = std::move(*opened);
  }

  ~NvencEncoderObject() override { Release(); }

 private:
  Napi::Value Encode(const Napi::CallbackInfo& info);

  Napi::Value SetBitrate(const Napi::CallbackInfo& info) {
    const int kbps = IntegerOption(info.Env(), info[0], "bitrateKbps", 1, 800000);
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (state_->closed) throw Napi::Error::New(info.Env(), "NvencEncoder is closed");
    // Applied on the encode thread before the next frame: reconfiguring here could wait on an encode.
    state_->pendingBitrateKbps = kbps;
    return info.Env().Undefined();
  }

  Napi::Value Close(const Napi::CallbackInfo& info) {
    Release();
    return info.Env().Undefined();
  }

  Napi::Value Closed(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), state_->closed); }

  void Release() {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->closed = true;
    // An encode in flight frees the session when it finishes.
    if (!state_->busy) state_->encoder.reset();
  }

  std::shared_ptr<EncoderState> state_;
};

Napi::FunctionReference* NvencEncoderObject::constructor = nullptr;

class EncodeWorker : public Napi::AsyncWorker {
 public:
  EncodeWorker(Napi::Env env, std::shared_ptr<EncoderState> state, Napi::Value keepAlive, const std::uint8_t* pixels,
               std::size_t size, DeviceFrame device, bool forceIdr, std::uint64_t timestamp)
      : Napi::AsyncWorker(env),
        deferred_(Napi::Promise::Deferred::New(env)),
        state_(std::move(state)),
        pixels_(pixels),
        size_(size),
        device_(device),
        forceIdr_(forceIdr),
        timestamp_(timestamp) {
    // The caller's pixels are read on the worker thread: hold them until then.
    if (keepAlive.IsObject()) keepAlive_ = Napi::Persistent(keepAlive.As<Napi::Object>());
  }

  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    std::lock_guard<std::mutex> lock(state_->mutex);
    Encoder* encoder = state_->encoder.get();
    if (encoder == nullptr) {
      SetError("NvencEncoder is closed");
      return;
    }
    std::string error;
    if (state_->pendingBitrateKbps > 0) {
      const int kbps = state_->pendingBitrateKbps;
      state_->pendingBitrateKbps = 0;
      if (!encoder->SetBitrate(kbps, &error)) {
        SetError(error);
        return;
      }
    }
    const bool ok = pixels_ != nullptr ? encoder->EncodeHost(pixels_, size_, forceIdr_, timestamp_, &picture_, &error)
                                       : encoder->EncodeDevice(device_, forceIdr_, timestamp_, &picture_, &error);
    if (!ok) SetError(error);
  }

  void OnOK() override {
    Finish();
    Napi::Env env = Env();
    Napi::Object out = Napi::Object::New(env);
    out.Set("data", Napi::Buffer<std::uint8_t>::Copy(env, picture_.data.data(), picture_.data.size()));
    out.Set("keyframe", picture_.keyframe);
    out.Set("timestampUs", static_cast<double>(picture_.timestamp));
    deferred_.Resolve(out);
  }

  void OnError(const Napi::Error& error) override {
    Finish();
    deferred_.Reject(error.Value());
  }

 private:
  void Finish() {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->busy = false;
    if (state_->closed) state_->encoder.reset();
  }

  Napi::Promise::Deferred deferred_;
  std::shared_ptr<EncoderState> state_;
  Napi::ObjectReference keepAlive_;
  const std::uint8_t* pixels_;
  std::size_t size_;
  DeviceFrame device_;
  bool forceIdr_;
  std::uint64_t timestamp_;
  EncodedPicture picture_;
};

Napi::Value NvencEncoderObject::Encode(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 3) ThrowType(env, "encode(frame, forceIdr, timestampUs): expected 3 arguments");
  if (!info[1].IsBoolean()) ThrowType(env, "forceIdr must be a boolean");
  if (!info[2].IsNumber()) ThrowType(env, "timestampUs must be a number");
  const double ts = info[2].As<Napi::Number>().DoubleValue();
  if (!(ts >= 0) || !std::isfinite(ts)) ThrowRange(env, "timestampUs must be a finite number >= 0");
  const bool forceIdr = info[1].As<Napi::Boolean>().Value();

  std::lock_guard<std::mutex> lock(state_->mutex);
  if (state_->closed || !state_->encoder) throw Napi::Error::New(env, "NvencEncoder is closed");
  if (state_->busy) throw Napi::Error::New(env, "NvencEncoder: one encode at a time (await the previous one)");
  const EncoderConfig& config = state_->encoder->config();

  const std::uint8_t* pixels = nullptr;
  std::size_t size = 0;
  DeviceFrame device;
  if (info[0].IsTypedArray() && info[0].As<Napi::TypedArray>().TypedArrayType() == napi_uint8_array) {
    Napi::Uint8Array array = info[0].As<Napi::Uint8Array>();
    size = array.ElementLength();
    const std::size_t want = Encoder::HostFrameSize(config.input, config.width, config.height);
    if (size != want) {
      ThrowRange(env, "frame holds " + std::to_string(size) + " bytes; " + std::to_string(config.width) + "x" +
                          std::to_string(config.height) + " needs exactly " + std::to_string(want));
    }
    pixels = array.Data();
  } else if (info[0].IsObject() && info[0].As<Napi::Object>().Get("devicePtr").IsBigInt()) {
    Napi::Object frame = info[0].As<Napi::Object>();
    bool lossless = false;
    device.devicePtr = frame.Get("devicePtr").As<Napi::BigInt>().Uint64Value(&lossless);
    if (!lossless) ThrowRange(env, "devicePtr must fit in 64 bits");
    device.pitch = IntegerOption(env, frame.Get("pitch"), "pitch", 1, 1 << 20);
    device.format = config.input;
    if (!frame.Get("format").IsUndefined()) device.format = ParseInput(env, frame.Get("format"), "frame.format");
    std::string error;
    if (!state_->encoder->ValidateDeviceFrame(device, &error)) ThrowRange(env, error);
  } else {
    ThrowType(env, "frame must be a Uint8Array (host pixels) or { devicePtr: bigint, pitch: number } (CUDA memory)");
  }
  state_->busy = true;
  auto* worker = new EncodeWorker(env, state_, info[0], pixels, size, device, forceIdr, static_cast<std::uint64_t>(ts));
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

// ---------------------------------------------------------------------------------------------
// openNvencEncoder

class OpenWorker : public Napi::AsyncWorker {
 public:
  OpenWorker(Napi::Env env, EncoderConfig config)
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), config_(config) {}
  Napi::Promise Promise() { return deferred_.Promise(); }
  void Execute() override {
    std::string error;
    encoder_ = Encoder::Open(config_, &error);
    if (!encoder_) SetError(error);
  }
  void OnOK() override {
    Napi::Env env = Env();
    auto external = Napi::External<std::unique_ptr<Encoder>>::New(env, &encoder_);
    deferred_.Resolve(NvencEncoderObject::constructor->New({external}));
  }
  void OnError(const Napi::Error& error) override { deferred_.Reject(error.Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  EncoderConfig config_;
  std::unique_ptr<Encoder> encoder_;
};

Napi::Value OpenNvencEncoder(const Napi::CallbackInfo& info) {
  const EncoderConfig config = ParseConfig(info.Env(), info.Length() > 0 ? info[0] : info.Env().Undefined());
  auto* worker = new OpenWorker(info.Env(), config);
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

}  // namespace

bool NvencCompiledIn() { return true; }

void RegisterNvenc(Napi::Env env, Napi::Object exports) {
  Napi::Function encoderClass = NvencEncoderObject::Define(env);
  // Lives as long as the addon (the process): the environment's cleanup frees nothing here.
  NvencEncoderObject::constructor = new Napi::FunctionReference(Napi::Persistent(encoderClass));
  // Not exported: instances come from openNvencEncoder only.
  exports.Set("nvencProbe", Napi::Function::New(env, NvencProbe, "nvencProbe"));
  exports.Set("openNvencEncoder", Napi::Function::New(env, OpenNvencEncoder, "openNvencEncoder"));
}

#endif

}  // namespace arclight::binding
