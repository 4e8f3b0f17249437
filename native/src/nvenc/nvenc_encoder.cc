#include "nvenc_encoder.h"

#include <dlfcn.h>
#include <ffnvcodec/nvEncodeAPI.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

#include "cuda_driver.h"

namespace arclight::nvenc {

namespace {

using CreateInstanceFn = NVENCSTATUS NVENCAPI(NV_ENCODE_API_FUNCTION_LIST*);
using MaxSupportedVersionFn = NVENCSTATUS NVENCAPI(uint32_t*);

// The version this build speaks, in NvEncodeAPIGetMaxSupportedVersion's encoding (major << 4 | minor).
constexpr uint32_t kBuildApi = (NVENCAPI_MAJOR_VERSION << 4) | NVENCAPI_MINOR_VERSION;
// Device pointers kept registered with NVENC at once; a model cycles through a few output buffers.
constexpr std::size_t kMaxRegistrations = 16;
// VUI code points (H.264 Table E-2..E-5, the same in H.265): video_format 5 = unspecified;
// 6 = SMPTE 170M (BT.601) for colour primaries, transfer and matrix.
constexpr uint32_t kVideoFormatUnspecified = 5;
constexpr uint32_t kSmpte170m = 6;

std::string ApiString(uint32_t v) { return std::to_string(v >> 4) + "." + std::to_string(v & 0xf); }

struct NvencLibrary {
  NV_ENCODE_API_FUNCTION_LIST api{};
  uint32_t driverApi = 0;
  bool ok = false;
  std::string error;
};

NvencLibrary LoadLibrary() {
  NvencLibrary lib;
  const char* override = std::getenv("ARCLIGHT_LIBNVIDIA_ENCODE");
  const char* path = override != nullptr && *override != '\0' ? override : "libnvidia-encode.so.1";
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    lib.error = std::string(path) + " could not be loaded (the NVIDIA driver's encode library is missing): " + (why ? why : "unknown error");
    return lib;
  }
  auto* maxVersion = reinterpret_cast<MaxSupportedVersionFn*>(dlsym(handle, "NvEncodeAPIGetMaxSupportedVersion"));
  auto* createInstance = reinterpret_cast<CreateInstanceFn*>(dlsym(handle, "NvEncodeAPICreateInstance"));
  if (maxVersion == nullptr || createInstance == nullptr) {
    lib.error = std::string(path) + " does not export the NVENC entry points";
    dlclose(handle);
    return lib;
  }
  if (maxVersion(&lib.driverApi) != NV_ENC_SUCCESS) {
    lib.error = "NvEncodeAPIGetMaxSupportedVersion failed";
    return lib;
  }
  if (lib.driverApi < kBuildApi) {
    lib.error = "the driver supports NVENC API " + ApiString(lib.driverApi) + "; this build needs " + ApiString(kBuildApi) +
                " or newer (update the NVIDIA driver)";
    return lib;
  }
  lib.api.version = NV_ENCODE_API_FUNCTION_LIST_VER;
  if (createInstance(&lib.api) != NV_ENC_SUCCESS || lib.api.nvEncOpenEncodeSessionEx == nullptr) {
    lib.error = "NvEncodeAPICreateInstance failed";
    return lib;
  }
  lib.ok = true;
  return lib;
}

const NvencLibrary& Library() {
  static std::once_flag once;
  static NvencLibrary* lib = nullptr;
  std::call_once(once, [] { lib = new NvencLibrary(LoadLibrary()); });
  return *lib;
}

const char* StatusName(NVENCSTATUS status) {
  switch (status) {
    case NV_ENC_SUCCESS: return "NV_ENC_SUCCESS";
    case NV_ENC_ERR_NO_ENCODE_DEVICE: return "NV_ENC_ERR_NO_ENCODE_DEVICE";
    case NV_ENC_ERR_UNSUPPORTED_DEVICE: return "NV_ENC_ERR_UNSUPPORTED_DEVICE";
    case NV_ENC_ERR_INVALID_ENCODERDEVICE: return "NV_ENC_ERR_INVALID_ENCODERDEVICE";
    case NV_ENC_ERR_INVALID_DEVICE: return "NV_ENC_ERR_INVALID_DEVICE";
    case NV_ENC_ERR_DEVICE_NOT_EXIST: return "NV_ENC_ERR_DEVICE_NOT_EXIST";
    case NV_ENC_ERR_INVALID_PTR: return "NV_ENC_ERR_INVALID_PTR";
    case NV_ENC_ERR_INVALID_EVENT: return "NV_ENC_ERR_INVALID_EVENT";
    case NV_ENC_ERR_INVALID_PARAM: return "NV_ENC_ERR_INVALID_PARAM";
    case NV_ENC_ERR_INVALID_CALL: return "NV_ENC_ERR_INVALID_CALL";
    case NV_ENC_ERR_OUT_OF_MEMORY: return "NV_ENC_ERR_OUT_OF_MEMORY";
    case NV_ENC_ERR_ENCODER_NOT_INITIALIZED: return "NV_ENC_ERR_ENCODER_NOT_INITIALIZED";
    case NV_ENC_ERR_UNSUPPORTED_PARAM: return "NV_ENC_ERR_UNSUPPORTED_PARAM";
    case NV_ENC_ERR_LOCK_BUSY: return "NV_ENC_ERR_LOCK_BUSY";
    case NV_ENC_ERR_NOT_ENOUGH_BUFFER: return "NV_ENC_ERR_NOT_ENOUGH_BUFFER";
    case NV_ENC_ERR_INVALID_VERSION: return "NV_ENC_ERR_INVALID_VERSION";
    case NV_ENC_ERR_MAP_FAILED: return "NV_ENC_ERR_MAP_FAILED";
    case NV_ENC_ERR_NEED_MORE_INPUT: return "NV_ENC_ERR_NEED_MORE_INPUT";
    case NV_ENC_ERR_ENCODER_BUSY: return "NV_ENC_ERR_ENCODER_BUSY";
    case NV_ENC_ERR_EVENT_NOT_REGISTERD: return "NV_ENC_ERR_EVENT_NOT_REGISTERD";
    case NV_ENC_ERR_GENERIC: return "NV_ENC_ERR_GENERIC";
    case NV_ENC_ERR_INCOMPATIBLE_CLIENT_KEY: return "NV_ENC_ERR_INCOMPATIBLE_CLIENT_KEY";
    case NV_ENC_ERR_UNIMPLEMENTED: return "NV_ENC_ERR_UNIMPLEMENTED";
    case NV_ENC_ERR_RESOURCE_REGISTER_FAILED: return "NV_ENC_ERR_RESOURCE_REGISTER_FAILED";
    case NV_ENC_ERR_RESOURCE_NOT_REGISTERED: return "NV_ENC_ERR_RESOURCE_NOT_REGISTERED";
    case NV_ENC_ERR_RESOURCE_NOT_MAPPED: return "NV_ENC_ERR_RESOURCE_NOT_MAPPED";
  }
  return "NV_ENC_ERR_(unknown)";
}

bool SameGuid(const GUID& a, const GUID& b) { return std::memcmp(&a, &b, sizeof(GUID)) == 0; }

GUID CodecGuid(Codec codec) { return codec == Codec::kH264 ? NV_ENC_CODEC_H264_GUID : NV_ENC_CODEC_HEVC_GUID; }

GUID PresetGuid(int preset) {
  switch (preset) {
    case 1: return NV_ENC_PRESET_P1_GUID;
    case 2: return NV_ENC_PRESET_P2_GUID;
    case 3: return NV_ENC_PRESET_P3_GUID;
    case 4: return NV_ENC_PRESET_P4_GUID;
    case 5: return NV_ENC_PRESET_P5_GUID;
    case 6: return NV_ENC_PRESET_P6_GUID;
    default: return NV_ENC_PRESET_P7_GUID;
  }
}

NV_ENC_BUFFER_FORMAT BufferFormat(InputFormat format) {
  switch (format) {
    case InputFormat::kNv12: return NV_ENC_BUFFER_FORMAT_NV12;
    case InputFormat::kI420: return NV_ENC_BUFFER_FORMAT_IYUV;
    case InputFormat::kBgra: return NV_ENC_BUFFER_FORMAT_ARGB;
    case InputFormat::kRgba: return NV_ENC_BUFFER_FORMAT_ABGR;
  }
  return NV_ENC_BUFFER_FORMAT_UNDEFINED;
}

// Bytes a frame spans at `pitch` bytes per luma row (chroma rows at half pitch for I420).
std::size_t SpanBytes(InputFormat format, std::size_t pitch, int height) {
  const std::size_t h = static_cast<std::size_t>(height);
  const std::size_t ch = (h + 1) / 2;
  switch (format) {
    case InputFormat::kNv12: return pitch * (h + ch);
    case InputFormat::kI420: return pitch * h + 2 * ((pitch + 1) / 2) * ch;
    case InputFormat::kBgra:
    case InputFormat::kRgba: return pitch * h;
  }
  return 0;
}

std::size_t RowBytes(InputFormat format, int width) {
  return format == InputFormat::kBgra || format == InputFormat::kRgba ? static_cast<std::size_t>(width) * 4
                                                                       : static_cast<std::size_t>(width);
}

void CopyRows(const std::uint8_t* src, std::size_t srcStride, std::uint8_t* dst, std::size_t dstStride, std::size_t rowBytes,
              std::size_t rows) {
  for (std::size_t r = 0; r < rows; r++) std::memcpy(dst + r * dstStride, src + r * srcStride, rowBytes);
}

// What H.264 and H.265 sessions share: IDRs only when asked for, parameter sets before every one
// (a viewer can join on any keyframe), one slice, optional intra refresh, BT.601 limited range
// signalled in the VUI (the runtime's frames are).
template <typename CodecConfig, typename Vui>
void ApplyStreamingSettings(CodecConfig& h, Vui& vui, const EncoderConfig& c) {
  h.idrPeriod = NVENC_INFINITE_GOPLENGTH;
  h.repeatSPSPPS = 1;
  h.outputAUD = 0;
  h.sliceMode = 0;
  h.sliceModeData = 0;
  h.enableIntraRefresh = c.intraRefreshPeriod > 0 ? 1 : 0;
  h.intraRefreshPeriod = static_cast<uint32_t>(c.intraRefreshPeriod);
  h.intraRefreshCnt = static_cast<uint32_t>(c.intraRefreshFrames);
  vui.videoSignalTypePresentFlag = 1;
  vui.videoFormat = kVideoFormatUnspecified;
  vui.videoFullRangeFlag = 0;
  vui.colourDescriptionPresentFlag = 1;
  vui.colourPrimaries = kSmpte170m;
  vui.transferCharacteristics = kSmpte170m;
  vui.colourMatrix = kSmpte170m;
}

}  // namespace

