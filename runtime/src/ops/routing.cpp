// SPDX-License-Identifier: MIT
// Routing attention (ops/routing.h): parameter checks, cluster membership, and the reference kernel.
#include "ops/routing.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "ops/attention_kinds.h"
#include "ops/op.h"

namespace tern {
namespace {

constexpr int64_t kMaxClusters = int64_t(1) << 16;
constexpr int64_t kMaxWindow = int64_t(1) << 24;

}  // namespace

Result<RoutingAttention> RoutingAttention::from(const Node& node) {
  const auto* p = node.fb_op->params_as_AttentionParams();
  const auto* k = p->kind_as_Routing();
  const std::string where = node.label();
  RoutingAttention a;
  a.heads = p->heads();
  a.kv_heads = p->kv_heads() > 0 ? p->kv_heads() : p->heads();
  a.head_dim = p->head_dim();
  a.scale = p->scale();
  a.clusters = k->clusters();
  a.window = k->window();
  a.local_heads = k->local_heads();
  a.local_chunk = k->local_chunk();
  a.norm_eps = k->norm_eps();
  a.count_eps = k->count_eps();
  if (a.clusters < 1 || a.clusters > kMaxClusters) {
    return InvalidModel(where + ": routing clusters " + std::to_string(a.clusters) + " must be in [1, 65536]");
  }
  if (a.window < 1 || a.window > kMaxWindow) {
    return InvalidModel(where + ": routing window " + std::to_string(a.window) + " must be in [1, 2^24]");
  }
  if (a.local_heads < 0 || a.local_heads >= a.heads) {
    return InvalidModel(where + ": routing local_heads " + std::to_string(a.local_heads) + " must be in [0, heads - 1]");
  }
  if (a.local_heads > 0 && (a.local_chunk < 1 || a.local_chunk > kMaxWindow)) {
    return InvalidModel(where + ": routing local_chunk " + std::to_string(a.local_chunk) + " must be in [1, 2^24]");
  }
  if (!std::isfinite(a.norm_eps) || !(a.norm_eps > 0.0f)) return InvalidModel(where + ": routing norm_eps must be finite and > 0");
  if (!std::isfinite(a.count_eps) || !(a.count_eps > 0.0f)) return InvalidModel(where + ": routing count_eps must be finite and > 0");
  if (node.weights.empty() || !node.weights[0]) return InvalidModel(where + ": routing attention needs its centroids weight");
  for (size_t w = 1; w < node.weights.size(); ++w) {
    if (node.weights[w]) return InvalidModel(where + ": routing attention takes one weight (centroids)");
  }
  TERN_RETURN_IF_ERROR(expect_shape(node, 0, {a.routing_heads(), a.clusters, a.head_dim}));
  const TensorInfo* mu = node.weights[0];
  if (mu->dtype != fb::DType::F32) return InvalidModel(where + ": routing centroids must be F32");
  a.centroids = mu->f32();
  for (int64_t i = 0; i < mu->numel(); ++i) {
    if (!std::isfinite(a.centroids[i])) return InvalidModel(where + ": routing centroids hold a non-finite value");
  }
  return a;
}

HeadLayout RoutingAttention::layout() const {
  return head_layout(fb::AttentionKind::Routing, heads, head_dim, kv_heads);
}

uint64_t RoutingAttention::cache_bytes(int64_t max_tokens) const {
  // Ring [local_heads, R, 2*dh]; per routing head and cluster, W slots of key position, key score, normalised key
  // [dh], value [dh] and query score.
  const unsigned __int128 floats =
      (unsigned __int128)(uint64_t(local_heads) * uint64_t(ring_slots(max_tokens))) * uint64_t(2 * head_dim) +
      (unsigned __int128)(uint64_t(routing_heads()) * uint64_t(clusters)) * uint64_t(cluster_slots(max_tokens)) *
          uint64_t(2 * head_dim + 3);
  const unsigned __int128 bytes = floats * 4;
  return bytes > ~uint64_t(0) ? ~uint64_t(0) : uint64_t(bytes);
}

void routing_normalize(const float* x, int dh, float eps, float* out) {
  float mean = 0.0f;
  for (int c = 0; c < dh; ++c) mean += x[c];
  mean /= float(dh);
  float var = 0.0f;
  for (int c = 0; c < dh; ++c) var += (x[c] - mean) * (x[c] - mean);
  const float r = 1.0f / std::sqrt(var / float(dh) + eps);
  for (int c = 0; c < dh; ++c) out[c] = (x[c] - mean) * r;
}

void routing_scores(const float* rows, int64_t n, int dh, const float* mu, float* scores) {
  for (int64_t i = 0; i < n; ++i) {
    const float* x = rows + i * dh;
    float s = 0.0f;
    for (int c = 0; c < dh; ++c) s += x[c] * mu[c];
    scores[i] = s;
  }
}

void routing_top(const float* scores, int64_t n, int64_t count, int32_t* order, int32_t* chosen) {
  std::iota(order, order + n, 0);
  // Larger score first; equal scores: lower position first. nth_element + sort of the kept ones is O(n + w log w).
  auto before = [scores](int32_t a, int32_t b) { return scores[a] > scores[b] || (scores[a] == scores[b] && a < b); };
  if (count < n) std::nth_element(order, order + count, order + n, before);
  std::copy(order, order + count, chosen);
  std::sort(chosen, chosen + count);
}

void ref::routing_attention(const float* qkv, int64_t n, const RoutingAttention& a, float* out) {
  const int dh = a.head_dim;
  const HeadLayout heads = a.layout();
  const int64_t inner = heads.inner(), stride = heads.row;
  auto q = [&](int h, int64_t i) { return qkv + i * stride + heads.q_column(h); };
  auto k = [&](int h, int64_t j) { return qkv + j * stride + heads.k_column(h); };
  auto v = [&](int h, int64_t j) { return qkv + j * stride + heads.v_column(h); };
  // Softmax of query qi over keys `keys` (positions), accumulated in double into acc [dh]; false if none is visible.
  auto attend = [&](const float* qi, int64_t i, int h, const std::vector<int64_t>& keys, const float* kbase,
                    int64_t kstride, std::vector<double>& acc) {
    std::vector<double> s;
    std::vector<int64_t> pos;
    for (size_t t = 0; t < keys.size(); ++t) {
      if (keys[t] > i) continue;
      const float* kj = kbase + int64_t(t) * kstride;
      double dot = 0;
      for (int c = 0; c < dh; ++c) dot += double(qi[c]) * double(kj[c]);
      s.push_back(dot * a.scale);
      pos.push_back(keys[t]);
    }
    std::fill(acc.begin(), acc.end(), 0.0);
    if (s.empty()) return false;
    const double m = *std::max_element(s.begin(), s.end());
    double sum = 0;
    for (double& x : s) sum += (x = std::exp(x - m));
    for (size_t t = 0; t < s.size(); ++t) {
      for (int c = 0; c < dh; ++c) acc[size_t(c)] += s[t] / sum * double(v(h, pos[t])[c]);
    }
    return true;
  };
  std::vector<double> acc(static_cast<size_t>(dh));
  // Local heads: own chunk and the one before.
  for (int h = 0; h < a.local_heads; ++h) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t lo = std::max<int64_t>(0, (i / a.local_chunk - 1) * a.local_chunk);
      std::vector<int64_t> keys;
      for (int64_t j = lo; j <= i; ++j) keys.push_back(j);
      attend(q(h, i), i, h, keys, k(h, lo), stride, acc);
      for (int c = 0; c < dh; ++c) out[i * inner + heads.out_column(h) + c] = float(acc[size_t(c)]);
    }
  }
  // Routing heads.
  const int64_t w = a.members(n);
  std::vector<float> qn(size_t(n * dh)), kn(size_t(n * dh)), sq(static_cast<size_t>(n)), sk(static_cast<size_t>(n));
  std::vector<int32_t> order(static_cast<size_t>(n)), qi(static_cast<size_t>(w)), ki(static_cast<size_t>(w));
  for (int h = a.local_heads; h < a.heads; ++h) {
    for (int64_t i = 0; i < n; ++i) {
      routing_normalize(q(h, i), dh, a.norm_eps, &qn[size_t(i * dh)]);
      routing_normalize(k(h, i), dh, a.norm_eps, &kn[size_t(i * dh)]);
    }
    std::vector<double> total(size_t(n * dh), 0.0), count(static_cast<size_t>(n), 0.0);
    for (int64_t c = 0; c < a.clusters; ++c) {
      const float* mu = a.centroid(h - a.local_heads, c);
      routing_scores(qn.data(), n, dh, mu, sq.data());
      routing_scores(kn.data(), n, dh, mu, sk.data());
      routing_top(sq.data(), n, w, order.data(), qi.data());
      routing_top(sk.data(), n, w, order.data(), ki.data());
      std::vector<int64_t> keys(ki.begin(), ki.end());
      std::vector<float> kg(size_t(w * dh));  // the cluster's keys, gathered
      for (int64_t t = 0; t < w; ++t) std::copy_n(&kn[size_t(ki[size_t(t)]) * dh], dh, &kg[size_t(t * dh)]);
      for (int32_t i : qi) {
        if (attend(&qn[size_t(i) * dh], i, h, keys, kg.data(), dh, acc)) {
          for (int d = 0; d < dh; ++d) total[size_t(i) * dh + d] += acc[size_t(d)];
        }
        count[size_t(i)] += 1.0;
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      for (int d = 0; d < dh; ++d) {
        out[i * inner + heads.out_column(h) + d] = float(total[size_t(i * dh + d)] / (count[size_t(i)] + a.count_eps));
      }
    }
  }
}

}  // namespace tern
