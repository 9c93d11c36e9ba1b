// SPDX-License-Identifier: MIT
// EMBEDDING: ids [n] (I32) -> table[ids] * scale [n, d]. weights: table [V, d].
#include <cmath>
#include <cstring>

#include "ops/op.h"
#include "ops/reference.h"

namespace tern {
namespace {

Status validate(const Node& node, const std::vector<ValueInfo>& values) {
  const TensorInfo* table = node.weights[0];
  if (table->shape.size() != 2 || table->shape[0] < 1) return InvalidModel(node.label() + ": table '" + table->name + "' must be [V, d]");
  if (!std::isfinite(node.fb_op->params_as_EmbeddingParams()->scale())) return InvalidModel(node.label() + ": scale must be finite");
  TERN_RETURN_IF_ERROR(expect_width(node, values, false, 0, 1));
  return expect_width(node, values, true, 0, table->shape[1]);
}

// W (LINEAR) or the table (EMBEDDING); the bias stays F32.
bool compressible(fb::AttentionKind /*kind*/, int slot) { return slot == 0; }

// The table's rows.
int64_t token_ids(const Node& node) { return node.weights[0]->shape[0]; }

}  // namespace

void ref::embedding(const float* table, int64_t d, const int32_t* ids, int64_t n, float* out, float scale) {
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) out[i * d + j] = table[int64_t(ids[i]) * d + j] * scale;
  }
}

extern const OpDef kEmbeddingOp = {fb::OpCode::EMBEDDING, "EMBEDDING", 1, 1, 1, fb::OpParams::EmbeddingParams,
                                   validate, nullptr, nullptr, streams<Streaming::kRowWise>, nullptr, nullptr, nullptr,
                                   compressible, token_ids};

}  // namespace tern