// A GPU's primary context and an NVENC session on it; released in reverse order of acquisition.
struct Encoder::Session {
  const CudaDriver* cuda = nullptr;
  const NV_ENCODE_API_FUNCTION_LIST* api = nullptr;
  CUdevice device = 0;
  int ordinal = 0;
  CUcontext context = nullptr;
  void* encoder = nullptr;
  NV_ENC_INITIALIZE_PARAMS init{};
  NV_ENC_CONFIG config{};
  NV_ENC_INPUT_PTR hostInput = nullptr;
  NV_ENC_OUTPUT_PTR bitstream = nullptr;
  // Registered device pointers, oldest first: (pointer, pitch) → registration.
  std::vector<std::pair<std::pair<std::uint64_t, int>, NV_ENC_REGISTERED_PTR>> registrations;

  std::string Error(const char* what, NVENCSTATUS status) const {
    std::string message = std::string(what) + " failed: " + StatusName(status);
    if (encoder != nullptr && api->nvEncGetLastErrorString != nullptr) {
      const char* last = api->nvEncGetLastErrorString(encoder);
      if (last != nullptr && *last != '\0') message += std::string(" (") + last + ")";
    }
    if (status == NV_ENC_ERR_NO_ENCODE_DEVICE || status == NV_ENC_ERR_UNSUPPORTED_DEVICE) {
      message += ": this GPU has no NVENC engine (H100, H200 and A100 have none)";
    }
    return message;
  }

