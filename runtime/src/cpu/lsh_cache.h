// SPDX-License-Identifier: MIT
// What an LSH layer keeps to continue a sequence on the CPU, and the one-position step that reads it: Hugging Face's
// cached generation (past_buckets_states; ops/lsh.h, "Continuing a sequence").
//
// State, sized for max_tokens positions at creation:
//   rows     [heads, max_tokens, 2*dh]     each position's qk | v of that head (HF caches the attention input and
//                                          projects the rows a step reads again; the projections are the same)
//   buckets  [heads, hashes, max_tokens]   once the sequence is hashed: each round's bucket of every position, with
//                                          HF's round offsets (r * buckets, or r * (buckets + 1) for a padded first
//                                          call, whose padding bucket HF counts)
//   size, hashed, and the largest bucket (HF's test for the padding bucket)
// A step is O(heads * (hashes * size + hashes * window * dh)) work and O(size) scratch (a counting sort of one round);
// nothing is n x n.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "format/status.h"
#include "cpu/huge_pages.h"
#include "cpu/isa.h"
#include "ops/lsh.h"

namespace tern::cpu {

// ops/lsh.h step 6, in float32 as HF: the rounds' log-sum-exps lse[r * stride] (r < hashes) become their weights
// exp(lse_r - logsumexp_r(lse_r)), in place. Shared by the whole-sequence kernel and the cached step.
void lsh_round_weights(float* lse, int64_t hashes, int64_t stride);

class LshCache {
 public:
  // buffers: where the cache is allocated (the session's; null: the library's own).
  LshCache(const LshAttention& a, int64_t capacity, BufferSource* buffers);

  int64_t capacity() const { return capacity_; }
  int64_t size() const { return size_; }
  uint64_t bytes() const { return (rows_.size() + buckets_.size()) * 4; }
  void reset();

  // Head h's rows of positions [p0, p0 + n): qk at qkv + t * stride, v at + v_offset (t < n).
  void store_rows(int h, int64_t p0, int64_t n, const float* qkv, int64_t stride, int64_t v_offset);
  // After a first call of n positions that was chunked: head h's buckets [hashes, n] (raw, 0 .. buckets - 1);
  // `padded`: the call was padded, so HF offset its rounds by buckets + 1.
  void store_first_buckets(int h, int64_t n, const int32_t* raw, bool padded);
  // The first call of n positions has been stored: hashed when it was chunked.
  void finish_first_call(int64_t n, bool hashed);

  // Floats of scratch a step needs.
  int64_t step_floats() const;
  // The position p = size(), whose rows are stored: every head's output [dh] into out(h); then the cache holds it.
  void step(const IsaKernels& k, float* scratch, const std::function<float*(int)>& out);

  // Saved as (core/session_state.cpp): int32 hashed, int32 0, int32 buckets [heads, hashes, position] (0 while not
  // hashed), then float rows [heads, position, 2*dh].
  uint64_t saved_count_bytes(int64_t position) const;
  uint64_t saved_bytes(int64_t position) const;
  void save(int64_t position, uint8_t* out) const;
  // TERN_INVALID_ARGUMENT unless the counts could be this cache's after `position` positions.
  Status check(int64_t position, const uint8_t* in, const std::string& label) const;
  void load(int64_t position, const uint8_t* in);

 private:
  const float* row(int h, int64_t j) const { return rows_.data() + (int64_t(h) * capacity_ + j) * 2 * a_.head_dim; }
  int32_t* round_buckets(int h, int64_t r) { return buckets_.data() + (int64_t(h) * a_.hashes + r) * capacity_; }
  const int32_t* round_buckets(int h, int64_t r) const {
    return buckets_.data() + (int64_t(h) * a_.hashes + r) * capacity_;
  }
  int64_t bucket_limit(int64_t r) const { return a_.bucket_limit(r); }
  // Query qk [dh] against key position j: q . (x_j * rsqrt(mean(x_j^2) + eps) * scale), or the self mask at `self`.
  float score(const IsaKernels& k, const float* q, int h, int64_t j, int64_t self, float* key) const;
  // Softmax of s[0..count) over the values of positions pos[0..count) into o [dh]; returns HF's float32 lse.
  float attend(const float* s, const int32_t* pos, int64_t count, int h, float* o) const;
  void hash_all(float* rotated);

  LshAttention a_;
  int64_t capacity_;
  LargeVector<float> rows_;       // [heads, capacity, 2*dh] (cpu/huge_pages.h)
  LargeVector<int32_t> buckets_;  // [heads, hashes, capacity]
  int64_t size_ = 0;
  bool hashed_ = false;
  int32_t max_bucket_ = -1;
};

}  // namespace tern::cpu
