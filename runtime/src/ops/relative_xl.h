// SPDX-License-Identifier: MIT
// Transformer-XL relative attention with a memory (Dai et al. 2019; Hugging Face's RelPartialLearnableMultiHeadAttn
// in eval mode): the one definition the reference kernel, the CPU kernel and the planner share.
//
// The op reads the layer input h [n, d] of a call of n tokens. Its state is the memory: the layer inputs of the
// mem_len (M) tokens before the call, oldest first, ZERO vectors at the start (HF's init_mems: the zeros are attended
// like any other key, never masked). With x = [memory; h] ([M + n, d]) and x' = layer_norm(x) when the op has norm
// weights (pre-LN) or x otherwise:
//   k_j, v_j = x'_j W_k^T, x'_j W_v^T   (W_q | W_k | W_v: the row blocks of qkv [3*H*dh, d])   j in [0, M + n)
//   q_i      = x'_{M+i} W_q^T                                                                   i in [0, n)
//   t        = M + i - j, the distance from query i to key j; visible when t >= 0, and t < M if same_length
//   r(p)     = r_net pe(p), pe(p) = [sin(p f_0..f_{d/2-1}), cos(p f_0..)], f_k = inv_freq[k] or 1/10000^(2k/d)
//   score    = ((q_i + r_w_bias) . k_j + (q_i + r_r_bias) . r(min(t, clamp_len))) * scale   (no clamp if 0)
//   out_i    = softmax over the visible keys of score, times v_j
// then the memory becomes the last M rows of [memory; h] (h itself, not its layer norm).
//
// So query i of a call sees every memory slot and the call's tokens up to itself (M + i + 1 keys), or with
// same_length exactly the M keys at distances 0 .. M-1. Outputs depend on how a sequence is cut into calls: one
// call is one segment of HF's model. The state is M x d floats whatever the number of tokens seen.
#pragma once

#include <cstdint>
#include <vector>

#include "format/model.h"
#include "format/status.h"
#include "ops/head_layout.h"

namespace tern {

struct RelativeXL {
  int heads = 1;
  int head_dim = 1;
  int64_t d = 0;                  // layer width (the input's)
  int64_t mem_len = 0;            // M
  int64_t clamp_len = 0;          // 0: no clamp
  bool same_length = false;
  float eps = 1e-5f;
  float scale = 1.0f;
  const float* qkv = nullptr;        // [3*H*dh, d]
  const float* r_net = nullptr;      // [H*dh, d]
  const float* r_w_bias = nullptr;   // [H, dh]
  const float* r_r_bias = nullptr;   // [H, dh]
  const float* norm_weight = nullptr;  // [d] or null (post-LN)
  const float* norm_bias = nullptr;    // [d] or null
  const float* inv_freq = nullptr;     // [d/2] or null

  // Reads and checks the params and weights of an ATTENTION op of kind RelativeXL.
  static Result<RelativeXL> from(const Node& node);

  int64_t inner() const { return int64_t(heads) * head_dim; }
  // Where the rows the op projects (qkv [3*inner, d] applied to [memory; h]) hold each head's query, key and value
  // (the kind table's projection, ops/head_layout.h).
  HeadLayout layout() const;
  bool pre_norm() const { return norm_weight != nullptr; }
  // Largest distance a query of a call of up to n tokens reads.
  int64_t max_distance(int64_t n) const { return same_length ? mem_len - 1 : mem_len + n - 1; }
  // Rows of r() a call of up to n tokens reads: positions 0 .. min(max_distance, clamp_len).
  int64_t position_rows(int64_t n) const;
  // The position a distance reads.
  int64_t position(int64_t t) const { return clamp_len > 0 && t > clamp_len ? clamp_len : t; }
  // First key (index into [memory; h]) query i sees.
  int64_t first_key(int64_t i) const { return same_length ? i + 1 : 0; }
  // pe(p) [d], angles and sin/cos in double.
  void position_encoding(int64_t p, float* out) const;
  // pe(first) .. pe(first + rows - 1) [rows, d], the frequencies computed once for all of them.
  void position_encodings(int64_t first, int64_t rows, float* out) const;
  uint64_t state_bytes() const { return uint64_t(mem_len) * uint64_t(d) * sizeof(float); }
};

}  // namespace tern