  // Loads the libraries, retains the device's primary context and opens a session on it.
  bool Open(int deviceOrdinal, std::string* deviceName, std::string* error) {
    cuda = LoadCudaDriver(error);
    if (cuda == nullptr) return false;
    int count = 0;
    CUresult r = cuda->cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS) {
      *error = "cuDeviceGetCount failed: " + cuda->ErrorName(r);
      return false;
    }
    if (deviceOrdinal < 0 || deviceOrdinal >= count) {
      *error = "no CUDA device " + std::to_string(deviceOrdinal) + " (" + std::to_string(count) + " present)";
      return false;
    }
    ordinal = deviceOrdinal;
    if ((r = cuda->cuDeviceGet(&device, deviceOrdinal)) != CUDA_SUCCESS) {
      *error = "cuDeviceGet failed: " + cuda->ErrorName(r);
      return false;
    }
    char name[256] = {0};
    if (cuda->cuDeviceGetName(name, sizeof name - 1, device) == CUDA_SUCCESS && deviceName != nullptr) *deviceName = name;
    if ((r = cuda->cuDevicePrimaryCtxRetain(&context, device)) != CUDA_SUCCESS) {
      context = nullptr;
      *error = "cuDevicePrimaryCtxRetain failed: " + cuda->ErrorName(r);
      return false;
    }
    const NvencLibrary& lib = Library();
    if (!lib.ok) {
      *error = lib.error;
      return false;
    }
    api = &lib.api;
    NV_ENC_OPEN_ENCODE_SESSION_EX_PARAMS params{};
    params.version = NV_ENC_OPEN_ENCODE_SESSION_EX_PARAMS_VER;
    params.deviceType = NV_ENC_DEVICE_TYPE_CUDA;
    params.device = context;
    params.apiVersion = NVENCAPI_VERSION;
    ScopedContext current(*cuda, context);
    const NVENCSTATUS status = api->nvEncOpenEncodeSessionEx(&params, &encoder);
    if (status != NV_ENC_SUCCESS) {
      // The driver may hand back a session object to destroy even on failure.
      if (encoder != nullptr) api->nvEncDestroyEncoder(encoder);
      encoder = nullptr;
      *error = Error("opening an NVENC session", status);
      return false;
    }
    return true;
  }

  bool Supports(const GUID& codec, std::string* error) const {
    uint32_t count = 0;
    NVENCSTATUS status = api->nvEncGetEncodeGUIDCount(encoder, &count);
    if (status != NV_ENC_SUCCESS) {
      *error = Error("nvEncGetEncodeGUIDCount", status);
      return false;
    }
    std::vector<GUID> guids(count);
    uint32_t filled = 0;
    status = api->nvEncGetEncodeGUIDs(encoder, guids.data(), count, &filled);
    if (status != NV_ENC_SUCCESS) {
      *error = Error("nvEncGetEncodeGUIDs", status);
      return false;
    }
    for (uint32_t i = 0; i < filled && i < count; i++) {
      if (SameGuid(guids[i], codec)) return true;
    }
    return false;
  }

  ~Session() {
    if (cuda == nullptr) return;
    if (context != nullptr) {
      ScopedContext current(*cuda, context);
      if (encoder != nullptr) {
        for (auto& entry : registrations) api->nvEncUnregisterResource(encoder, entry.second);
        if (hostInput != nullptr) api->nvEncDestroyInputBuffer(encoder, hostInput);
        if (bitstream != nullptr) api->nvEncDestroyBitstreamBuffer(encoder, bitstream);
        api->nvEncDestroyEncoder(encoder);
      }
    }
    if (context != nullptr) cuda->cuDevicePrimaryCtxRelease(device);
  }
};

