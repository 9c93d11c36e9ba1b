// SPDX-License-Identifier: MIT
// ACTIVATION: elementwise RELU, GELU_ERF (exact), GELU_TANH, SILU or SOFTCAP (cap * tanh(x / cap)) on [n, d].
#include <cmath>

#include "ops/op.h"
#include "ops/reference.h"

namespace tern {
namespace {

Status validate(const Node& node, const std::vector<ValueInfo>& values) {
  const auto* p = node.fb_op->params_as_ActivationParams();
  const auto kind = p->kind();
  if (kind != fb::ActivationKind::RELU && kind != fb::ActivationKind::GELU_ERF && kind != fb::ActivationKind::GELU_TANH &&
      kind != fb::ActivationKind::SILU && kind != fb::ActivationKind::SOFTCAP) {
    return InvalidModel(node.label() + ": unknown activation kind " + std::to_string(int(kind)));
  }
  if (kind == fb::ActivationKind::SOFTCAP && !(std::isfinite(p->cap()) && p->cap() > 0.0f)) {
    return InvalidModel(node.label() + ": a soft-cap needs a positive finite cap");
  }
  return expect_width(node, values, true, 0, values[node.inputs[0]].width);
}

}  // namespace

void ref::activation(fb::ActivationKind kind, const float* x, int64_t count, float* out, float cap) {
  for (int64_t i = 0; i < count; ++i) {
    double v = x[i];
    switch (kind) {
      case fb::ActivationKind::RELU: out[i] = float(v > 0 ? v : 0); break;
      case fb::ActivationKind::GELU_ERF: out[i] = float(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)))); break;
      case fb::ActivationKind::GELU_TANH:
        out[i] = float(0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v))));
        break;
      case fb::ActivationKind::SILU: out[i] = float(v / (1.0 + std::exp(-v))); break;
      case fb::ActivationKind::SOFTCAP: out[i] = float(double(cap) * std::tanh(v / double(cap))); break;
    }
  }
}

extern const OpDef kActivationOp = {fb::OpCode::ACTIVATION, "ACTIVATION", 1, 0, 0, fb::OpParams::ActivationParams,
                                    validate, nullptr, nullptr, streams<Streaming::kRowWise>, nullptr, nullptr, nullptr,
                                    nullptr, nullptr, /*elementwise=*/true};

}  // namespace tern
