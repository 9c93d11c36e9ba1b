// SPDX-License-Identifier: MIT
// Compressive Transformer memory (Rae et al. 2019) as the reference family defines it (converter/reference-family.md,
// tools/reference/compressive.py): the one definition the reference kernel, the CPU kernel and the planner share.
//
// The op reads its attention input a [n, d] of a call of n tokens (one segment) and keeps two memories of such rows,
// both empty at the start:
//   mem   the most recent rows, oldest first: mem_len (M) .. M + rate - 1 rows once full
//   cmem  at most cmem_len (C) compressed rows, oldest first
// Keys and values are k(x), v(x) for x over ctx = [cmem; mem; a] (qkv [3*H*dh, d] with optional bias), queries q(a_i);
// query i sees every memory row and a_0 .. a_i, score = q . k * scale, softmax, times v.
// After the call: mem = mem ++ a; e = floor(max(0, |mem| - M) / rate) * rate; the e oldest rows leave mem in groups
// of `rate` rows, each group g [rate, d] compressed to one row:
//   CONV  out = conv_weight g_flat + conv_bias, g_flat [rate*d] = g row after row (conv_weight [d, rate*d] is the
//         Conv1d(d, d, rate, stride=rate) weight W[o, c, t] stored as [o][t][c])
//   MEAN_POOL  the mean of the rows        MAX_POOL  their elementwise maximum
// and appended to cmem, which keeps its last C rows. State: (M + rate - 1 + C) x d floats, allocated once.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "format/model.h"
#include "format/status.h"
#include "ops/head_layout.h"

namespace tern {

struct Compressive {
  int heads = 1;
  int head_dim = 1;
  int64_t d = 0;
  int64_t mem_len = 0;    // M
  int64_t cmem_len = 0;   // C
  int64_t rate = 1;
  fb::Compression compression = fb::Compression::CONV;
  float scale = 1.0f;
  const float* qkv = nullptr;          // [3*H*dh, d]
  const float* qkv_bias = nullptr;     // [3*H*dh] or null
  const float* conv_weight = nullptr;  // [d, rate*d] (CONV)
  const float* conv_bias = nullptr;    // [d] or null

  static Result<Compressive> from(const Node& node);

  int64_t inner() const { return int64_t(heads) * head_dim; }
  // Where the rows the op projects (qkv [3*inner, d] applied to [cmem; mem; a]) hold each head's query, key and
  // value (the kind table's projection, ops/head_layout.h).
  HeadLayout layout() const;
  int64_t mem_capacity() const { return mem_len + rate - 1; }
  // Rows mem and cmem hold after t tokens: the CPU kernel's counts, which shaders/common/memory_rows.glsl derives
  // alike on the device (mem fills to M, then keeps M + (t - M) % rate; every other row left in groups of rate).
  int64_t mem_rows(int64_t t) const { return t <= mem_len ? t : mem_len + (t - mem_len) % rate; }
  int64_t cmem_rows(int64_t t) const { return std::min(cmem_len, (t - mem_rows(t)) / rate); }
  // Rows held after n tokens, at most (the memory fills first, then evictions fill cmem).
  int64_t state_rows(int64_t n) const;
  // One group [rate, d] -> out [d].
  void compress(const float* group, float* out) const;

  // The saved state, the bytes every backend saves and loads (so a state saved on one loads on another): int64 mem
  // rows, int64 cmem rows (mem_rows and cmem_rows of the position), the memory [M + rate - 1, d], then the
  // compressed memory [C, d], float32, each whole.
  static constexpr uint64_t kSavedCountBytes = 2 * sizeof(int64_t);
  uint64_t mem_bytes() const { return uint64_t(mem_capacity()) * uint64_t(d) * sizeof(float); }
  uint64_t cmem_bytes() const { return uint64_t(cmem_len) * uint64_t(d) * sizeof(float); }
  uint64_t saved_mem_at() const { return kSavedCountBytes; }
  uint64_t saved_cmem_at() const { return kSavedCountBytes + mem_bytes(); }
  uint64_t saved_bytes() const { return saved_cmem_at() + cmem_bytes(); }
};

// The memories between calls, for the reference kernel.
struct CompressiveMemory {
  std::vector<float> mem;   // [rows, d]
  std::vector<float> cmem;  // [rows, d]
};

}  // namespace tern