ProbeResult Probe(int device) {
  ProbeResult result;
  Encoder::Session session;
  std::string error;
  if (!session.Open(device, &result.deviceName, &error)) {
    result.reason = error;
    if (Library().driverApi != 0) result.driverApi = ApiString(Library().driverApi);
    return result;
  }
  result.driverApi = ApiString(Library().driverApi);
  ScopedContext current(*session.cuda, session.context);
  result.h264 = session.Supports(NV_ENC_CODEC_H264_GUID, &error);
  result.hevc = error.empty() && session.Supports(NV_ENC_CODEC_HEVC_GUID, &error);
  if (!error.empty()) {
    result.reason = error;
    return result;
  }
  if (!result.h264 && !result.hevc) {
    result.reason = "this GPU's NVENC encodes neither H.264 nor H.265";
    return result;
  }
  result.available = true;
  return result;
}

std::size_t Encoder::HostFrameSize(InputFormat format, int width, int height) {
  return SpanBytes(format, RowBytes(format, width), height);
}

Encoder::Encoder(std::unique_ptr<Session> session, const EncoderConfig& config)
    : session_(std::move(session)), config_(config) {}

Encoder::~Encoder() = default;

std::unique_ptr<Encoder> Encoder::Open(const EncoderConfig& c, std::string* error) {
  if (c.width < 16 || c.height < 16 || c.width > 8192 || c.height > 8192 || c.width % 2 != 0 || c.height % 2 != 0) {
    *error = "NVENC needs an even size from 16x16 to 8192x8192, got " + std::to_string(c.width) + "x" + std::to_string(c.height);
    return nullptr;
  }
  if (c.fps < 1 || c.fps > 240 || c.bitrateKbps < 1 || c.preset < 1 || c.preset > 7 || c.vbvMs < 1) {
    *error = "invalid NVENC settings (fps 1–240, bitrate > 0, preset P1–P7, VBV > 0 ms)";
    return nullptr;
  }
  if (c.intraRefreshPeriod < 0 || c.intraRefreshFrames < 0 ||
      (c.intraRefreshPeriod > 0 && (c.intraRefreshFrames < 1 || c.intraRefreshFrames >= c.intraRefreshPeriod))) {
    *error = "intra refresh needs 0 < frames < period";
    return nullptr;
  }
  auto s = std::make_unique<Session>();
  if (!s->Open(c.device, nullptr, error)) return nullptr;
  ScopedContext current(*s->cuda, s->context);
  const GUID codec = CodecGuid(c.codec);
  std::string supportError;
  if (!s->Supports(codec, &supportError)) {
    *error = supportError.empty() ? std::string("this GPU's NVENC does not encode ") + (c.codec == Codec::kH264 ? "H.264" : "H.265")
                                  : supportError;
    return nullptr;
  }
  const GUID preset = PresetGuid(c.preset);
  const NV_ENC_TUNING_INFO tuning =
      c.tuning == Tuning::kUltraLowLatency ? NV_ENC_TUNING_INFO_ULTRA_LOW_LATENCY : NV_ENC_TUNING_INFO_LOW_LATENCY;
  NV_ENC_PRESET_CONFIG presetConfig{};
  presetConfig.version = NV_ENC_PRESET_CONFIG_VER;
  presetConfig.presetCfg.version = NV_ENC_CONFIG_VER;
  NVENCSTATUS status = s->api->nvEncGetEncodePresetConfigEx(s->encoder, codec, preset, tuning, &presetConfig);
  if (status != NV_ENC_SUCCESS) {
    *error = s->Error("nvEncGetEncodePresetConfigEx", status);
    return nullptr;
  }
  NV_ENC_CONFIG& config = s->config;
  config = presetConfig.presetCfg;
  config.version = NV_ENC_CONFIG_VER;
  // Interactive streaming: no B-frames, no lookahead, IDRs only when asked for (a joiner, a PLI).
  config.gopLength = NVENC_INFINITE_GOPLENGTH;
  config.frameIntervalP = 1;
  NV_ENC_RC_PARAMS& rc = config.rcParams;
  const std::uint64_t bps = static_cast<std::uint64_t>(c.bitrateKbps) * 1000;
  rc.rateControlMode = c.rateControl == RateControl::kCbr ? NV_ENC_PARAMS_RC_CBR : NV_ENC_PARAMS_RC_VBR;
  rc.averageBitRate = static_cast<uint32_t>(bps);
  rc.maxBitRate = static_cast<uint32_t>(c.rateControl == RateControl::kCbr ? bps : bps * 3 / 2);
  rc.vbvBufferSize = static_cast<uint32_t>(bps * static_cast<std::uint64_t>(c.vbvMs) / 1000);
  rc.vbvInitialDelay = rc.vbvBufferSize;
  rc.enableLookahead = 0;
  rc.zeroReorderDelay = 1;
  if (c.codec == Codec::kH264) {
    NV_ENC_CONFIG_H264& h = config.encodeCodecConfig.h264Config;
    const bool high = c.h264Profile == H264Profile::kHigh;
    // NVENC's Baseline is Constrained Baseline (no FMO/ASO), what browsers' WebRTC stacks decode.
    config.profileGUID = high ? NV_ENC_H264_PROFILE_HIGH_GUID : NV_ENC_H264_PROFILE_BASELINE_GUID;
    h.entropyCodingMode = high ? NV_ENC_H264_ENTROPY_CODING_MODE_CABAC : NV_ENC_H264_ENTROPY_CODING_MODE_CAVLC;
    ApplyStreamingSettings(h, h.h264VUIParameters, c);
  } else {
    NV_ENC_CONFIG_HEVC& h = config.encodeCodecConfig.hevcConfig;
    config.profileGUID = NV_ENC_HEVC_PROFILE_MAIN_GUID;
    ApplyStreamingSettings(h, h.hevcVUIParameters, c);
  }
  NV_ENC_INITIALIZE_PARAMS& init = s->init;
  init.version = NV_ENC_INITIALIZE_PARAMS_VER;
  init.encodeGUID = codec;
  init.presetGUID = preset;
  init.tuningInfo = tuning;
  init.encodeWidth = init.darWidth = init.maxEncodeWidth = static_cast<uint32_t>(c.width);
  init.encodeHeight = init.darHeight = init.maxEncodeHeight = static_cast<uint32_t>(c.height);
  init.frameRateNum = static_cast<uint32_t>(c.fps);
  init.frameRateDen = 1;
  init.enablePTD = 1;
  init.enableEncodeAsync = 0;
  init.encodeConfig = &config;
  if ((status = s->api->nvEncInitializeEncoder(s->encoder, &init)) != NV_ENC_SUCCESS) {
    *error = s->Error("nvEncInitializeEncoder", status);
    return nullptr;
  }
  NV_ENC_CREATE_BITSTREAM_BUFFER bitstream{};
  bitstream.version = NV_ENC_CREATE_BITSTREAM_BUFFER_VER;
  if ((status = s->api->nvEncCreateBitstreamBuffer(s->encoder, &bitstream)) != NV_ENC_SUCCESS) {
    *error = s->Error("nvEncCreateBitstreamBuffer", status);
    return nullptr;
  }
  s->bitstream = bitstream.bitstreamBuffer;
  return std::unique_ptr<Encoder>(new Encoder(std::move(s), c));
}

