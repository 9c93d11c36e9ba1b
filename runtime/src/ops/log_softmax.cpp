// SPDX-License-Identifier: MIT
// LOG_SOFTMAX: x [n, d] -> x - log(sum_j exp(x[:, j])) row by row (log-probabilities), same width.
#include <algorithm>
#include <cmath>

#include "ops/op.h"
#include "ops/reference.h"

namespace tern {
namespace {

Status validate(const Node& node, const std::vector<ValueInfo>& values) {
  return expect_width(node, values, true, 0, values[node.inputs[0]].width);
}

}  // namespace

void ref::log_softmax(const float* x, int64_t n, int64_t d, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float* row = x + i * d;
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < d; ++j) mx = std::max(mx, double(row[j]));
    for (int64_t j = 0; j < d; ++j) sum += std::exp(double(row[j]) - mx);
    const double lse = mx + std::log(sum);
    for (int64_t j = 0; j < d; ++j) out[i * d + j] = float(double(row[j]) - lse);
  }
}

extern const OpDef kLogSoftmaxOp = {fb::OpCode::LOG_SOFTMAX, "LOG_SOFTMAX", 1, 0, 0, fb::OpParams::LogSoftmaxParams,
                                    validate, nullptr, nullptr, streams<Streaming::kRowWise>, nullptr, nullptr, nullptr};

}  // namespace tern
