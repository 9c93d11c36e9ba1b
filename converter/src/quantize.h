// SPDX-License-Identifier: MIT
// Weight compression math (schema/tern.fbs, Tensor): float32 rows into F16, I8 or I4 with their scales. Pure
// functions over one matrix; the converter's policy (compress.h) picks which tensors and which format.
#pragma once

#include <cstdint>
#include <vector>

#include "format/status.h"

namespace tern::convert {

// w [out, in] -> halves [out * in], rounded to nearest even. Fails naming the first element beyond float16's range.
Status quantize_f16(const float* w, int64_t count, uint16_t* out);

// w [out, in] (in a multiple of 32; group 0: one scale per row, else a multiple of 32 dividing in) -> q [out, in]
// and scales [out, groups]: scale = max|x| / 127 over the group, q = x / scale rounded to nearest. Fails naming the
// first group that holds an infinite value.
Status quantize_i8(const float* w, int64_t out, int64_t in, int64_t group, int8_t* q, float* scales);

// The same for I4 (blocks of 32 in 16 bytes, element k low nibble, k + 16 high, nibble = q + 8) with float16
// scales: per group, the scale (as float16) and the rounding of q to [-8, 7] that give the least squared error
// among candidates that include llama.cpp Q4_0's choice (scale = -(the value of largest magnitude) / 8), so the
// weights' error is never above Q4_0's for the same groups. Fails naming the first group whose values no finite
// float16 scale can reach (a magnitude above 9 x 65504).
Status quantize_i4(const float* w, int64_t out, int64_t in, int64_t group, uint8_t* q, uint16_t* scales);

}  // namespace tern::convert
