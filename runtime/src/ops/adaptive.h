// SPDX-License-Identifier: MIT
// Adaptive input and projected adaptive log-softmax (Baevski & Auli 2019; Grave et al. 2017; Transformer-XL's
// AdaptiveEmbedding and ProjectedAdaptiveLogSoftmax): the vocabulary [0, V) is cut into clusters
// [ends[i], ends[i+1]) by the op's cutoffs; cluster i has its own width d_i and, optionally, a projection to d.
// Definitions: schema/tern.fbs (AdaptiveEmbeddingParams, AdaptiveLogSoftmaxParams). Shared by the reference
// kernels, the CPU kernels and the loader's checks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/model.h"
#include "format/status.h"

namespace tern {

constexpr int kMaxAdaptiveClusters = 16;

// ends = [0, cutoffs..., V]: strictly increasing; cluster i is [ends[i], ends[i+1]).
Result<std::vector<int64_t>> adaptive_cluster_ends(const flatbuffers::Vector<int64_t>* cutoffs, int64_t vocab,
                                                   const std::string& where);

// ADAPTIVE_EMBEDDING: out[t] = (proj_i table_i[t - l_i]) * scale for t in cluster i.
struct AdaptiveInput {
  std::vector<int64_t> ends;          // [clusters + 1]
  int64_t d = 0;                      // output width
  float scale = 1.0f;
  std::vector<const float*> tables;   // per cluster [r_i - l_i, d_i]; null when compressed
  std::vector<const float*> projs;    // per cluster [d, d_i] or null (d_i = d); null when compressed
  std::vector<int64_t> dims;          // per cluster d_i
  // The tensors themselves, in any storage (schema/tern.fbs, Tensor): what backends read compressed weights from.
  std::vector<const TensorInfo*> table_tensors, proj_tensors;
  int64_t vocab() const { return ends.back(); }
  size_t clusters() const { return tables.size(); }

  static Result<AdaptiveInput> from(const Node& node, const std::vector<ValueInfo>& values);
};

// ADAPTIVE_LOG_SOFTMAX: head over the shortlist and one column per tail cluster, then each tail's log-softmax
// offset by its head column (cluster i >= 1 reads head column ends[1] + i - 1).
struct AdaptiveSoftmax {
  std::vector<int64_t> ends;           // [clusters + 1]
  int64_t d = 0;                       // input width
  const float* cluster_weight = nullptr;  // [clusters - 1, dims[0]] or null with one cluster
  const float* cluster_bias = nullptr;    // [clusters - 1] or null
  std::vector<const float*> weights;   // per cluster [r_i - l_i, d_i], already at row l_i of a shared table
  std::vector<const float*> biases;    // per cluster [r_i - l_i] or null, likewise
  std::vector<const float*> projs;     // per cluster [d, d_i] or null (d_i = d)
  std::vector<int64_t> dims;           // per cluster d_i
  // The tensors themselves, in any storage (schema/tern.fbs, Tensor); cluster i's weight rows start at
  // weight_row0[i] of its tensor. The float pointers above are null for a compressed tensor.
  const TensorInfo* cluster_weight_tensor = nullptr;
  std::vector<const TensorInfo*> weight_tensors, proj_tensors;
  std::vector<int64_t> weight_row0;
  int64_t vocab() const { return ends.back(); }
  size_t clusters() const { return weights.size(); }
  int64_t shortlist() const { return ends[1]; }
  int64_t tails() const { return int64_t(weights.size()) - 1; }

  static Result<AdaptiveSoftmax> from(const Node& node, const std::vector<ValueInfo>& values);
};

}  // namespace tern
