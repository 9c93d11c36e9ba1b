// SPDX-License-Identifier: MIT
#include <iterator>
#include <string>

#include "ops/op.h"

namespace tern {

extern const OpDef kEmbeddingOp;
extern const OpDef kPositionOp;
extern const OpDef kLayerNormOp;
extern const OpDef kLinearOp;
extern const OpDef kActivationOp;
extern const OpDef kAddOp;
extern const OpDef kAttentionOp;
extern const OpDef kLogSoftmaxOp;
extern const OpDef kAdaptiveEmbeddingOp;
extern const OpDef kAdaptiveLogSoftmaxOp;
extern const OpDef kConcatOp;
extern const OpDef kRmsNormOp;
extern const OpDef kRotaryOp;
extern const OpDef kGatedActivationOp;

// The one list of ops this runtime knows, in op code order (every code of the schema).
const OpDef* find_op(fb::OpCode code) {
  static const OpDef* const kOps[] = {&kEmbeddingOp, &kPositionOp, &kLayerNormOp, &kLinearOp,
                                      &kActivationOp, &kAddOp, &kAttentionOp, &kLogSoftmaxOp,
                                      &kAdaptiveEmbeddingOp, &kAdaptiveLogSoftmaxOp, &kConcatOp,
                                      &kRmsNormOp, &kRotaryOp, &kGatedActivationOp};
  static_assert(std::size(kOps) == size_t(fb::OpCode::MAX) + 1, "one entry per op code of the schema");
  const auto i = size_t(code);
  if (i >= std::size(kOps) || kOps[i]->code != code) return nullptr;
  return kOps[i];
}

int64_t max_sequence(const Node& node, int64_t max_tokens) {
  const OpDef* def = find_op(node.code);
  return def && def->max_sequence ? def->max_sequence(node, max_tokens) : kNoSequenceLimit;
}

Status expect_width(const Node& node, const std::vector<ValueInfo>& values, bool output, int i, int64_t width) {
  int v = output ? node.outputs[i] : node.inputs[i];
  if (values[v].width != width) {
    return InvalidModel(node.label() + ": " + (output ? "output" : "input") + " '" + values[v].name + "' has width " +
                        std::to_string(values[v].width) + ", expected " + std::to_string(width));
  }
  return Status::Ok();
}

Status expect_shape(const Node& node, int weight, const std::vector<int64_t>& shape) {
  const TensorInfo* t = node.weights[weight];
  if (t->shape != shape) {
    TensorInfo want;
    want.shape = shape;
    return InvalidModel(node.label() + ": weight '" + t->name + "' has shape " + t->shape_string() + ", expected " +
                        want.shape_string());
  }
  return Status::Ok();
}

}  // namespace tern
