// SPDX-License-Identifier: MIT
// ADD: a [n, d] + b [n, d].
#include "ops/op.h"
#include "ops/reference.h"

namespace tern {
namespace {

Status validate(const Node& node, const std::vector<ValueInfo>& values) {
  int64_t d = values[node.inputs[0]].width;
  TERN_RETURN_IF_ERROR(expect_width(node, values, false, 1, d));
  return expect_width(node, values, true, 0, d);
}

}  // namespace

void ref::add(const float* a, const float* b, int64_t count, float* out) {
  for (int64_t i = 0; i < count; ++i) out[i] = a[i] + b[i];
}

extern const OpDef kAddOp = {fb::OpCode::ADD, "ADD", 2, 0, 0, fb::OpParams::AddParams, validate, nullptr, nullptr, streams<Streaming::kRowWise>, nullptr, nullptr, nullptr,
                            nullptr, nullptr, /*elementwise=*/true};

}  // namespace tern
