// SPDX-License-Identifier: MIT
// GATED_ACTIVATION: gate | up [n, 2F] -> act(gate) * up [n, F] (SwiGLU with SILU, GeGLU with GELU_TANH).
#include <string>
#include <vector>

#include "ops/op.h"
#include "ops/reference.h"

namespace tern {
namespace {

Status validate(const Node& node, const std::vector<ValueInfo>& values) {
  const auto kind = node.fb_op->params_as_GatedActivationParams()->kind();
  if (kind != fb::ActivationKind::RELU && kind != fb::ActivationKind::GELU_ERF &&
      kind != fb::ActivationKind::GELU_TANH && kind != fb::ActivationKind::SILU) {
    return InvalidModel(node.label() + ": activation kind " + std::to_string(int(kind)) +
                        " cannot gate (RELU, GELU_ERF, GELU_TANH or SILU)");
  }
  const int64_t width = values[node.inputs[0]].width;
  if (width % 2 != 0) return InvalidModel(node.label() + ": input width " + std::to_string(width) + " is not gate | up");
  return expect_width(node, values, true, 0, width / 2);
}

}  // namespace

void ref::gated_activation(fb::ActivationKind kind, const float* x, int64_t n, int64_t f, float* out) {
  std::vector<float> gate(static_cast<size_t>(f));
  for (int64_t i = 0; i < n; ++i) {
    activation(kind, x + i * 2 * f, f, gate.data());
    for (int64_t j = 0; j < f; ++j) out[i * f + j] = float(double(gate[size_t(j)]) * double(x[i * 2 * f + f + j]));
  }
}

extern const OpDef kGatedActivationOp = {fb::OpCode::GATED_ACTIVATION, "GATED_ACTIVATION", 1, 0, 0,
                                         fb::OpParams::GatedActivationParams, validate, nullptr, nullptr,
                                         streams<Streaming::kRowWise>, nullptr, nullptr, nullptr};

}  // namespace tern