bool Encoder::EncodeHost(const std::uint8_t* pixels, std::size_t size, bool forceIdr, std::uint64_t timestamp,
                         EncodedPicture* out, std::string* error) {
  const int w = config_.width;
  const int h = config_.height;
  if (size != HostFrameSize(config_.input, w, h)) {
    *error = "a host frame of " + std::to_string(size) + " bytes; " + std::to_string(w) + "x" + std::to_string(h) +
             " needs exactly " + std::to_string(HostFrameSize(config_.input, w, h));
    return false;
  }
  Session& s = *session_;
  ScopedContext current(*s.cuda, s.context);
  NVENCSTATUS status;
  if (s.hostInput == nullptr) {
    NV_ENC_CREATE_INPUT_BUFFER create{};
    create.version = NV_ENC_CREATE_INPUT_BUFFER_VER;
    create.width = static_cast<uint32_t>(w);
    create.height = static_cast<uint32_t>(h);
    create.bufferFmt = BufferFormat(config_.input);
    if ((status = s.api->nvEncCreateInputBuffer(s.encoder, &create)) != NV_ENC_SUCCESS) {
      *error = s.Error("nvEncCreateInputBuffer", status);
      return false;
    }
    s.hostInput = create.inputBuffer;
  }
  NV_ENC_LOCK_INPUT_BUFFER lock{};
  lock.version = NV_ENC_LOCK_INPUT_BUFFER_VER;
  lock.inputBuffer = s.hostInput;
  if ((status = s.api->nvEncLockInputBuffer(s.encoder, &lock)) != NV_ENC_SUCCESS) {
    *error = s.Error("nvEncLockInputBuffer", status);
    return false;
  }
  auto* dst = static_cast<std::uint8_t*>(lock.bufferDataPtr);
  const std::size_t pitch = lock.pitch;
  const std::size_t rows = static_cast<std::size_t>(h);
  const std::size_t width = static_cast<std::size_t>(w);
  switch (config_.input) {
    case InputFormat::kNv12:
      CopyRows(pixels, width, dst, pitch, width, rows);
      CopyRows(pixels + width * rows, width, dst + pitch * rows, pitch, width, rows / 2);
      break;
    case InputFormat::kI420: {
      // IYUV: U then V, each at half the luma pitch, right after the luma plane.
      const std::size_t cw = width / 2, ch = rows / 2, cpitch = (pitch + 1) / 2;
      CopyRows(pixels, width, dst, pitch, width, rows);
      CopyRows(pixels + width * rows, cw, dst + pitch * rows, cpitch, cw, ch);
      CopyRows(pixels + width * rows + cw * ch, cw, dst + pitch * rows + cpitch * ch, cpitch, cw, ch);
      break;
    }
    case InputFormat::kBgra:
    case InputFormat::kRgba:
      CopyRows(pixels, width * 4, dst, pitch, width * 4, rows);
      break;
  }
  s.api->nvEncUnlockInputBuffer(s.encoder, s.hostInput);
  return Encode(s.hostInput, config_.input, static_cast<int>(pitch), forceIdr, timestamp, out, error);
}

