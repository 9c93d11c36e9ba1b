// SPDX-License-Identifier: MIT
// LINEAR: x [n, in] -> x W^T + b [n, out]. weights: W [out, in], b [out] (optional).
#include "ops/op.h"
#include "ops/reference.h"

namespace tern {
namespace {

Status validate(const Node& node, const std::vector<ValueInfo>& values) {
  const TensorInfo* w = node.weights[0];
  if (w->shape.size() != 2) return InvalidModel(node.label() + ": weight '" + w->name + "' must be [out, in]");
  TERN_RETURN_IF_ERROR(expect_width(node, values, false, 0, w->shape[1]));
  TERN_RETURN_IF_ERROR(expect_width(node, values, true, 0, w->shape[0]));
  if (node.weights.size() > 1 && node.weights[1]) TERN_RETURN_IF_ERROR(expect_shape(node, 1, {w->shape[0]}));
  return Status::Ok();
}

// x W^T: n * out dot products of length in.
uint64_t flops(const Node& node, int64_t /*pos0*/, int64_t n) {
  const TensorInfo* w = node.weights[0];
  return 2 * uint64_t(n) * uint64_t(w->shape[0]) * uint64_t(w->shape[1]);
}

// W (LINEAR) or the table (EMBEDDING); the bias stays F32.
bool compressible(fb::AttentionKind /*kind*/, int slot) { return slot == 0; }

}  // namespace

void ref::linear(const float* x, int64_t n, int64_t in, const float* w, const float* b, int64_t out_dim, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t o = 0; o < out_dim; ++o) {
      double acc = b ? b[o] : 0.0;
      for (int64_t j = 0; j < in; ++j) acc += double(x[i * in + j]) * double(w[o * in + j]);
      out[i * out_dim + o] = float(acc);
    }
  }
}

extern const OpDef kLinearOp = {fb::OpCode::LINEAR, "LINEAR", 1, 1, 2, fb::OpParams::LinearParams,
                                validate, nullptr, nullptr, streams<Streaming::kRowWise>, nullptr, nullptr, flops,
                                compressible};

}  // namespace tern
