// SPDX-License-Identifier: MIT
// LAYER_NORM: x [n, d] -> (x - mean) / sqrt(var + eps) * gamma + beta. weights: gamma [d], beta [d] (optional).
#include <cmath>

#include "ops/op.h"
#include "ops/reference.h"

namespace tern {
namespace {

Status validate(const Node& node, const std::vector<ValueInfo>& values) {
  int64_t d = values[node.inputs[0]].width;
  TERN_RETURN_IF_ERROR(expect_width(node, values, true, 0, d));
  TERN_RETURN_IF_ERROR(expect_shape(node, 0, {d}));
  if (node.weights.size() > 1 && node.weights[1]) TERN_RETURN_IF_ERROR(expect_shape(node, 1, {d}));
  float eps = node.fb_op->params_as_LayerNormParams()->eps();
  if (!(eps > 0.0f) || !std::isfinite(eps)) return InvalidModel(node.label() + ": eps must be positive and finite");
  return Status::Ok();
}

}  // namespace

void ref::layer_norm(const float* x, int64_t n, int64_t d, const float* gamma, const float* beta, float eps, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float* row = x + i * d;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < d; ++j) mean += row[j];
    mean /= double(d);
    for (int64_t j = 0; j < d; ++j) var += (row[j] - mean) * (row[j] - mean);
    var /= double(d);
    double inv = 1.0 / std::sqrt(var + double(eps));
    for (int64_t j = 0; j < d; ++j) {
      out[i * d + j] = float((row[j] - mean) * inv * gamma[j] + (beta ? beta[j] : 0.0));
    }
  }
}

extern const OpDef kLayerNormOp = {fb::OpCode::LAYER_NORM, "LAYER_NORM", 1, 1, 2, fb::OpParams::LayerNormParams,
                                   validate, nullptr, nullptr, streams<Streaming::kRowWise>, nullptr, nullptr, nullptr};

}  // namespace tern
