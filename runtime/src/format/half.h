// SPDX-License-Identifier: MIT
// IEEE float16 <-> float32: one value at a time (float16 tensors of a checkpoint), and arrays of them (format/half.cpp:
// with the F16C instructions where the build targets them, 8 at a time, and one at a time for the rest), with which
// Vulkan stages float16 weights. The CPU backend's activations use its kernel variants' own copies instead
// (cpu/half_rows.h: F16C picked at run time), split across threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tern {

#include "format/half_bits.inc"  // float_to_half, half_to_float

// False for a float16 infinity or NaN (exponent bits all ones).
inline bool half_is_finite(uint16_t bits) { return (bits & 0x7c00u) != 0x7c00u; }

// Elements [b, e) of the arrays, rounded as float_to_half / exactly as half_to_float.
void halves_to_floats(const uint16_t* in, float* out, size_t b, size_t e);
void floats_to_halves(const float* in, uint16_t* out, size_t b, size_t e);

}  // namespace tern
