// SPDX-License-Identifier: MIT
// Reformer LSH attention (Kitaev et al. 2020), exactly as Hugging Face transformers' LSHSelfAttention computes it in
// eval mode (modeling_reformer.py): the one definition the reference kernel, the CPU kernel and the planner share.
//
// Input qkv [n, 2*H*dh]: the shared query-key projection qk (head h at columns h*dh) then the values v. Per head:
//   key(j)   = qk_j * rsqrt(mean(qk_j^2) + key_norm_eps) * scale        (HF _len_and_dim_norm, scale = dh^-0.5)
//   query(i) = qk_i, unnormalised
// The sequence is treated as right-padded to n_pad = padded_length(n) (HF pads the ids to the lcm of the model's
// chunk lengths when n > the smallest chunk length and n is not a multiple of it). Pad tokens only shift where
// chunks begin: they hash to an extra bucket after every real one, and no real query can see them (they are later).
//
// n_pad <= chunk (HF's "standard self attention"): query i sees keys j <= i; j == i scores self_mask_value.
//
// Otherwise, with R = rotations [H, dh, hashes, rot/2] (rot = sum of the bucket factors):
//   1. Round r, position i: x = qk_i R[h, :, r, :]; for each factor f_k (slices of f_k/2 columns, in order):
//      a_k = argmax([x_slice | -x_slice]) (first maximum); bucket = sum_k a_k * prod_{l<k} f_l.
//   2. Sort all (round, position) pairs by (round, bucket, position): one axis of hashes * n_pad slots
//      (HF's stable argsort of bucket + round * buckets). Pads come last in each round.
//   3. Cut the axis into chunks of `chunk` slots. The queries of chunk c see the slots of chunks
//      c - chunks_before .. c + chunks_after, taken modulo the number of chunks (circular, across rounds).
//   4. For query position i and a slot holding position j: invisible if j > i or j is a pad (HF: -1e9, which never
//      takes softmax mass: every row has its own position at self_mask_value); j == i scores self_mask_value (a
//      replacement, so a query sees itself only when nothing else is visible); else q·key. A position can occupy
//      several slots of a window (from other rounds); each slot counts.
//   5. Per round, in float32 as HF does it: m = max score, lse = log(sum exp(s - m)) + m, out = sum exp(s - lse) v.
//   6. hashes > 1: L = log(sum_r exp(lse_r - M)) + M (M = max_r lse_r), out = sum_r exp(lse_r - L) out_r.
// Step 5's float32 lse matters where a query sees only copies of itself: lse = -1e5 + log(k) rounds to a multiple
// of 2^-7, so those rows' weights do not sum to 1 (HF's own numbers; the kernels keep that rounding).
//
// Work O(hashes * n * chunk * (1 + before + after) * dh); memory O(n * dh + hashes * n) on the CPU (rounds combined
// in a second pass, cpu/attention_lsh.cpp), O(hashes * n * dh) on Vulkan; never n x n.
//
// Continuing a sequence: Hugging Face's cached generation (modeling_reformer.py with use_cache, past_buckets_states;
// PyTorch port: tools/reference/reformer_cached.py). The first call (position 0) runs as above and leaves, per head,
// every position's qk | v and, when it was chunked, each round's bucket of every real position, offset by
// r * buckets (r * (buckets + 1) when the call was padded: HF counts the padding bucket). Every position of a later
// call then runs alone, in order, against what is cached, which is never recomputed:
//   - Buckets cached: its rounds are offset by buckets + 1 if the largest cached bucket exceeds
//     hashes * buckets - 1, else by buckets. Per round, the cached positions and itself (L of them) are sorted by
//     (bucket, position); from its index i there, the window is the W = chunk * (1 + before + after) sorted slots
//     starting at (i / chunk - before) * chunk, modulo L (a short sequence repeats positions). Every slot is an
//     earlier position or itself: no causal mask; itself scores self_mask_value. Per round lse and output as in 5,
//     rounds combined as in 6. Its buckets join the cache.
//   - Nothing hashed (the first call was not chunked): it sees every position so far and itself (self-masked), one
//     softmax; once the sequence reaches `chunk` positions, every position is hashed (offsets r * buckets).
// State: O(max_tokens * heads * (2 * dh + hashes)); a step O(heads * hashes * (L + W * dh)), scratch O(L).
// The Vulkan backend keeps the same cache on the device and runs the same steps (vulkan/ops_lsh.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/model.h"
#include "format/status.h"
#include "ops/head_layout.h"

