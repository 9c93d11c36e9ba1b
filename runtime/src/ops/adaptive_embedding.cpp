// SPDX-License-Identifier: MIT
// ADAPTIVE_EMBEDDING: ids [n] (I32) -> [n, d]. Token t of cluster i: (proj_i table_i[t - l_i]) * scale.
// weights, per cluster i: table_i [r_i - l_i, d_i], proj_i [d, d_i] or -1 (then d_i = d). ops/adaptive.h.
#include <cmath>

#include "ops/adaptive.h"
#include "ops/op.h"
#include "ops/reference.h"

namespace tern {

Result<std::vector<int64_t>> adaptive_cluster_ends(const flatbuffers::Vector<int64_t>* cutoffs, int64_t vocab,
                                                   const std::string& where) {
  std::vector<int64_t> ends = {0};
  if (cutoffs) {
    if (cutoffs->size() + 1 > size_t(kMaxAdaptiveClusters)) {
      return InvalidModel(where + ": " + std::to_string(cutoffs->size()) + " cutoffs; at most " +
                          std::to_string(kMaxAdaptiveClusters - 1) + " are supported");
    }
    for (int64_t c : *cutoffs) {
      if (c <= ends.back() || c >= vocab) {
        return InvalidModel(where + ": cutoffs must increase strictly within (0, " + std::to_string(vocab) + "), got " +
                            std::to_string(c) + " after " + std::to_string(ends.back()));
      }
      ends.push_back(c);
    }
  }
  ends.push_back(vocab);
  return ends;
}

Result<AdaptiveInput> AdaptiveInput::from(const Node& node, const std::vector<ValueInfo>& values) {
  const auto* p = node.fb_op->params_as_AdaptiveEmbeddingParams();
  const std::string where = node.label();
  AdaptiveInput a;
  a.d = values[node.outputs[0]].width;
  a.scale = p->scale();
  if (!std::isfinite(a.scale)) return InvalidModel(where + ": scale is not finite");
  // The vocabulary is the sum of the tables' rows; the cutoffs must agree with it.
  const size_t clusters = (p->cutoffs() ? p->cutoffs()->size() : 0) + 1;
  if (node.weights.size() != 2 * clusters) {
    return InvalidModel(where + ": " + std::to_string(clusters) + " clusters take " + std::to_string(2 * clusters) +
                        " weights (table, projection or -1 each), got " + std::to_string(node.weights.size()));
  }
  int64_t vocab = 0;
  for (size_t i = 0; i < clusters; ++i) {
    const TensorInfo* t = node.weights[2 * i];
    if (!t) return InvalidModel(where + ": cluster " + std::to_string(i) + " has no table");
    if (t->shape.size() != 2 || t->shape[0] < 1 || t->shape[1] < 1) {
      return InvalidModel(where + ": table '" + t->name + "' must be [rows, width]");
    }
    vocab += t->shape[0];
  }
  TERN_ASSIGN_OR_RETURN(a.ends, adaptive_cluster_ends(p->cutoffs(), vocab, where));
  for (size_t i = 0; i < clusters; ++i) {
    const TensorInfo* t = node.weights[2 * i];
    const TensorInfo* proj = node.weights[2 * i + 1];
    const int64_t rows = a.ends[i + 1] - a.ends[i], di = t->shape[1];
    TERN_RETURN_IF_ERROR(expect_shape(node, int(2 * i), {rows, di}));
    if (proj) {
      TERN_RETURN_IF_ERROR(expect_shape(node, int(2 * i + 1), {a.d, di}));
    } else if (di != a.d) {
      return InvalidModel(where + ": table '" + t->name + "' has width " + std::to_string(di) +
                          " and no projection to the output width " + std::to_string(a.d));
    }
    a.tables.push_back(is_compressed(t->dtype) ? nullptr : t->f32());
    a.projs.push_back(proj && !is_compressed(proj->dtype) ? proj->f32() : nullptr);
    a.table_tensors.push_back(t);
    a.proj_tensors.push_back(proj);
    a.dims.push_back(di);
  }
  return a;
}

namespace {

Status validate(const Node& node, const std::vector<ValueInfo>& values) {
  TERN_RETURN_IF_ERROR(expect_width(node, values, false, 0, 1));
  auto a = AdaptiveInput::from(node, values);
  return a.ok() ? Status::Ok() : a.status();
}

// Every table and projection.
bool compressible(fb::AttentionKind /*kind*/, int /*slot*/) { return true; }

// The vocabulary: the clusters' tables' rows together (weights: table, projection per cluster).
int64_t token_ids(const Node& node) {
  int64_t rows = 0;
  for (size_t w = 0; w < node.weights.size(); w += 2) rows += node.weights[w] ? node.weights[w]->shape[0] : 0;
  return rows;
}

}  // namespace

void ref::adaptive_embedding(const int32_t* ids, int64_t n, const AdaptiveInput& a, float* out) {
  for (int64_t r = 0; r < n; ++r) {
    size_t i = 0;
    while (ids[r] >= a.ends[i + 1]) ++i;
    const int64_t di = a.dims[i];
    const float* e = a.tables[i] + (ids[r] - a.ends[i]) * di;
    for (int64_t o = 0; o < a.d; ++o) {
      double s = 0;
      if (a.projs[i]) {
        for (int64_t c = 0; c < di; ++c) s += double(a.projs[i][o * di + c]) * double(e[c]);
      } else {
        s = e[o];
      }
      out[r * a.d + o] = float(s * double(a.scale));
    }
  }
}

extern const OpDef kAdaptiveEmbeddingOp = {fb::OpCode::ADAPTIVE_EMBEDDING, "ADAPTIVE_EMBEDDING", 1, 1,
                                           2 * kMaxAdaptiveClusters, fb::OpParams::AdaptiveEmbeddingParams, validate,
                                           nullptr, nullptr, streams<Streaming::kWholeCall>, nullptr, nullptr, nullptr,
                                           compressible, token_ids};

}  // namespace tern
