// SPDX-License-Identifier: MIT
// Bulk float32 <-> IEEE float16: activations stored as float16 (tern_activation_storage F16), whose rows of a
// whole-sequence value are widened into a float32 block before the ops that read them and narrowed back after the
// ops that write them, split across the pool's threads. Rounding is to nearest, ties to even (format/half.h); above
// the largest half (65504) a value becomes inf.
#pragma once

#include <pthreadpool.h>

#include <cstdint>

namespace tern::cpu {

void halves_to_floats(pthreadpool_t pool, const uint16_t* in, int64_t count, float* out);
void floats_to_halves(pthreadpool_t pool, const float* in, int64_t count, uint16_t* out);
// x [count] (float16) += y [count] (float32), rounded once per element.
void add_into_halves(pthreadpool_t pool, uint16_t* x, const float* y, int64_t count);

}  // namespace tern::cpu
