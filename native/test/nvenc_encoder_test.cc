// CTest for the NVENC encoder core (native/src/nvenc/) against the FAKE driver pair built beside
// it (native/test/fake-driver/: no GPU exists on CI). Usage: nvenc_encoder_test <libcuda> <libnvidia-encode>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "nvenc/cuda_driver.h"
#include "nvenc/nvenc_encoder.h"

namespace nv = arclight::nvenc;

static int failures = 0;
#define CHECK(cond, ...)                                               \
  do {                                                                 \
    if (!(cond)) {                                                     \
      std::fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                               \
      std::fprintf(stderr, "\n");                                      \
      failures++;                                                      \
    }                                                                  \
  } while (0)

// First NAL unit type after each start code of an H.264 access unit.
static std::vector<int> NalTypes(const std::vector<std::uint8_t>& data) {
  std::vector<int> types;
  for (std::size_t i = 0; i + 3 < data.size(); i++) {
    if (data[i] == 0 && data[i + 1] == 0 && data[i + 2] == 1) {
      types.push_back(data[i + 3] & 0x1f);
      i += 3;
    }
  }
  return types;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <fake libcuda.so.1> <fake libnvidia-encode.so.1>\n", argv[0]);
    return 2;
  }
  setenv("ARCLIGHT_LIBCUDA", argv[1], 1);
  setenv("ARCLIGHT_LIBNVIDIA_ENCODE", argv[2], 1);

  // The H100/H200 case first: libraries load, the session is what fails.
  setenv("ARCLIGHT_FAKE_NVENC_MODE", "no-encoder", 1);
  nv::ProbeResult none = nv::Probe(0);
  CHECK(!none.available, "a GPU without NVENC probed as available");
  CHECK(none.reason.find("NV_ENC_ERR_UNSUPPORTED_DEVICE") != std::string::npos &&
            none.reason.find("no NVENC engine") != std::string::npos,
        "reason: %s", none.reason.c_str());
  unsetenv("ARCLIGHT_FAKE_NVENC_MODE");

  nv::ProbeResult probe = nv::Probe(0);
  CHECK(probe.available && probe.h264 && probe.hevc, "probe: %s", probe.reason.c_str());
  CHECK(!nv::Probe(4).available, "device 4 does not exist");

  std::string error;
  nv::EncoderConfig config;
  config.width = 64;
  config.height = 48;
  config.input = nv::InputFormat::kI420;
  auto encoder = nv::Encoder::Open(config, &error);
  CHECK(encoder != nullptr, "open: %s", error.c_str());
  if (!encoder) return 1;

  std::vector<std::uint8_t> picture(nv::Encoder::HostFrameSize(config.input, 64, 48), 128);
  CHECK(picture.size() == 64 * 48 * 3 / 2, "I420 size %zu", picture.size());
  nv::EncodedPicture out;
  std::vector<bool> keyframes;
  for (int i = 0; i < 4; i++) {
    CHECK(encoder->EncodeHost(picture.data(), picture.size(), i == 2, 100 + i, &out, &error), "encode %d: %s", i, error.c_str());
    keyframes.push_back(out.keyframe);
    CHECK(out.timestamp == static_cast<std::uint64_t>(100 + i), "timestamp %llu", static_cast<unsigned long long>(out.timestamp));
    const std::vector<int> types = NalTypes(out.data);
    CHECK(!types.empty() && types.back() == (out.keyframe ? 5 : 1), "frame %d ends in NAL type %d", i, types.empty() ? -1 : types.back());
  }
  CHECK((keyframes == std::vector<bool>{true, false, true, false}), "keyframes not IDR, P, forced IDR, P");
  CHECK(!encoder->EncodeHost(picture.data(), picture.size() - 1, false, 0, &out, &error), "a short frame was taken");
  CHECK(encoder->SetBitrate(1200, &error), "set bitrate: %s", error.c_str());
  CHECK(encoder->config().bitrateKbps == 1200, "bitrate %d", encoder->config().bitrateKbps);

  // Device memory from the (fake) driver: NV12 at a pitch wider than the picture.
  const nv::CudaDriver* cuda = nv::LoadCudaDriver(&error);
  CHECK(cuda != nullptr, "cuda: %s", error.c_str());
  CUdevice device = 0;
  CUcontext context = nullptr;
  CHECK(cuda->cuDeviceGet(&device, 0) == CUDA_SUCCESS && cuda->cuDevicePrimaryCtxRetain(&context, device) == CUDA_SUCCESS,
        "primary context");
  CUdeviceptr gpu = 0;
  const int pitch = 128;
  {
    // Allocations need a current context, as with the real driver.
    nv::ScopedContext current(*cuda, context);
    CHECK(cuda->cuMemAlloc(&gpu, pitch * 48 * 3 / 2) == CUDA_SUCCESS, "cuMemAlloc");
  }
  nv::DeviceFrame frame{gpu, pitch, nv::InputFormat::kNv12};
  CHECK(encoder->EncodeDevice(frame, false, 7, &out, &error), "device encode: %s", error.c_str());
  nv::DeviceFrame overrun{gpu + 64, pitch, nv::InputFormat::kNv12};
  CHECK(!encoder->ValidateDeviceFrame(overrun, &error) && error.find("runs past the end") != std::string::npos, "overrun: %s",
        error.c_str());
  nv::DeviceFrame narrow{gpu, 16, nv::InputFormat::kNv12};
  CHECK(!encoder->ValidateDeviceFrame(narrow, &error), "a pitch narrower than a row was accepted");
  encoder.reset();
  {
    nv::ScopedContext current(*cuda, context);
    cuda->cuMemFree(gpu);
  }
  cuda->cuDevicePrimaryCtxRelease(device);

  nv::EncoderConfig odd = config;
  odd.width = 63;
  CHECK(nv::Encoder::Open(odd, &error) == nullptr && error.find("even") != std::string::npos, "odd width: %s", error.c_str());

  if (failures == 0) std::printf("nvenc_encoder_test: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