bool Encoder::ValidateDeviceFrame(const DeviceFrame& frame, std::string* error) const {
  const Session& s = *session_;
  if (frame.devicePtr == 0) {
    *error = "devicePtr is null";
    return false;
  }
  const std::size_t rowBytes = RowBytes(frame.format, config_.width);
  if (frame.pitch < 0 || static_cast<std::size_t>(frame.pitch) < rowBytes) {
    *error = "pitch " + std::to_string(frame.pitch) + " is less than a row (" + std::to_string(rowBytes) + " bytes)";
    return false;
  }
  ScopedContext current(*s.cuda, s.context);
  int ordinal = -1;
  CUresult r = s.cuda->cuPointerGetAttribute(&ordinal, kPointerAttributeDeviceOrdinal, frame.devicePtr);
  if (r != CUDA_SUCCESS) {
    *error = "devicePtr is not CUDA device memory: " + s.cuda->ErrorName(r);
    return false;
  }
  if (ordinal != s.ordinal) {
    *error = "devicePtr is on CUDA device " + std::to_string(ordinal) + "; this encoder runs on device " + std::to_string(s.ordinal);
    return false;
  }
  CUdeviceptr start = 0;
  std::size_t size = 0;
  if (s.cuda->cuPointerGetAttribute(&start, kPointerAttributeRangeStartAddr, frame.devicePtr) != CUDA_SUCCESS ||
      s.cuda->cuPointerGetAttribute(&size, kPointerAttributeRangeSize, frame.devicePtr) != CUDA_SUCCESS) {
    *error = "the allocation devicePtr points into could not be queried";
    return false;
  }
  const std::size_t span = SpanBytes(frame.format, static_cast<std::size_t>(frame.pitch), config_.height);
  if (frame.devicePtr < start || frame.devicePtr - start + span > size) {
    *error = "the frame (" + std::to_string(span) + " bytes at pitch " + std::to_string(frame.pitch) +
             ") runs past the end of its CUDA allocation (" + std::to_string(size) + " bytes)";
    return false;
  }
  return true;
}

