// The streaming state of one attention op: keys and values of past tokens that later queries can still reach,
// [heads, slots, dh] each, sized at session creation and never grown.
//   dense, strided: every position (slots = max_tokens) — these kinds reach back to the first token by definition;
//   sliding, chunked: a ring of the most recent ring_keys() positions;
//   fixed: a ring of the current block, plus `summary` slots for every block.
// Elements are float32 (T = float), or IEEE float16 bits (T = uint16_t, tern_kv_storage F16: half the bytes); a
// store copies rows of its own element type in and never converts.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cpu/huge_pages.h"
#include "ops/attention_pattern.h"

namespace tern::cpu {

template <typename T>
class KvStore {
 public:
  KvStore(const AttentionPattern& pattern, int heads, int head_dim, int64_t max_tokens)
      : pattern_(pattern), heads_(heads), dh_(head_dim), max_tokens_(max_tokens) {
    ring_ = pattern.ring_slots(max_tokens);
    slots_ = pattern.cache_slots(max_tokens);
    const size_t elements = size_t(heads) * size_t(slots_) * size_t(head_dim);
    k_.assign(elements, T(0));
    v_.assign(elements, T(0));
  }

  const T* key(int h, int64_t j) const { return &k_[index(h, j)]; }
  const T* value(int h, int64_t j) const { return &v_[index(h, j)]; }

  // Keeps what later queries need of this call's keys and values: rows [n, stride] at positions pos0..pos0+n-1,
  // head h's key at row + key_offset + h*dh, its value at row + value_offset + h*dh.
  void append(const T* rows, int64_t stride, int64_t key_offset, int64_t value_offset, int64_t pos0, int64_t n) {
    for (int64_t r = 0; r < n; ++r) {
      const int64_t j = pos0 + r;
      // A ring slot written now would be overwritten later in this same call.
      if (ring_ > 0 && !pattern_.is_summary(j) && j < pos0 + n - ring_) continue;
      for (int h = 0; h < heads_; ++h) {
        const T* row = rows + r * stride + int64_t(h) * dh_;
        std::memcpy(&k_[index(h, j)], row + key_offset, size_t(dh_) * sizeof(T));
        std::memcpy(&v_[index(h, j)], row + value_offset, size_t(dh_) * sizeof(T));
      }
    }
  }

  uint64_t bytes() const { return (k_.size() + v_.size()) * sizeof(T); }

  // Saved state: per head the slots a sequence of `position` tokens uses (every position for dense and strided, the
  // ring plus the summaries so far for the bounded kinds), keys then values, as elements of T.
  int64_t used_slots(int64_t position) const { return pattern_.used_slots(max_tokens_, position); }
  uint64_t saved_bytes(int64_t position) const {
    return 2ull * uint64_t(heads_) * uint64_t(used_slots(position)) * uint64_t(dh_) * sizeof(T);
  }
  void save(int64_t position, uint8_t* out) const {
    const size_t run = size_t(used_slots(position)) * size_t(dh_) * sizeof(T);
    for (const LargeVector<T>* buf : {&k_, &v_})
      for (int h = 0; h < heads_; ++h, out += run) std::memcpy(out, buf->data() + size_t(h) * size_t(slots_) * size_t(dh_), run);
  }
  void load(int64_t position, const uint8_t* in) {
    const size_t run = size_t(used_slots(position)) * size_t(dh_) * sizeof(T);
    for (LargeVector<T>* buf : {&k_, &v_})
      for (int h = 0; h < heads_; ++h, in += run) std::memcpy(buf->data() + size_t(h) * size_t(slots_) * size_t(dh_), in, run);
  }

 private:
  size_t index(int h, int64_t j) const { return (size_t(h) * size_t(slots_) + size_t(slot(j))) * size_t(dh_); }
  int64_t slot(int64_t j) const {
    if (ring_ == 0) return j;
    if (pattern_.is_summary(j)) {
      const int64_t b = pattern_.block, c = pattern_.summary;
      return ring_ + (j / b) * c + (j % b - (b - c));
    }
    return j % ring_;
  }

  AttentionPattern pattern_;
  int heads_, dh_;
  int64_t max_tokens_;
  int64_t ring_ = 0;   // 0: every position has its own slot
  int64_t slots_ = 0;
  LargeVector<T> k_, v_;  // [heads, slots, dh], read whole by every generated token
};

}  // namespace tern::cpu
