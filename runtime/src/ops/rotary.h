// SPDX-License-Identifier: MIT
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
  // Rotates `blocks` head blocks of one row, x [blocks * head_dim] into out (which may be x), by the cos and sin
  // [pairs()] of one position (a row of cos_sin_table), in float32 as the CPU kernel does; the columns past
  // rotary_dim are copied.
  void rotate(const float* cos, const float* sin, const float* x, float* out, int blocks) const {
    for (int h = 0; h < blocks; ++h) {
      const float* xb = x + int64_t(h) * head_dim;
      float* ob = out + int64_t(h) * head_dim;
      if (ob != xb)
        for (int c = rotary_dim; c < head_dim; ++c) ob[c] = xb[c];
      for (int k = 0; k < pairs(); ++k) {
        const float a = xb[first(k)], b = xb[second(k)];
        ob[first(k)] = a * cos[k] - b * sin[k];
        ob[second(k)] = b * cos[k] + a * sin[k];
      }
    }
  }
};

// The ROTARY node whose output is `attention`'s input 0 and no other op's input, or null: the rotation that
// attention sinks (ops/sink_cache.h) and a context shift redo for the keys an attention op caches.
const Node* rotary_feeding(const Model& model, const Node& attention);

// cos and sin of float32(position) * f as transformers computes them (the angle rounded to float32), each multiplied
// by attention_factor.
void rotary_cos_sin(int64_t position, float f, float attention_factor, float* cos_out, float* sin_out);

}  // namespace tern
