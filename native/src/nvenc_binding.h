// Registers the NVENC exports (nvencProbe, openNvencEncoder) on the
// addon. Built with ARCLIGHT_HAVE_NVENC when CMake found the ffnvcodec headers; without it the same
// names exist and report NVENC as compiled out, so callers need no second code path.
#pragma once

#include <napi.h>

namespace arclight::binding {

void RegisterNvenc(Napi::Env env, Napi::Object exports);
bool NvencCompiledIn();

}  // namespace arclight::binding
