// SPDX-License-Identifier: MIT
// POSITION: x [n, d] -> x + pe[pos0 + i]. weights: table [P, d] (LEARNED), none (SINUSOIDAL), or rows [s0, d0] and
// cols [s1, d1] (AXIAL, Reformer: pe[p] = [rows[p / s1] | cols[p % s1]], P = s0 * s1, d0 + d1 = d).
#include <cmath>

#include "ops/op.h"
#include "ops/reference.h"

namespace tern {
namespace {

Status validate(const Node& node, const std::vector<ValueInfo>& values) {
  const auto* p = node.fb_op->params_as_PositionParams();
  int64_t d = values[node.inputs[0]].width;
  TERN_RETURN_IF_ERROR(expect_width(node, values, true, 0, d));
  if (p->kind() == fb::PositionKind::AXIAL) {
    if (node.weights.size() != 2 || !node.weights[0] || !node.weights[1]) {
      return InvalidModel(node.label() + ": axial positions need two tables, rows [s0, d0] and cols [s1, d1]");
    }
    const TensorInfo* rows = node.weights[0];
    const TensorInfo* cols = node.weights[1];
    if (rows->shape.size() != 2 || cols->shape.size() != 2 || rows->shape[0] < 1 || cols->shape[0] < 1 ||
        rows->shape[1] < 1 || cols->shape[1] < 1 || rows->shape[1] + cols->shape[1] != d) {
      return InvalidModel(node.label() + ": axial tables " + rows->shape_string() + " and " + cols->shape_string() +
                          " must be [s0, d0] and [s1, d1] with d0 + d1 = " + std::to_string(d));
    }
    if (p->max_positions() != rows->shape[0] * cols->shape[0]) {
      return InvalidModel(node.label() + ": axial max_positions must be s0 * s1 = " + std::to_string(rows->shape[0] * cols->shape[0]));
    }
    return Status::Ok();
  }
  if (node.weights.size() > 1 && node.weights[1]) return InvalidModel(node.label() + ": only axial positions take a second table");
  if (p->kind() == fb::PositionKind::LEARNED) {
    if (node.weights.empty() || !node.weights[0]) return InvalidModel(node.label() + ": learned positions need a table");
    if (p->max_positions() < 1) return InvalidModel(node.label() + ": max_positions must be positive");
    return expect_shape(node, 0, {p->max_positions(), d});
  }
  if (p->kind() == fb::PositionKind::SINUSOIDAL) {
    if (!node.weights.empty() && node.weights[0]) return InvalidModel(node.label() + ": sinusoidal positions take no table");
    if (d % 2 != 0) return InvalidModel(node.label() + ": sinusoidal positions need an even width");
    return Status::Ok();
  }
  return InvalidModel(node.label() + ": unknown position kind " + std::to_string(int(p->kind())));
}

// Learned and axial positions read a table whose rows a session binds up to max_tokens; sinusoidal ones are computed
// for any position.
int64_t position_limit(const Node& node, int64_t max_tokens) {
  return node.fb_op->params_as_PositionParams()->kind() == fb::PositionKind::SINUSOIDAL ? kNoSequenceLimit : max_tokens;
}

}  // namespace

void ref::position(fb::PositionKind kind, const float* table, int64_t d, int64_t pos0, int64_t n, const float* x,
                   float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = pos0 + i;
    for (int64_t j = 0; j < d; ++j) {
      double pe;
      if (kind == fb::PositionKind::LEARNED) {
        pe = table[p * d + j];
      } else {
        double freq = std::pow(10000.0, -double(j - j % 2) / double(d));
        pe = (j % 2 == 0) ? std::sin(double(p) * freq) : std::cos(double(p) * freq);
      }
      out[i * d + j] = float(double(x[i * d + j]) + pe);
    }
  }
}

void ref::axial_position(const float* rows, int64_t d0, const float* cols, int64_t s1, int64_t d1, int64_t pos0,
                         int64_t n, const float* x, float* out) {
  const int64_t d = d0 + d1;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = pos0 + i;
    for (int64_t j = 0; j < d; ++j) {
      const float pe = j < d0 ? rows[(p / s1) * d0 + j] : cols[(p % s1) * d1 + (j - d0)];
      out[i * d + j] = x[i * d + j] + pe;
    }
  }
}

extern const OpDef kPositionOp = {fb::OpCode::POSITION, "POSITION", 1, 0, 2, fb::OpParams::PositionParams,
                                  validate, nullptr, nullptr, streams<Streaming::kRowWise>, position_limit, nullptr, nullptr};

}  // namespace tern
