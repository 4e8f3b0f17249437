// A low-latency H.264/H.265 encoder on NVENC, free of Node: the N-API binding (nvenc_binding.cc)
// and the C++ tests drive it. libnvidia-encode.so.1 is loaded at run time (ARCLIGHT_LIBNVIDIA_ENCODE
// overrides the path), like libcuda.so.1 (cuda_driver.h).
//
// One encoder is one NVENC session on one GPU's primary context (the context CUDA runtime users,
// e.g. onnxruntime's CUDA provider, allocate in, so their device pointers are valid here). It is
// not thread-safe: the binding runs one call at a time per encoder.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace arclight::nvenc {

enum class Codec { kH264, kHevc };
enum class RateControl { kCbr, kVbr };
enum class Tuning { kLowLatency, kUltraLowLatency };
// Host and device input layouts. kBgra is bytes B,G,R,A in memory (NVENC's ARGB); kRgba is
// R,G,B,A (NVENC's ABGR).
enum class InputFormat { kNv12, kI420, kBgra, kRgba };
enum class H264Profile { kConstrainedBaseline, kHigh };

struct EncoderConfig {
  Codec codec = Codec::kH264;
  int width = 0;
  int height = 0;
  int fps = 30;
  int bitrateKbps = 2500;
  RateControl rateControl = RateControl::kCbr;
  // NVENC presets P1 (fastest) .. P7; low-latency streaming uses P1–P4.
  int preset = 2;
  Tuning tuning = Tuning::kUltraLowLatency;
  // VBV buffer in milliseconds of the target rate (500: room for an on-demand IDR without bursts
  // building latency, as the software encoders are configured).
  int vbvMs = 500;
  // Gradual intra refresh instead of relying on IDRs after loss: every `intraRefreshPeriod` frames
  // a wave of intra macroblocks sweeps the picture over `intraRefreshFrames` frames. 0 = off.
  int intraRefreshPeriod = 0;
  int intraRefreshFrames = 0;
  H264Profile h264Profile = H264Profile::kConstrainedBaseline;
  InputFormat input = InputFormat::kI420;
  int device = 0;
};

struct ProbeResult {
  bool available = false;
  std::string reason;  // why not, when not available
  std::string deviceName;
  bool h264 = false;
  bool hevc = false;
  // The newest NVENC API the driver supports, "major.minor".
  std::string driverApi;
};

// Opens (and closes) a session on `device` to see whether NVENC works there: the driver libraries
// load on GPUs with no NVENC engine (H100, H200) and the session is what fails.
ProbeResult Probe(int device);

struct EncodedPicture {
  std::vector<std::uint8_t> data;  // Annex-B access unit
  bool keyframe = false;           // IDR (H.264) / IRAP (H.265)
  std::uint64_t timestamp = 0;     // the input's, passed through
};

// A frame in GPU memory: `devicePtr` in the encoder's device's memory, rows `pitch` bytes apart
// (NV12: the UV plane follows the luma plane at devicePtr + pitch * height).
// NVENC takes the input format per picture, so a device frame may be in another layout than the
// encoder's host input (a model typically writes RGBA or NV12 on the GPU).
struct DeviceFrame {
  std::uint64_t devicePtr = 0;
  int pitch = 0;
  InputFormat format = InputFormat::kNv12;
};

class Encoder {
 public:
  // nullptr with `*error` set when the session cannot be opened or configured.
  static std::unique_ptr<Encoder> Open(const EncoderConfig& config, std::string* error);
  ~Encoder();
  Encoder(const Encoder&) = delete;
  Encoder& operator=(const Encoder&) = delete;

  // Host memory, tightly packed in the configured input format (HostFrameSize bytes).
  bool EncodeHost(const std::uint8_t* pixels, std::size_t size, bool forceIdr, std::uint64_t timestamp,
                  EncodedPicture* out, std::string* error);
  // GPU memory: registered with NVENC once per distinct pointer (a model usually cycles through a
  // few output buffers) and mapped per frame, so the picture never crosses to the host.
  bool EncodeDevice(const DeviceFrame& frame, bool forceIdr, std::uint64_t timestamp, EncodedPicture* out,
                    std::string* error);
  // Takes effect from the next frame, without re-initialising the session (no IDR).
  bool SetBitrate(int kbps, std::string* error);
  // Checks a device frame against the CUDA allocation it points into (right device, inside the
  // allocation), so a bad pointer is an error, not a GPU fault.
  bool ValidateDeviceFrame(const DeviceFrame& frame, std::string* error) const;

  const EncoderConfig& config() const { return config_; }
  static std::size_t HostFrameSize(InputFormat format, int width, int height);

 private:
  friend ProbeResult Probe(int device);
  struct Session;
  explicit Encoder(std::unique_ptr<Session> session, const EncoderConfig& config);
  bool Encode(void* inputBuffer, InputFormat format, int pitch, bool forceIdr, std::uint64_t timestamp, EncodedPicture* out,
              std::string* error);

  std::unique_ptr<Session> session_;
  EncoderConfig config_;
  std::uint32_t frameIndex_ = 0;
};

}  // namespace arclight::nvenc
