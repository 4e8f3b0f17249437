// Argument checks shared by the Node-API bindings: a wrong type is a TypeError, a value out of
// range a RangeError — never a crash.
#pragma once

#include <napi.h>

#include <cmath>
#include <cstddef>
#include <string>

namespace arclight::binding {

[[noreturn, maybe_unused]] inline void ThrowType(Napi::Env env, const std::string& message) { throw Napi::TypeError::New(env, message); }
[[noreturn, maybe_unused]] inline void ThrowRange(Napi::Env env, const std::string& message) { throw Napi::RangeError::New(env, message); }

[[maybe_unused]] inline int IntegerOption(Napi::Env env, const Napi::Value& value, const std::string& name, int min, int max) {
  if (!value.IsNumber()) ThrowType(env, name + " must be a number");
  const double d = value.As<Napi::Number>().DoubleValue();
  if (!std::isfinite(d) || std::trunc(d) != d) ThrowType(env, name + " must be an integer");
  if (d < min || d > max) ThrowRange(env, name + " must be from " + std::to_string(min) + " to " + std::to_string(max));
  return static_cast<int>(d);
}

// A CUDA device ordinal argument at `index`; 0 when absent.
[[maybe_unused]] inline int DeviceArg(const Napi::CallbackInfo& info, std::size_t index) {
  if (info.Length() <= index || info[index].IsUndefined()) return 0;
  return IntegerOption(info.Env(), info[index], "device", 0, 63);
}

}  // namespace arclight::binding
