// SPDX-License-Identifier: MIT
// Where an attention op's heads sit in the rows it projects: the one description that the validation, the reference
// kernels, the CPU kernels and the Vulkan lowerings (through their shaders' push constants) read, instead of each
// writing 3*heads*head_dim offsets by hand.
//
//   q | k | v   (every kind but LSH): row [inner + 2*kv_inner]: q at column 0, k at inner, v at inner + kv_inner
//   qk | v      (Reformer LSH, shared query-key): row [2*inner]: q and k both at column 0, v at inner
//
// Head h's query starts at q + h*head_dim; its key and value at k + kv_head(h)*head_dim and v + kv_head(h)*head_dim.
// Grouped-query attention lets several query heads share one key/value head: query head h reads key/value head
// h / (heads / kv_heads) (AttentionParams.kv_heads; the kinds that allow it: ops/attention_kinds.h).
#pragma once

#include <cstdint>

namespace tern {

// How a kind's projected row holds queries, keys and values (a column of the kind table, ops/attention_kinds.h).
enum class Projection {
  kQkv,       // q | k | v
  kSharedQk,  // qk | v: the keys are the queries (Reformer LSH)
};

struct HeadLayout {
  int heads = 1;     // query heads, and the output's heads
  int kv_heads = 1;  // key/value heads
  int head_dim = 1;
  int64_t row = 0;             // columns of one projected row
  int64_t q = 0, k = 0, v = 0;  // the first column of each block in a row

  // kv_heads 0: one per query head. A shared query-key row has as many keys as queries.
  static HeadLayout of(Projection projection, int heads, int head_dim, int kv_heads = 0) {
    HeadLayout l;
    l.heads = heads;
    l.kv_heads = kv_heads > 0 && projection == Projection::kQkv ? kv_heads : heads;
    l.head_dim = head_dim;
    const int64_t inner = l.inner(), kv_inner = l.kv_inner();
    if (projection == Projection::kSharedQk) {
      l.row = 2 * inner, l.q = 0, l.k = 0, l.v = inner;
    } else {
      l.row = inner + 2 * kv_inner, l.q = 0, l.k = inner, l.v = inner + kv_inner;
    }
    return l;
  }

  int64_t inner() const { return int64_t(heads) * head_dim; }        // query columns; the output's width
  int64_t kv_inner() const { return int64_t(kv_heads) * head_dim; }  // key (and value) columns
  int kv_head(int h) const { return h / (heads / kv_heads); }
  int64_t q_column(int h) const { return q + int64_t(h) * head_dim; }
  int64_t k_column(int h) const { return k + int64_t(kv_head(h)) * head_dim; }
  int64_t v_column(int h) const { return v + int64_t(kv_head(h)) * head_dim; }
  int64_t out_column(int h) const { return int64_t(h) * head_dim; }
};

}  // namespace tern
