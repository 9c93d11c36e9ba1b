// SPDX-License-Identifier: MIT
// One thread's tile of blockwise attention with online softmax (Flash-style), the same for every attention kernel
// (cpu/attention*.cpp): a block of query rows with each row's running state, and one key block a row's scores are
// taken against. Per kernel a TileShape says which parts it keeps; a kernel that needs more (LSH's key positions,
// routing's sort order) carves its own arrays after the tile from the same ScratchCarver, so that one definition
// gives both a slot's size and its pointers. The arithmetic on the tile runs in the ISA variants (cpu/isa.h).
#pragma once

#include <cmath>
#include <cstdint>

namespace tern::cpu {

// Consecutive arrays of one scratch region, in 4-byte words (ints take a float's 4 bytes). Over a null base it hands
// out null pointers and only counts: words() is then the size to reserve.
class ScratchCarver {
 public:
  explicit ScratchCarver(float* base = nullptr) : base_(base) {}

  template <typename T = float>
  T* take(int64_t count) {
    static_assert(sizeof(T) == sizeof(float), "scratch is carved in 4-byte words");
    T* p = base_ ? reinterpret_cast<T*>(base_ + words_) : nullptr;
    words_ += count;
    return p;
  }
  int64_t words() const { return words_; }

 private:
  float* base_;
  int64_t words_ = 0;
};

// Which parts of a Tile a kernel keeps.
struct TileShape {
  int64_t rows = 0;           // query rows with online-softmax state (q, acc, m, l); 0: none
  int64_t keys = 0;           // keys of one block: s [keys]
  bool key_block = false;     // also kt [dh, keys]: the block's keys transposed
  bool masked_sum = false;    // also l_masked [rows] (adaptive span)
};

// A part a TileShape leaves out is null. Rows r of q and acc start at r * dh.
struct Tile {
  float* q = nullptr;         // [rows, dh], scaled queries
  float* acc = nullptr;       // [rows, dh], running sum of p * v (adaptive span: of p * mask * v)
  float* kt = nullptr;        // [dh, keys], one key block transposed, so scores vectorise across keys
  float* s = nullptr;         // [keys], scores of one row against one key block (then its weights)
  float* m = nullptr;         // [rows], running max
  float* l = nullptr;         // [rows], running sum of p
  float* l_masked = nullptr;  // [rows], running sum of p * mask: adaptive span's mask applies after the softmax

  static Tile take(ScratchCarver& scratch, const TileShape& shape, int dh) {
    const int64_t rows = shape.rows;
    Tile t;
    t.q = scratch.take(rows * dh);
    t.acc = scratch.take(rows * dh);
    if (shape.key_block) t.kt = scratch.take(int64_t(dh) * shape.keys);
    t.s = scratch.take(shape.keys);
    t.m = scratch.take(rows);
    t.l = scratch.take(rows);
    if (shape.masked_sum) t.l_masked = scratch.take(rows);
    return t;
  }

  // Row r starts: q = query [dh] * scale, acc = 0, no keys seen yet (m = -inf, sums 0).
  void start_row(int64_t r, const float* query, float scale, int dh) const {
    for (int c = 0; c < dh; ++c) q[r * dh + c] = query[c] * scale;
    for (int c = 0; c < dh; ++c) acc[r * dh + c] = 0.0f;
    m[r] = -INFINITY;
    l[r] = 0.0f;
    if (l_masked) l_masked[r] = 0.0f;
  }

  // Row r's output out [dh] = acc * inv, inv its normaliser: 1 / l, or adaptive span's from l and l_masked.
  void write_row(int64_t r, float inv, int dh, float* out) const {
    for (int c = 0; c < dh; ++c) out[c] = acc[r * dh + c] * inv;
  }
};

// Floats of one slot's tile.
inline int64_t tile_floats(const TileShape& shape, int dh) {
  ScratchCarver count;
  Tile::take(count, shape, dh);
  return count.words();
}

// The tile at base (tile_floats(shape, dh) floats).
inline Tile tile_at(float* base, const TileShape& shape, int dh) {
  ScratchCarver scratch(base);
  return Tile::take(scratch, shape, dh);
}

}  // namespace tern::cpu