namespace tern {

// The saved cache of an LSH op after `position` positions, the bytes every backend saves and loads (so a state saved
// on one loads on another): int32 hashed (0 or 1), int32 0; int32 buckets [heads, hashes, position] (each round's
// bucket of every position, 0 while not hashed); float rows [heads, position, 2*head_dim] (each position's qk | v).
struct LshSavedCache {
  int64_t heads = 1, hashes = 1, head_dim = 1, position = 0;

  static constexpr uint64_t kHeaderBytes = 8;
  uint64_t round_bytes() const { return uint64_t(position) * 4; }  // one round's buckets of one head
  uint64_t head_rows_bytes() const { return uint64_t(position) * uint64_t(2 * head_dim) * 4; }
  // Where head h's round r of buckets, and head h's rows, start.
  uint64_t buckets_at(int64_t h, int64_t r) const { return kHeaderBytes + uint64_t(h * hashes + r) * round_bytes(); }
  uint64_t rows_at(int64_t h) const { return buckets_at(heads, 0) + uint64_t(h) * head_rows_bytes(); }
  uint64_t count_bytes() const { return rows_at(0); }  // the header and the buckets
  uint64_t bytes() const { return rows_at(heads); }
};

struct LshAttention {
  int heads = 1;
  int head_dim = 1;
  float scale = 1.0f;
  int64_t chunk = 1;
  int64_t before = 0, after = 0;
  int64_t hashes = 1;
  std::vector<int64_t> factors;  // bucket factors, each even
  int64_t buckets = 0;           // product of factors
  int64_t rot_half = 0;          // sum of factors / 2
  int64_t pad_to = 1, pad_above = 0;
  float self_mask_value = -1e5f;
  float key_norm_eps = 1e-6f;
  const float* rotations = nullptr;  // [heads, head_dim, hashes, rot_half]

  // Reads and checks the params and weight of an ATTENTION op of kind Lsh.
  static Result<LshAttention> from(const Node& node);
  // Where qk | v rows hold each head's query-key and value (the kind table's projection, ops/head_layout.h).
  HeadLayout layout() const;

  // Length the sequence is treated as (HF's right-padding).
  int64_t padded_length(int64_t n) const {
    return (n > pad_above && n % pad_to != 0) ? (n / pad_to + 1) * pad_to : n;
  }
  bool chunked(int64_t n) const { return padded_length(n) > chunk; }
  // Bytes of the cache a sequence of n positions keeps: qk | v of every head, and each round's bucket.
  uint64_t cache_bytes(int64_t n) const {
    return uint64_t(n) * uint64_t(heads) * uint64_t(2 * head_dim + hashes) * sizeof(float);
  }
  int64_t window() const { return chunk * (1 + before + after); }
  // Round r's cached bucket values lie in [r * buckets, bucket_limit(r)] (offsets r * (buckets + 1) after a padded
  // first call).
  int64_t bucket_limit(int64_t r) const { return r * (buckets + 1) + buckets - 1; }
  // The saved cache of a sequence of `position` positions (LshSavedCache).
  LshSavedCache saved_cache(int64_t position) const { return {heads, hashes, head_dim, position}; }
  // Checks a saved cache (LshSavedCache) of `position` positions: TERN_INVALID_ARGUMENT unless its counts could be
  // a cache of `capacity` positions after them (checked before any state is loaded; a forged blob can match the
  // checksum). `label` names the op.
  Status check_saved_cache(int64_t capacity, int64_t position, const uint8_t* in, const std::string& label) const;
  // Bucket of one query-key vector x [head_dim] in round r of head h; `rotated` is scratch [rot_half].
  int64_t bucket(int h, int64_t r, const float* x, float* rotated) const;
};

namespace ref {
// Reference LSH attention of a whole sequence: qkv [n, 2*heads*dh] (qk | v), out [n, heads*dh]. Plain loops with
// double accumulation, keeping HF's float32 roundings of the log-sum-exps (ops/lsh.h, steps 5 and 6).
void lsh_attention(const float* qkv, int64_t n, const LshAttention& spec, float* out);
}  // namespace ref

}  // namespace tern
