// SPDX-License-Identifier: MIT
// ADAPTIVE_LOG_SOFTMAX: x [n, d] -> log-probabilities [n, V] of a projected adaptive softmax (ops/adaptive.h).
// weights: cluster_weight [C, d_0], cluster_bias [C] (-1 both when C = 0), then per cluster i: weight_i
// [r_i - l_i, d_i] or [V, d_i] (rows l_i .. r_i-1 read), bias_i likewise or -1, proj_i [d, d_i] or -1 (d_i = d).
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/adaptive.h"
#include "ops/op.h"
#include "ops/reference.h"

namespace tern {

Result<AdaptiveSoftmax> AdaptiveSoftmax::from(const Node& node, const std::vector<ValueInfo>& values) {
  const auto* p = node.fb_op->params_as_AdaptiveLogSoftmaxParams();
  const std::string where = node.label();
  AdaptiveSoftmax a;
  a.d = values[node.inputs[0]].width;
  const int64_t V = values[node.outputs[0]].width;
  TERN_ASSIGN_OR_RETURN(a.ends, adaptive_cluster_ends(p->cutoffs(), V, where));
  const size_t clusters = a.ends.size() - 1;
  const auto& w = node.weights;
  if (w.size() != 2 + 3 * clusters) {
    return InvalidModel(where + ": " + std::to_string(clusters) + " clusters take " + std::to_string(2 + 3 * clusters) +
                        " weights, got " + std::to_string(w.size()));
  }
  for (size_t i = 0; i < clusters; ++i) {
    const int64_t l = a.ends[i], rows = a.ends[i + 1] - l;
    const TensorInfo* weight = w[2 + 3 * i];
    const TensorInfo* bias = w[3 + 3 * i];
    const TensorInfo* proj = w[4 + 3 * i];
    if (!weight) return InvalidModel(where + ": cluster " + std::to_string(i) + " has no output weight");
    if (weight->shape.size() != 2 || (weight->shape[0] != rows && weight->shape[0] != V)) {
      return InvalidModel(where + ": weight '" + weight->name + "' has shape " + weight->shape_string() + ", expected [" +
                          std::to_string(rows) + " or " + std::to_string(V) + ", width]");
    }
    const int64_t di = weight->shape[1];
    if (di < 1) return InvalidModel(where + ": weight '" + weight->name + "' is empty");
    const int64_t row0 = weight->shape[0] == V ? l : 0;
    a.weights.push_back(is_compressed(weight->dtype) ? nullptr : weight->f32() + row0 * di);
    a.weight_tensors.push_back(weight);
    a.weight_row0.push_back(row0);
    a.biases.push_back(nullptr);
    if (bias) {
      if (bias->shape.size() != 1 || (bias->shape[0] != rows && bias->shape[0] != V)) {
        return InvalidModel(where + ": bias '" + bias->name + "' has shape " + bias->shape_string() + ", expected [" +
                            std::to_string(rows) + "] or [" + std::to_string(V) + "]");
      }
      a.biases.back() = bias->f32() + (bias->shape[0] == V ? l : 0);
    }
    if (proj) {
      TERN_RETURN_IF_ERROR(expect_shape(node, int(4 + 3 * i), {a.d, di}));
    } else if (di != a.d) {
      return InvalidModel(where + ": weight '" + weight->name + "' has width " + std::to_string(di) +
                          " and no projection from the input width " + std::to_string(a.d));
    }
    a.projs.push_back(proj && !is_compressed(proj->dtype) ? proj->f32() : nullptr);
    a.proj_tensors.push_back(proj);
    a.dims.push_back(di);
  }
  const int64_t tails = int64_t(clusters) - 1;
  if (tails == 0) {
    if (w[0] || w[1]) return InvalidModel(where + ": cluster_weight and cluster_bias need cutoffs");
  } else {
    if (!w[0]) return InvalidModel(where + ": " + std::to_string(tails) + " tail clusters need a cluster_weight");
    TERN_RETURN_IF_ERROR(expect_shape(node, 0, {tails, a.dims[0]}));
    a.cluster_weight = is_compressed(w[0]->dtype) ? nullptr : w[0]->f32();
    a.cluster_weight_tensor = w[0];
    if (w[1]) {
      TERN_RETURN_IF_ERROR(expect_shape(node, 1, {tails}));
      a.cluster_bias = w[1]->f32();
    }
  }
  return a;
}

namespace {

Status validate(const Node& node, const std::vector<ValueInfo>& values) {
  auto a = AdaptiveSoftmax::from(node, values);
  return a.ok() ? Status::Ok() : a.status();
}

// z = (x proj) W^T + b for one row; x [d], proj [d, di] or null, W [rows, di] -> z [rows].
void cluster_logits(const float* x, const AdaptiveSoftmax& a, size_t i, int64_t rows, const float* w, const float* b,
                    std::vector<double>& z) {
  const int64_t di = a.dims[i];
  std::vector<double> px(static_cast<size_t>(di));
  for (int64_t c = 0; c < di; ++c) {
    if (!a.projs[i]) {
      px[size_t(c)] = x[c];
      continue;
    }
    double s = 0;
    for (int64_t k = 0; k < a.d; ++k) s += double(x[k]) * double(a.projs[i][k * di + c]);
    px[size_t(c)] = s;
  }
  z.assign(size_t(rows), 0.0);
  for (int64_t o = 0; o < rows; ++o) {
    double s = b ? double(b[o]) : 0.0;
    for (int64_t c = 0; c < di; ++c) s += px[size_t(c)] * double(w[o * di + c]);
    z[size_t(o)] = s;
  }
}

void log_softmax_in_place(std::vector<double>& z) {
  double mx = -INFINITY, sum = 0;
  for (double v : z) mx = std::max(mx, v);
  for (double v : z) sum += std::exp(v - mx);
  const double lse = mx + std::log(sum);
  for (double& v : z) v -= lse;
}

// cluster_weight, and each cluster's weight and projection; the biases stay float32.
bool compressible(fb::AttentionKind /*kind*/, int slot) { return slot == 0 || (slot >= 2 && (slot - 2) % 3 != 1); }

}  // namespace

void ref::adaptive_log_softmax(const float* x, int64_t n, const AdaptiveSoftmax& a, float* out) {
  const int64_t V = a.vocab(), shortlist = a.shortlist(), tails = a.tails();
  std::vector<double> head, cl, tail;
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = x + r * a.d;
    cluster_logits(xr, a, 0, shortlist, a.weights[0], a.biases[0], head);
    if (tails > 0) {
      cluster_logits(xr, a, 0, tails, a.cluster_weight, a.cluster_bias, cl);
      head.insert(head.end(), cl.begin(), cl.end());
    }
    log_softmax_in_place(head);
    for (int64_t t = 0; t < shortlist; ++t) out[r * V + t] = float(head[size_t(t)]);
    for (int64_t i = 1; i <= tails; ++i) {
      const int64_t l = a.ends[size_t(i)], rows = a.ends[size_t(i) + 1] - l;
      cluster_logits(xr, a, size_t(i), rows, a.weights[size_t(i)], a.biases[size_t(i)], tail);
      log_softmax_in_place(tail);
      for (int64_t t = 0; t < rows; ++t) out[r * V + l + t] = float(head[size_t(shortlist + i - 1)] + tail[size_t(t)]);
    }
  }
}

extern const OpDef kAdaptiveLogSoftmaxOp = {fb::OpCode::ADAPTIVE_LOG_SOFTMAX, "ADAPTIVE_LOG_SOFTMAX", 1, 0,
                                            2 + 3 * kMaxAdaptiveClusters, fb::OpParams::AdaptiveLogSoftmaxParams,
                                            validate, nullptr, nullptr, streams<Streaming::kWholeCall>, nullptr, nullptr, nullptr,
                                           compressible};

}  // namespace tern
