// SPDX-License-Identifier: MIT
// The attention kinds of ATTENTION (schema/tern.fbs's AttentionKind union), in one table of facts: how each
// validates, where its projected rows hold queries, keys and values, the streaming state it keeps, what a dense
// implementation would materialise, how it streams, what it computes at creation, its flops and which weights may be
// compressed. Nothing outside this table branches on a kind for these facts.
// Each backend has its own table of the same kinds (cpu/op_table.cpp, vulkan/op_table.cpp); every table is checked
// at compile time to list every kind in schema order, so a kind added to the schema and missing from one fails the
// build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "format/model.h"
#include "format/status.h"
#include "ops/head_layout.h"
#include "ops/op.h"

namespace tern {

// Kinds 1..kAttentionKindCount (0 is the union's NONE).
constexpr size_t kAttentionKindCount = size_t(fb::AttentionKind::MAX);

struct AttentionKindDef {
  fb::AttentionKind kind;
  const char* name;  // the schema's name, for messages
  // How the rows the kind projects hold queries, keys and values (ops/head_layout.h): the input rows for the kinds
  // that read them, the rows a kind projects itself from its input for RelativeXL and Compressive.
  Projection projection;
  // Checks the kind's parameters and weights and the op's input and output widths; heads, head_dim, scale and
  // causality are checked before, for every kind.
  Status (*validate)(const Node& node, const std::vector<ValueInfo>& values);
  // Bytes of streaming state after n tokens (what the planner reports); `kv` changes only the kinds whose state is
  // a KV store (dense, sliding, chunked, strided, fixed), the others keep float32 state under either.
  uint64_t (*state_bytes)(const Node& node, int64_t n, tern_kv_storage kv);
  // Bytes of one call's n x keys score matrix in a dense implementation.
  uint64_t (*dense_bytes)(const Node& node, int64_t n);
  Streaming streaming;
  // OpDef::max_sequence: max_tokens where the state grows with the sequence (every key, every block's summaries) or
  // where what later queries reach is wider than the state a session of max_tokens holds; kNoSequenceLimit where
  // the state is complete and bounded (a window's ring, a span, a memory).
  int64_t (*max_sequence)(const Node& node, int64_t max_tokens);
  // OpDef::setup_bytes: bytes the kernels compute at creation for calls of up to max_batch tokens; null for none.
  uint64_t (*setup_bytes)(const Node& node, int64_t max_batch);
  // OpDef::flops of a call of n tokens at pos0; null where the kind does not count them.
  uint64_t (*flops)(const Node& node, int64_t pos0, int64_t n);
  // OpDef::compressible: bit `slot` set when weight `slot` may be stored compressed (every backend reads it so).
  uint32_t compressible_slots;
  // True when the state only a later call reads (an LSH or routing layer's generation cache), which a forward_only
  // session does not keep; false where a call itself uses it (a KV cache that row blocks of one call read).
  bool state_serves_later_calls_only;
  // True when query heads may share key/value heads (AttentionParams.kv_heads below heads): the kinds whose kernels
  // read every key and value through the head layout.
  bool grouped_kv;
  // True when the kind soft-caps its scores (AttentionParams.logit_softcap).
  bool soft_caps;
};

// state_serves_later_calls_only of an ATTENTION node's kind; false for every other op.
bool state_serves_later_calls_only(const Node& node);

// Where a validated ATTENTION node's projected rows hold each head's query, key and value; by kind for the kinds'
// own parameter structs (RoutingAttention::layout and the like), which tests also build without a node.
HeadLayout head_layout(const Node& node);
HeadLayout head_layout(fb::AttentionKind kind, int heads, int head_dim, int kv_heads = 0);

// The kind of a validated ATTENTION node.
const AttentionKindDef& attention_kind(const Node& node);
// Null for a kind outside 1..kAttentionKindCount (a file from a newer schema, or NONE).
const AttentionKindDef* find_attention_kind(fb::AttentionKind kind);

// True when rows[i].kind is kind i + 1 for every kind and there are no more rows: each backend's kind table
// static_asserts this, so it covers every kind in schema order.
template <typename Row, size_t N>
constexpr bool covers_every_attention_kind(const Row (&rows)[N]) {
  if (N != kAttentionKindCount) return false;
  for (size_t i = 0; i < N; ++i) {
    if (size_t(rows[i].kind) != i + 1) return false;
  }
  return true;
}

}  // namespace tern
