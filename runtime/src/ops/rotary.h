// ROTARY's parameters and the frequencies of a call (schema/tern.fbs, RotaryParams): the one place that reads them,
// for the reference kernel, the CPU kernel and the Vulkan lowering alike.
#pragma once

#include <cstdint>
#include <vector>

#include "format/model.h"

namespace tern {

struct Rotary {
  int heads = 0;       // head blocks rotated, from column 0 (query heads, then key heads)
  int head_dim = 0;
  int rotary_dim = 0;  // even, <= head_dim: the first rotary_dim columns of a block rotate
  bool interleaved = false;
  float attention_factor = 1.0f;
  fb::RotaryScaling scaling = fb::RotaryScaling::STATIC;
  float base = 0.0f, factor = 1.0f;
  int64_t original_max_positions = 0;
  const float* inv_freq = nullptr;       // [rotary_dim / 2]
  const float* long_inv_freq = nullptr;  // [rotary_dim / 2], LONGROPE only

  static Rotary of(const Node& node);
  int pairs() const { return rotary_dim / 2; }
  // True when the frequencies depend on the call (DYNAMIC_NTK, LONGROPE): such a call runs whole.
  bool per_call() const { return scaling != fb::RotaryScaling::STATIC; }
  // The frequencies f [pairs()] of a call whose last position is call_end - 1.
  void frequencies(int64_t call_end, float* f) const;
  // cos | sin [n, 2, pairs()] of positions pos0..pos0+n-1 in a call ending at call_end (rotary_cos_sin of each row
  // and pair): the table the CPU kernel and the Vulkan shader both read. f: [pairs()] scratch for the frequencies.
  void cos_sin_table(int64_t pos0, int64_t n, int64_t call_end, float* f, float* cos_sin) const;
  // Columns (a, b) of pair i within a head block.
  int first(int i) const { return interleaved ? 2 * i : i; }
  int second(int i) const { return interleaved ? 2 * i + 1 : i + rotary_dim / 2; }
};

// cos and sin of float32(position) * f as transformers computes them (the angle rounded to float32), each multiplied
// by attention_factor.
void rotary_cos_sin(int64_t position, float f, float attention_factor, float* cos_out, float* sin_out);

}  // namespace tern