bool Encoder::EncodeDevice(const DeviceFrame& frame, bool forceIdr, std::uint64_t timestamp, EncodedPicture* out,
                           std::string* error) {
  if (!ValidateDeviceFrame(frame, error)) return false;
  Session& s = *session_;
  ScopedContext current(*s.cuda, s.context);
  NVENCSTATUS status;
  // A pointer re-registers when its pitch or layout changes.
  const auto key = std::make_pair(frame.devicePtr, frame.pitch * 4 + static_cast<int>(frame.format));
  auto found = std::find_if(s.registrations.begin(), s.registrations.end(), [&](const auto& e) { return e.first == key; });
  NV_ENC_REGISTERED_PTR registered = nullptr;
  if (found != s.registrations.end()) {
    registered = found->second;
  } else {
    if (s.registrations.size() >= kMaxRegistrations) {
      s.api->nvEncUnregisterResource(s.encoder, s.registrations.front().second);
      s.registrations.erase(s.registrations.begin());
    }
    NV_ENC_REGISTER_RESOURCE reg{};
    reg.version = NV_ENC_REGISTER_RESOURCE_VER;
    reg.resourceType = NV_ENC_INPUT_RESOURCE_TYPE_CUDADEVICEPTR;
    reg.width = static_cast<uint32_t>(config_.width);
    reg.height = static_cast<uint32_t>(config_.height);
    reg.pitch = static_cast<uint32_t>(frame.pitch);
    reg.resourceToRegister = reinterpret_cast<void*>(static_cast<std::uintptr_t>(frame.devicePtr));
    reg.bufferFormat = BufferFormat(frame.format);
    reg.bufferUsage = NV_ENC_INPUT_IMAGE;
    if ((status = s.api->nvEncRegisterResource(s.encoder, &reg)) != NV_ENC_SUCCESS) {
      *error = s.Error("nvEncRegisterResource", status);
      return false;
    }
    registered = reg.registeredResource;
    s.registrations.emplace_back(key, registered);
  }
  NV_ENC_MAP_INPUT_RESOURCE map{};
  map.version = NV_ENC_MAP_INPUT_RESOURCE_VER;
  map.registeredResource = registered;
  if ((status = s.api->nvEncMapInputResource(s.encoder, &map)) != NV_ENC_SUCCESS) {
    *error = s.Error("nvEncMapInputResource", status);
    return false;
  }
  const bool ok = Encode(map.mappedResource, frame.format, frame.pitch, forceIdr, timestamp, out, error);
  s.api->nvEncUnmapInputResource(s.encoder, map.mappedResource);
  return ok;
}

