// Hand-vectorised uint8 strip kernel for colour_convert.cc (x86-64 SSSE3; elsewhere it does
// nothing and the portable kernels do all the work).
#pragma once

#include <cstdint>

namespace arclight::colour::simd {

struct PlanarU8 {
  const std::uint8_t* r;
  const std::uint8_t* g;
  const std::uint8_t* b;
};

// Which memory channel (0, 1, 2) holds red, green and blue.
struct ChannelOrder {
  int r, g, b;
};

// The two source rows of a strip (b = a for an odd last row): interleaved (channels 3 or 4, with
// `order`) or planar (channels 0).
struct StripRows {
  int channels;
  const std::uint8_t* a;
  const std::uint8_t* b;
  ChannelOrder order;
  PlanarU8 planarA;
  PlanarU8 planarB;
};

// Whether this CPU runs the kernels (checked once by the caller).
bool Available();

// Converts a prefix of the strip (a multiple of 16 columns) into luma rows yA and yB (yB null for an
// odd last row) and one chroma row: planes u and v (uvStep 1) or interleaved pairs at u (uvStep 2,
// NV12). Returns the columns done.
int Strip(const StripRows& rows, std::uint8_t* yA, std::uint8_t* yB, std::uint8_t* u, std::uint8_t* v, int uvStep, int width);

}  // namespace arclight::colour::simd
