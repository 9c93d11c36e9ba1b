// SPDX-License-Identifier: MIT
// Attention sinks (StreamingLLM, Xiao et al. 2023; tern_session_options.sink_tokens / sink_window): the cache of a
// dense attention op fed by ROTARY, in the semantics of the reference code's evaluation loop (streaming-llm's
// StartRecentKVCache with the Llama pos_shift attention):
//   - keys are cached BEFORE rotation;
//   - in every call, cache entry e (0 <= e < held(pos0)) is rotated as position e, and the call's row r (key and
//     query alike) as position held(pos0) + r; a query sees every cache entry and the call's rows up to its own;
//   - nothing is evicted inside a call; after it, the cache is cut back to the first S entries and the W most recent.
// So after tokens 0..P-1 the cache holds positions {0..min(S, P)-1} and {max(S, P-W)..P-1}, whatever the calls were:
// min(P, S + W) entries. One token then attends to up to S + W + 1 keys; a prompt longer than S + W runs whole.
// Every backend keeps these facts from here and saves the same bytes (saved_bytes).
#pragma once

#include <algorithm>
#include <cstdint>

namespace tern {

struct SinkCache {
  int64_t sinks = 0;   // S: the first tokens, never evicted
  int64_t window = 0;  // W: the most recent tokens; 0 means no sinks (a session without them)

  bool on() const { return window > 0; }
  int64_t capacity() const { return sinks + window; }  // slots per key/value head
  // Entries held before a call that starts at position pos0 (after the cut of the call before).
  int64_t held(int64_t pos0) const { return std::min(pos0, capacity()); }
  // The position cache entry e holds before a call at pos0 (e < held(pos0)), in cache order.
  int64_t position_of(int64_t e, int64_t pos0) const {
    return pos0 <= capacity() || e < sinks ? e : pos0 - window + (e - sinks);
  }
  // Whether position p is still held after a call ending at `end` (p < end).
  bool kept(int64_t p, int64_t end) const { return p < sinks || p >= end - window; }
  // The slot of a held position: the sinks in order, then a ring of W.
  int64_t slot(int64_t p) const { return p < sinks ? p : sinks + (p - sinks) % window; }

  // Saved state after `position` tokens (tern_session_save_state): the two counts S and W as int64 (a state loads
  // only into a session with the same ones), then the keys (unrotated), then the values; each as kv_heads runs of
  // held(position) entries in cache order, head_dim elements an entry (float32, or float16 bits under kv_storage F16).
  static constexpr uint64_t kCountBytes = 2 * sizeof(int64_t);
  uint64_t saved_bytes(int64_t position, int kv_heads, int head_dim, uint64_t element_bytes) const {
    return kCountBytes + 2ull * uint64_t(kv_heads) * uint64_t(held(position)) * uint64_t(head_dim) * element_bytes;
  }
  // Where head h's entry e of the keys (part 0) or the values (part 1) starts in the saved bytes.
  uint64_t saved_offset(int part, int h, int64_t e, int64_t position, int kv_heads, int head_dim,
                        uint64_t element_bytes) const {
    return kCountBytes + ((uint64_t(part) * uint64_t(kv_heads) + uint64_t(h)) * uint64_t(held(position)) + uint64_t(e)) *
                             uint64_t(head_dim) * element_bytes;
  }
};

}  // namespace tern
