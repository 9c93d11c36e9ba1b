// SPDX-License-Identifier: MIT
// The ops of a folded LSH layer (cpu/lsh_fold.h) that its attention kernel (cpu/attention_lsh.cpp) runs one head
// at a time: x2's layer norm and the head's rows of the qk | v projection before the head, and with the output
// fold the head's columns of the output projection, added into x1, after it.
#pragma once

#include <string>
#include <vector>

#include "cpu/lsh_fold.h"
#include "cpu/kernel.h"
#include "cpu/matrix.h"
#include "ops/op.h"

namespace tern::cpu {

class LshFoldedLayer {
 public:
  static constexpr int64_t kRows = 256;  // rows normalised and projected at a time

  static Result<LshFoldedLayer> create(const LshFold& fold, const Model& model, int heads, int head_dim);

  int64_t d() const { return d_; }
  bool folds_output() const { return residual_ >= 0; }
  uint64_t packed_bytes() const;
  // Floats of the [min(n, kRows), d] block buffer project() and add_output() use.
  int64_t block_floats(int64_t n) const { return std::min(n, kRows) * d_; }

  // Head h's qk | v [n, 2*dh] from x2: layer norm, then the head's rows of the projection.
  Status project(const RunContext& ctx, int h, int64_t n, float* head_qkv, float* block, const std::string& where) const;
  // x1 [n, d] += head h's output [n, dh] times W_o's columns of that head (and the bias, with head 0).
  Status add_output(const RunContext& ctx, int h, int64_t n, const float* out, float* block,
                    const std::string& where) const;

 private:
  int x2_ = -1, residual_ = -1;  // value indices: x2, and y1 (x1's place) or -1
  int64_t d_ = 0, head_dim_ = 0;
  const float* gamma_ = nullptr;
  const float* beta_ = nullptr;
  float eps_ = 0;
  // Float32 products packed once per model (cpu/matrix.h):
  std::vector<Matrix> qk_, v_;  // per head: the projection's rows [dh, d], writing into a [n, 2*dh] buffer
  std::vector<Matrix> out_;     // per head: W_o's columns of the head [d, dh]
};

}  // namespace tern::cpu
