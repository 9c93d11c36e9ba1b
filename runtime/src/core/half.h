// IEEE float16 <-> float32: one value at a time (float16 tensors of a checkpoint), and arrays of them (core/half.cpp:
// with the F16C instructions where the build targets them, 8 at a time, and one at a time for the rest). The CPU
// backend splits the arrays of activations across threads (cpu/half_rows.h); Vulkan stages float16 weights.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tern {

// Round to nearest, ties to even; overflow to +-inf, NaN stays NaN (quiet), subnormal halves kept.
inline uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return uint16_t(sign | 0x7c00u | (abs > 0x7f800000u ? 0x0200u : 0u));  // inf, NaN
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to 65536 or more: inf
  const int32_t exp = int32_t(abs >> 23) - 127;
  if (exp >= -14) {  // a normal half: keep 10 of the 23 mantissa bits, round the 13 dropped
    const uint32_t mant = abs & 0x7fffffu;
    uint32_t h = (uint32_t(exp + 15) << 10) | (mant >> 13);
    const uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is still right
    return uint16_t(sign | h);
  }
  if (exp < -25) return uint16_t(sign);  // below half the smallest subnormal: zero
  // A subnormal half: value / 2^-24, with the implicit bit, rounded to nearest even.
  const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
  const int shift = -exp - 14 + 13;  // 14..24
  uint32_t h = mant >> shift;
  const uint32_t rest = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (h & 1u))) ++h;
  return uint16_t(sign | h);
}

// Exact: every half is a float.
inline float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1fu) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf, NaN
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);  // rebias 15 -> 127
  } else if (mant == 0) {
    bits = sign;  // +-0
  } else {
    // A subnormal half, mant * 2^-24: normalise the mantissa into a float's exponent.
    int shift = 0;
    uint32_t m = mant;
    while (!(m & 0x400u)) {
      m <<= 1;
      ++shift;
    }
    bits = sign | (uint32_t(113 - shift) << 23) | ((m & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Elements [b, e) of the arrays, rounded as float_to_half / exactly as half_to_float.
void halves_to_floats(const uint16_t* in, float* out, size_t b, size_t e);
void floats_to_halves(const float* in, uint16_t* out, size_t b, size_t e);

}  // namespace tern