bool Encoder::Encode(void* inputBuffer, InputFormat format, int pitch, bool forceIdr, std::uint64_t timestamp, EncodedPicture* out,
                     std::string* error) {
  Session& s = *session_;
  NV_ENC_PIC_PARAMS pic{};
  pic.version = NV_ENC_PIC_PARAMS_VER;
  pic.inputWidth = static_cast<uint32_t>(config_.width);
  pic.inputHeight = static_cast<uint32_t>(config_.height);
  pic.inputPitch = static_cast<uint32_t>(pitch);
  pic.inputBuffer = inputBuffer;
  pic.outputBitstream = s.bitstream;
  pic.bufferFmt = BufferFormat(format);
  pic.pictureStruct = NV_ENC_PIC_STRUCT_FRAME;
  pic.inputTimeStamp = timestamp;
  pic.frameIdx = frameIndex_++;
  if (forceIdr) pic.encodePicFlags = NV_ENC_PIC_FLAG_FORCEIDR | NV_ENC_PIC_FLAG_OUTPUT_SPSPPS;
  NVENCSTATUS status = s.api->nvEncEncodePicture(s.encoder, &pic);
  if (status != NV_ENC_SUCCESS) {
    // With no B-frames and no lookahead every picture comes straight out; NEED_MORE_INPUT would
    // mean the session was configured otherwise.
    *error = s.Error("nvEncEncodePicture", status);
    return false;
  }
  NV_ENC_LOCK_BITSTREAM lock{};
  lock.version = NV_ENC_LOCK_BITSTREAM_VER;
  lock.outputBitstream = s.bitstream;
  if ((status = s.api->nvEncLockBitstream(s.encoder, &lock)) != NV_ENC_SUCCESS) {
    *error = s.Error("nvEncLockBitstream", status);
    return false;
  }
  const auto* bytes = static_cast<const std::uint8_t*>(lock.bitstreamBufferPtr);
  out->data.assign(bytes, bytes + lock.bitstreamSizeInBytes);
  out->keyframe = lock.pictureType == NV_ENC_PIC_TYPE_IDR;
  out->timestamp = lock.outputTimeStamp;
  s.api->nvEncUnlockBitstream(s.encoder, s.bitstream);
  return true;
}

bool Encoder::SetBitrate(int kbps, std::string* error) {
  if (kbps < 1) {
    *error = "bitrate must be > 0 kbps";
    return false;
  }
  Session& s = *session_;
  ScopedContext current(*s.cuda, s.context);
  const std::uint64_t bps = static_cast<std::uint64_t>(kbps) * 1000;
  NV_ENC_RC_PARAMS& rc = s.config.rcParams;
  const NV_ENC_RC_PARAMS previous = rc;
  rc.averageBitRate = static_cast<uint32_t>(bps);
  rc.maxBitRate = static_cast<uint32_t>(config_.rateControl == RateControl::kCbr ? bps : bps * 3 / 2);
  // The VBV keeps its length in time.
  rc.vbvBufferSize = static_cast<uint32_t>(bps * static_cast<std::uint64_t>(config_.vbvMs) / 1000);
  rc.vbvInitialDelay = rc.vbvBufferSize;
  NV_ENC_RECONFIGURE_PARAMS params{};
  params.version = NV_ENC_RECONFIGURE_PARAMS_VER;
  params.reInitEncodeParams = s.init;
  params.reInitEncodeParams.encodeConfig = &s.config;
  params.resetEncoder = 0;
  params.forceIDR = 0;
  const NVENCSTATUS status = s.api->nvEncReconfigureEncoder(s.encoder, &params);
  if (status != NV_ENC_SUCCESS) {
    rc = previous;
    *error = s.Error("nvEncReconfigureEncoder", status);
    return false;
  }
  config_.bitrateKbps = kbps;
  return true;
}

}  // namespace arclight::nvenc
