// SPDX-License-Identifier: MIT
// The streaming state of a KV-store attention op (kinds Dense, SlidingWindow, ChunkedLocal, Strided, Fixed): which
// positions it keeps, in which slot, and the bytes a saved state holds. Every backend keeps its state in its own
// arrangement but saves and loads exactly these bytes, so a state saved on one backend loads on another.
//
// Slots, per key/value head, for a session of max_tokens (ops/attention_pattern.h):
//   dense, strided: every position (slot j = position j);
//   sliding, chunked: a ring of the most recent ring_slots() positions (slot j % ring);
//   fixed: a ring of the current block, then `summary` slots for every block (after the ring, in block order).
// Saved state after `position` tokens: the keys, then the values; each as kv_heads runs of used_slots(position)
// slots in slot order, head_dim elements a slot; elements float32, or float16 bits under kv_storage F16.
#pragma once

#include <algorithm>
#include <cstdint>

#include "ops/attention_pattern.h"
#include "ops/head_layout.h"

namespace tern {

struct KvStateLayout {
  AttentionPattern pattern;
  int kv_heads = 1, head_dim = 1;
  int64_t max_tokens = 0;
  uint64_t element_bytes = sizeof(float);  // 4 (float32) or 2 (float16)

  KvStateLayout(const AttentionPattern& pattern, const HeadLayout& heads, int64_t max_tokens, uint64_t element_bytes)
      : pattern(pattern), kv_heads(heads.kv_heads), head_dim(heads.head_dim), max_tokens(max_tokens),
        element_bytes(element_bytes) {}

  int64_t ring() const { return pattern.ring_slots(max_tokens); }  // 0: every position has its own slot
  int64_t slots() const { return pattern.cache_slots(max_tokens); }
  // The slot of position j.
  int64_t slot(int64_t j) const {
    const int64_t ring_slots = ring();
    if (ring_slots == 0) return j;
    if (pattern.is_summary(j)) {
      const int64_t b = pattern.block, c = pattern.summary;
      return ring_slots + (j / b) * c + (j % b - (b - c));
    }
    return j % ring_slots;
  }
  // How many positions from j on, before end, sit in consecutive slots (slot(j), slot(j) + 1, ...): at least 1 for
  // j < end. Fixed's summaries interleave with its ring positions: there, one at a time.
  int64_t consecutive_slots(int64_t j, int64_t end) const {
    const int64_t ring_slots = ring();
    if (ring_slots == 0) return end - j;
    if (pattern.kind == PatternKind::kFixed) return 1;
    return std::min(end - j, ring_slots - j % ring_slots);
  }
  // Bytes of the keys and values of `slot_count` slots of every head.
  uint64_t bytes_of(int64_t slot_count) const {
    return 2ull * uint64_t(kv_heads) * uint64_t(head_dim) * element_bytes * uint64_t(slot_count);
  }
  uint64_t bytes() const { return bytes_of(slots()); }

  // The saved state after `position` tokens: its slots per head, its bytes, and where head h's slot s of the keys
  // (part 0) or the values (part 1) starts in it.
  int64_t used_slots(int64_t position) const { return pattern.used_slots(max_tokens, position); }
  uint64_t saved_bytes(int64_t position) const { return bytes_of(used_slots(position)); }
  uint64_t saved_offset(int part, int h, int64_t s, int64_t position) const {
    return ((uint64_t(part) * uint64_t(kv_heads) + uint64_t(h)) * uint64_t(used_slots(position)) + uint64_t(s)) *
           uint64_t(head_dim) * element_bytes;
  }
};

}  // namespace tern
