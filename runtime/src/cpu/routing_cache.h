// SPDX-License-Identifier: MIT
// What a routing layer keeps to continue a sequence on the CPU, and the one-position step that reads it (ops/routing.h,
// "Continuing a sequence").
//
// State, sized at creation for a session of max_tokens (R = ring_slots, W = cluster_slots):
//   ring         [L, R, 2*dh]        local head h: key | value of position p in slot p % R
//   key_pos      int32 [RH, K, W]    per routing head and cluster: the positions of its best keys (-1: empty slot)
//   key_score    [RH, K, W]          their scores k^·mu_c
//   keys_t       [RH, K, dh, W]      their normalised keys, transposed (the tile routing_attend reads)
//   values       [RH, K, W, dh]
//   query_score  [RH, K, W]          the best query scores so far (unordered)
// A cluster's slots fill in position order while the sequence is shorter than W; after that a step replaces the
// weakest key or query score. A step is O(heads * K * (dh + W * dh)) work and O(R * dh + W) scratch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/status.h"
#include "cpu/huge_pages.h"
#include "cpu/isa.h"
#include "ops/routing.h"

namespace tern::cpu {

class RoutingCache {
 public:
  // buffers: where the cache is allocated (the session's; null: the library's own).
  RoutingCache(const RoutingAttention& a, int64_t capacity, BufferSource* buffers);

  int64_t capacity() const { return capacity_; }
  int64_t size() const { return size_; }
  uint64_t bytes() const { return (ring_.size() + key_pos_.size() + floats_.size()) * 4; }
  void reset();

  // The first call of n positions: local head h's key and value rows of every position (the ring keeps the last R).
  void store_local(int h, int64_t n, const float* key0, const float* value0, int64_t stride);
  // Routing head r, cluster c after the first call (count = min(window, n) members, positions ascending): the
  // scores of its member queries (scores [n] of every position) ...
  void store_queries(int r, int64_t c, int64_t count, const int32_t* members, const float* scores);
  // ... and its member keys: their scores, normalised keys (row p of normalised [n, dh]) and values (value0 + p * stride).
  void store_keys(int r, int64_t c, int64_t count, const int32_t* members, const float* scores, const float* normalised,
                  const float* value0, int64_t stride);
  void finish_first_call(int64_t n) { size_ = n; }

  // Floats of scratch a step needs.
  int64_t step_floats() const;
  // Position p = size(): every head's query, key and value at qkv [3*inner] -> out [inner]; then the cache holds p.
  void step(const IsaKernels& k, const float* qkv, float* scratch, float* out);

  // Saved as (core/session_state.cpp): int32 key_pos [RH, K, W], then floats: ring, key scores, keys, values,
  // query scores. Unused slots are saved as they are kept (position -1, zeros).
  uint64_t saved_count_bytes(int64_t position) const;
  uint64_t saved_bytes(int64_t /*position*/) const { return bytes(); }
  void save(int64_t position, uint8_t* out) const;
  // TERN_INVALID_ARGUMENT unless the key positions could be this cache's after `position` positions.
  Status check(int64_t position, const uint8_t* in, const std::string& label) const;
  void load(int64_t position, const uint8_t* in);

 private:
  int64_t slot(int r, int64_t c) const { return (int64_t(r) * a_.clusters + c) * slots_; }
  float* ring_row(int h, int64_t p) { return ring_.data() + (int64_t(h) * ring_slots_ + p % ring_slots_) * 2 * a_.head_dim; }
  float* key_score(int r, int64_t c) { return floats_.data() + slot(r, c); }
  float* keys_t(int r, int64_t c) { return floats_.data() + cluster_floats_ + slot(r, c) * a_.head_dim; }
  float* values(int r, int64_t c) { return keys_t(r, c) + cluster_floats_ * a_.head_dim; }
  float* query_score(int r, int64_t c) { return floats_.data() + cluster_floats_ * (1 + 2 * int64_t(a_.head_dim)) + slot(r, c); }
  // Key position p with score s and normalised key kn [dh], value v, into slot m of cluster (r, c).
  void put_key(int r, int64_t c, int64_t m, int64_t p, float s, const float* kn, const float* v);

  RoutingAttention a_;
  int64_t capacity_;
  int64_t ring_slots_, slots_;  // R, W
  int64_t cluster_floats_;      // RH * K * W
  LargeVector<float> ring_;     // [L, R, 2*dh]
  LargeVector<int32_t> key_pos_;  // [RH, K, W]
  LargeVector<float> floats_;     // key scores, keys_t, values, query scores (cpu/huge_pages.h)
  int64_t size_ = 0;
};

}  // namespace tern::cpu
