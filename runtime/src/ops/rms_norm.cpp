// SPDX-License-Identifier: MIT
// RMS_NORM: x [n, w] -> groups of `group` columns among the first c RMS-normalised and scaled by
// (weight_offset + gain), columns c..w-1 copied. weights: gain [c].
#include <cmath>
#include <string>

#include "ops/op.h"
#include "ops/reference.h"

namespace tern {
namespace {

Status validate(const Node& node, const std::vector<ValueInfo>& values) {
  const auto* p = node.fb_op->params_as_RmsNormParams();
  const int64_t width = values[node.inputs[0]].width;
  TERN_RETURN_IF_ERROR(expect_width(node, values, true, 0, width));
  const TensorInfo* gain = node.weights[0];
  if (gain->shape.size() != 1 || gain->shape[0] < 1 || gain->shape[0] > width) {
    return InvalidModel(node.label() + ": gain '" + gain->name + "' has shape " + gain->shape_string() +
                        ", expected [c] with 1 <= c <= " + std::to_string(width));
  }
  const int64_t c = gain->shape[0];
  if (p->group() < 0 || (p->group() > 0 && c % p->group() != 0)) {
    return InvalidModel(node.label() + ": group " + std::to_string(p->group()) + " must divide the gain's " +
                        std::to_string(c) + " columns");
  }
  if (!(p->eps() > 0.0f) || !std::isfinite(p->eps())) return InvalidModel(node.label() + ": eps must be positive and finite");
  if (!std::isfinite(p->weight_offset())) return InvalidModel(node.label() + ": weight_offset must be finite");
  return Status::Ok();
}

}  // namespace

void ref::rms_norm(const float* x, int64_t n, int64_t width, const float* gain, int64_t c, int64_t group,
                   float weight_offset, float eps, float* out) {
  if (group == 0) group = c;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = x + i * width;
    float* o = out + i * width;
    for (int64_t g0 = 0; g0 < c; g0 += group) {
      double squares = 0;
      for (int64_t j = g0; j < g0 + group; ++j) squares += double(row[j]) * double(row[j]);
      const double inv = 1.0 / std::sqrt(squares / double(group) + double(eps));
      for (int64_t j = g0; j < g0 + group; ++j) o[j] = float(double(row[j]) * inv * (double(weight_offset) + gain[j]));
    }
    for (int64_t j = c; j < width; ++j) o[j] = row[j];
  }
}

extern const OpDef kRmsNormOp = {fb::OpCode::RMS_NORM, "RMS_NORM", 1, 1, 1, fb::OpParams::RmsNormParams,
                                 validate, nullptr, nullptr, streams<Streaming::kRowWise>, nullptr, nullptr, nullptr};

}  // namespace tern
