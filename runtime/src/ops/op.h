// SPDX-License-Identifier: MIT
// An op is one registry entry of facts: what the loader checks, what the planner and a session need to know of it
// (state bytes, dense bytes, how it streams). No backend code: each backend keeps its own op -> kernel table
// (cpu/op_table.cpp, vulkan/op_table.cpp). Adding an op: a schema entry, ops/<op>.cpp (facts + reference kernel),
// a row in registry.cpp, and a row in each backend's table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "format/model.h"
#include "format/status.h"
#include "tern/tern.h"

namespace tern {

// How an op's output rows depend on the rows of the same call and of earlier calls: what a backend may split and
// what a session may continue.
enum class Streaming {
  // Row i of every output needs only row i of the inputs (and the weights), and the op holds no state: it may run on
  // any block of rows.
  kRowWise,
  // Row i needs rows <= i only, and what later rows need of earlier ones is in the op's streaming state (a KV cache
  // or a ring of the window's keys): a call may be split into consecutive appends with the same rows.
  kAppends,
  // A call runs as one unit (e.g. Transformer-XL memory moves once per call; LSH buckets and routing clusters see
  // the whole first call), and the next call continues it.
  kWholeCall,
};

struct OpDef {
  fb::OpCode code;
  const char* name;
  int inputs;        // exact count
  int min_weights;   // required weights first, optional ones after
  int max_weights;
  fb::OpParams params;
  // Checks params, weight shapes and value widths. Counts, indices and param type are checked before.
  Status (*validate)(const Node& node, const std::vector<ValueInfo>& values);
  // Bytes of streaming state the op holds after n tokens (for the planner), its keys and values stored as `kv`
  // says where the op keeps a KV store (tern_kv_storage; the backend says which it runs); null for stateless ops.
  uint64_t (*state_bytes)(const Node& node, int64_t n, tern_kv_storage kv);
  // Bytes a dense implementation would materialise for n tokens (scores), 0 if none.
  uint64_t (*dense_bytes)(const Node& node, int64_t n);
  // The node's streaming class (of a validated node).
  Streaming (*streaming)(const Node& node);
  // The most tokens a sequence may hold through the node in a session whose state was sized for max_tokens: that
  // number where its state grows with the sequence or its positions come from a table bound up to max_tokens;
  // kNoSequenceLimit where it runs any length in the state it has. Null: no limit (stateless and position-free).
  int64_t (*max_sequence)(const Node& node, int64_t max_tokens);
  // Bytes a kernel computes at creation for calls of up to max_batch tokens, beyond its weights and state (e.g.
  // Transformer-XL's r(p) for every distance a call reads), counted before they are allocated; null for none.
  uint64_t (*setup_bytes)(const Node& node, int64_t max_batch);
  // Floating-point operations of a call of n tokens at position pos0, from the op's shapes (a multiply-add counts
  // two), for profiles: what the op must compute, not what a kernel spends on masked or padded work. Null: the op
  // does not count them.
  uint64_t (*flops)(const Node& node, int64_t pos0, int64_t n);
  // True when weight `slot` may be stored compressed (F16, I8, I4: schema/tern.fbs, Tensor) because every backend
  // reads it so; `kind` is the attention kind of an ATTENTION op, NONE for the others (the converter asks before
  // there is a Node). Null: every weight is F32.
  bool (*compressible)(fb::AttentionKind kind, int slot) = nullptr;
  // For an op that reads the token ids (the graph's input): the ids it can look up are [0, token_ids(node)). Null
  // for the ops that read no ids.
  int64_t (*token_ids)(const Node& node) = nullptr;
  // True when element i of the output depends on element i of the inputs only (ADD, ACTIVATION): the output may
  // take the rows of an input the op reads for the last time (cpu/row_chains.cpp places them in place).
  bool elementwise = false;
};

// max_sequence of a node that runs sequences of any length in bounded state.
constexpr int64_t kNoSequenceLimit = INT64_MAX;
// The tokens a node allows in a session sized for max_tokens (OpDef::max_sequence, or kNoSequenceLimit without one).
int64_t max_sequence(const Node& node, int64_t max_tokens);

// The op's facts; null for a code this runtime does not know.
const OpDef* find_op(fb::OpCode code);

// For OpDef::streaming of ops whose class does not depend on the node.
template <Streaming S>
Streaming streams(const Node& /*node*/) {
  return S;
}

// True when rows[i].code is op code i for every code of the schema and there are no more rows: each backend's op
// table static_asserts this, so it covers every op in schema order.
template <typename Row, size_t N>
constexpr bool covers_every_op_code(const Row (&rows)[N]) {
  if (N != size_t(fb::OpCode::MAX) + 1) return false;
  for (size_t i = 0; i < N; ++i) {
    if (size_t(rows[i].code) != i) return false;
  }
  return true;
}

// Helpers for validate().
Status expect_width(const Node& node, const std::vector<ValueInfo>& values, bool output, int i, int64_t width);
Status expect_shape(const Node& node, int weight, const std::vector<int64_t>& shape);

}  // namespace tern
