// Routing attention (Roy et al. 2020), following google-research's routing_transformer with two documented
// differences: the one definition the reference kernel, the CPU kernel and the planner share.
//
// Input qkv [n, 3*H*dh] (q | k | v column blocks, head h at columns h*dh of each), output [n, H*dh].
// Heads h < L = local_heads: causal attention to the keys of the query's own chunk of local_chunk positions and of the
// chunk before it (google's local heads: a query block plus the previous block), scores q·k * scale.
// Routing head h >= L, with centroids mu [H - L, K, dh] (K = clusters) and w = min(window, n):
//   q^_i = (q_i - mean(q_i)) / sqrt(var(q_i) + norm_eps), k^_j likewise    (layer norm without gain or bias)
//   For each cluster c: Q_c = the w positions i with the largest q^_i·mu_c, K_c = the w positions j with the largest
//   k^_j·mu_c; equal scores go to the lower position (a stable sort), so membership is deterministic.
//   Query i in Q_c attends the keys j in K_c with j <= i: o_c(i) = sum_j softmax_j(q^_i·k^_j * scale) v_j; a query
//   with no such key gets o_c(i) = 0 from that cluster.
//   out_i = sum over the clusters c with i in Q_c of o_c(i), divided by (that number of clusters + count_eps).
//   A position in no Q_c gets zeros.
// Differences from google-research: causality is by position (google masks by slot within a cluster, which lets a
// query see a later key when the query and key sets differ), and a query without a visible key adds zero.
//
// Work per routing head O(K * n * dh) for the scores and O(K * w^2 * dh) for the clusters; scratch O(n * dh), never
// n x n. Membership depends on the whole sequence, so the op runs whole sequences only (no streaming state).
#pragma once

#include <cstdint>
#include <vector>

#include "core/model.h"
#include "core/status.h"

namespace tern {

struct RoutingAttention {
  int heads = 1;
  int head_dim = 1;
  float scale = 1.0f;
  int64_t clusters = 1;
  int64_t window = 1;
  int local_heads = 0;
  int64_t local_chunk = 1;
  float norm_eps = 1e-6f;
  float count_eps = 1e-2f;
  const float* centroids = nullptr;  // [heads - local_heads, clusters, head_dim]

  // Reads and checks the params and weight of an ATTENTION op of kind Routing.
  static Result<RoutingAttention> from(const Node& node);

  int routing_heads() const { return heads - local_heads; }
  int64_t members(int64_t n) const { return window < n ? window : n; }
  const float* centroid(int routing_head, int64_t c) const {
    return centroids + (int64_t(routing_head) * clusters + c) * head_dim;
  }
};

// Layer norm without gain or bias of one row x [dh] into out, in float32 as the kernels compute it.
void routing_normalize(const float* x, int dh, float eps, float* out);

// scores[i] = rows[i]·mu for rows [n, dh], summed in float32 in column order. The reference and CPU kernels both
// use it, so that they choose the same cluster members even where two scores are a rounding apart.
void routing_scores(const float* rows, int64_t n, int dh, const float* mu, float* scores);

// Positions of the `count` largest scores [n] (ties to the lower position), written in position order to `chosen`.
// `order` is scratch [n].
void routing_top(const float* scores, int64_t n, int64_t count, int32_t* order, int32_t* chosen);

namespace ref {
// Reference routing attention of a whole sequence: qkv [n, 3*heads*dh], out [n, heads*dh]. Plain loops with double
// accumulation of the attention; the normalised vectors and the cluster scores in float32, as the CPU kernel, so
// that both pick the same members.
void routing_attention(const float* qkv, int64_t n, const RoutingAttention& spec, float* out);
}  // namespace ref

}  // namespace tern
