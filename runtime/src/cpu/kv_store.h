// SPDX-License-Identifier: MIT
// The streaming state of one attention op: keys and values of past tokens that later queries can still reach,
// [kv_heads, slots, dh] each, sized at session creation and never grown. Which positions it keeps, in which slot,
// and the bytes it saves are ops/kv_state.h's KvStateLayout, which the Vulkan backend saves by too.
// Elements are float32 (T = float), or IEEE float16 bits (T = uint16_t, tern_kv_storage F16: half the bytes); a
// store copies rows of its own element type in and never converts.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cpu/huge_pages.h"
#include "format/half.h"
#include "ops/kv_state.h"

namespace tern::cpu {

// A row of n stored elements (float32, or float16 bits) as float32, and back (rounded to nearest even).
template <typename T>
void widen_row(const T* in, int64_t n, float* out) {
  if constexpr (std::is_same_v<T, float>) {
    std::memcpy(out, in, size_t(n) * sizeof(float));
  } else {
    tern::halves_to_floats(in, out, 0, size_t(n));
  }
}
template <typename T>
void narrow_row(const float* in, int64_t n, T* out) {
  if constexpr (std::is_same_v<T, float>) {
    std::memcpy(out, in, size_t(n) * sizeof(float));
  } else {
    tern::floats_to_halves(in, out, 0, size_t(n));
  }
}

template <typename T>
class KvStore {
 public:
  // buffers: where the keys and values are allocated (the session's; null: the library's own).
  KvStore(const AttentionPattern& pattern, const HeadLayout& heads, int64_t max_tokens, BufferSource* buffers)
      : layout_(pattern, heads, max_tokens, sizeof(T)),
        heads_(heads),
        k_(large_vector<T>(buffers)),
        v_(large_vector<T>(buffers)) {
    slots_ = layout_.slots();
    const size_t elements = size_t(heads.kv_heads) * size_t(slots_) * size_t(heads.head_dim);
    k_.assign(elements, T(0));
    v_.assign(elements, T(0));
  }

  // Key / value head h's row at position j.
  const T* key(int h, int64_t j) const { return &k_[index(h, j)]; }
  const T* value(int h, int64_t j) const { return &v_[index(h, j)]; }
  // How many positions from j on, before end, have their rows one after another (KvStateLayout::consecutive_slots):
  // key(h, j + e) is key(h, j) + e * head_dim for e below it, and the same for values.
  int64_t consecutive(int64_t j, int64_t end) const { return layout_.consecutive_slots(j, end); }

  // Keeps what later queries need of this call's keys and values: rows [n, stride] at positions pos0..pos0+n-1,
  // key/value head h's key at row + key_offset + h*dh, its value at row + value_offset + h*dh.
  void append(const T* rows, int64_t stride, int64_t key_offset, int64_t value_offset, int64_t pos0, int64_t n) {
    const int64_t ring = layout_.ring();
    const int dh = heads_.head_dim;
    for (int64_t r = 0; r < n; ++r) {
      const int64_t j = pos0 + r;
      // A ring slot written now would be overwritten later in this same call.
      if (ring > 0 && !layout_.pattern.is_summary(j) && j < pos0 + n - ring) continue;
      for (int h = 0; h < heads_.kv_heads; ++h) {
        const T* row = rows + r * stride + int64_t(h) * dh;
        std::memcpy(&k_[index(h, j)], row + key_offset, size_t(dh) * sizeof(T));
        std::memcpy(&v_[index(h, j)], row + value_offset, size_t(dh) * sizeof(T));
      }
    }
  }

  uint64_t bytes() const { return (k_.size() + v_.size()) * sizeof(T); }

  // Key/value head h's key at position j as float32 row [dh], and back (rounded to float16 under T = uint16_t).
  void read_key(int h, int64_t j, float* row) const { widen(&k_[index(h, j)], row); }
  void write_key(int h, int64_t j, const float* row) { narrow(row, &k_[index(h, j)]); }
  void read_value(int h, int64_t j, float* row) const { widen(&v_[index(h, j)], row); }
  void write_value(int h, int64_t j, const float* row) { narrow(row, &v_[index(h, j)]); }
  // Head h's value of position `from` copied to position `to`.
  void move_value(int h, int64_t from, int64_t to) {
    std::memmove(&v_[index(h, to)], &v_[index(h, from)], size_t(heads_.head_dim) * sizeof(T));
  }

  // Saved state (KvStateLayout): keys then values, per key/value head its used slots, as elements of T.
  uint64_t saved_bytes(int64_t position) const { return layout_.saved_bytes(position); }
  void save(int64_t position, uint8_t* out) const {
    const size_t run = size_t(layout_.used_slots(position)) * size_t(heads_.head_dim) * sizeof(T);
    for (int part = 0; part < 2; ++part)
      for (int h = 0; h < heads_.kv_heads; ++h) {
        std::memcpy(out + layout_.saved_offset(part, h, 0, position), head_rows(part, h), run);
      }
  }
  void load(int64_t position, const uint8_t* in) {
    const size_t run = size_t(layout_.used_slots(position)) * size_t(heads_.head_dim) * sizeof(T);
    for (int part = 0; part < 2; ++part)
      for (int h = 0; h < heads_.kv_heads; ++h) {
        std::memcpy(head_rows(part, h), in + layout_.saved_offset(part, h, 0, position), run);
      }
  }

 private:
  void widen(const T* in, float* out) const { widen_row(in, heads_.head_dim, out); }
  void narrow(const float* in, T* out) const { narrow_row(in, heads_.head_dim, out); }
  size_t index(int h, int64_t j) const {
    return (size_t(h) * size_t(slots_) + size_t(layout_.slot(j))) * size_t(heads_.head_dim);
  }
  // Key/value head h's slots of the keys (part 0) or the values (part 1).
  const T* head_rows(int part, int h) const {
    return (part == 0 ? k_ : v_).data() + size_t(h) * size_t(slots_) * size_t(heads_.head_dim);
  }
  T* head_rows(int part, int h) {
    return (part == 0 ? k_ : v_).data() + size_t(h) * size_t(slots_) * size_t(heads_.head_dim);
  }

  KvStateLayout layout_;
  HeadLayout heads_;
  int64_t slots_ = 0;
  LargeVector<T> k_, v_;  // [kv_heads, slots, dh], read whole by every generated token
};

}  // namespace tern::cpu
