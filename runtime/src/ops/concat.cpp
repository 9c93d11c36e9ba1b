// SPDX-License-Identifier: MIT
// CONCAT: a [n, da], b [n, db] -> [a | b] [n, da + db], row by row (Reformer joins its two reversible streams).
#include <cstring>

#include "ops/op.h"
#include "ops/reference.h"

namespace tern {
namespace {

Status validate(const Node& node, const std::vector<ValueInfo>& values) {
  return expect_width(node, values, true, 0, values[node.inputs[0]].width + values[node.inputs[1]].width);
}

}  // namespace

void ref::concat(const float* a, int64_t da, const float* b, int64_t db, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < da; ++j) out[i * (da + db) + j] = a[i * da + j];
    for (int64_t j = 0; j < db; ++j) out[i * (da + db) + da + j] = b[i * db + j];
  }
}

extern const OpDef kConcatOp = {fb::OpCode::CONCAT, "CONCAT", 2, 0, 0, fb::OpParams::ConcatParams, validate,
                                nullptr, nullptr, streams<Streaming::kRowWise>, nullptr, nullptr, nullptr};

}  // namespace tern
