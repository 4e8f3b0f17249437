// Registers the CUDA exports (CudaBuffer, cudaDeviceInfo) on the addon. They share the NVENC
// build switch (ARCLIGHT_HAVE_NVENC: the ffnvcodec headers declare the driver API); without it
// the same names exist and say CUDA support is compiled out.
#pragma once

#include <napi.h>

namespace arclight::binding {

void RegisterCuda(Napi::Env env, Napi::Object exports);

}  // namespace arclight::binding
