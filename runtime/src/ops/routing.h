// SPDX-License-Identifier: MIT
// Routing attention (Roy et al. 2020), following google-research's routing_transformer with two documented
// differences: the one definition the reference kernel, the CPU kernel and the planner share.
//
// Input qkv [n, (H + 2*KV)*dh] (q | k | v column blocks; KV key/value heads, H by default: query head h at columns
// h*dh of q, its key and value at g*dh of k and v for g = h / (H / KV), ops/head_layout.h), output [n, H*dh]. The
// centroids and every cache below are per query head: heads that share keys still route them by their own centroids.
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
// n x n.
//
// Continuing a sequence. Membership depends on the whole call, so the first call runs whole, as above. Every later
// position t runs alone, as a step: its output is row t of this op over positions 0..t, where the earlier positions'
// rows of qkv are those they had when they ran (a cache, as for every other kind). Row t of that needs only:
//   local head: the keys of t's chunk and the chunk before, at most 2 * local_chunk - 1 earlier positions;
//   routing head, cluster c, w_t = min(window, t + 1): K_c over 0..t is K_c over 0..t-1, with t in place of its
//     weakest key when t scores higher (a key with an equal score is ranked before t, the later position) or added
//     while the cluster holds fewer than w_t keys; t is in Q_c when fewer than w_t earlier queries score at least
//     as high: always while t < window, else when it beats the window-th best earlier query score.
// So the state is bounded by the window, not the sequence: per routing head and cluster, its best min(window,
// max_tokens) keys (normalised) with their values, scores and positions, and as many best query scores; per local
// head, a ring of the last 2 * local_chunk keys and values (cache_bytes). Steps give the rows a whole-sequence
// forward of each prefix would give that layer, so they do not depend on how later positions are cut into calls;
// the first call's cut matters, as above. converter/reference-family.md compares this with google-research's and
// lucidrains' decoding.
#pragma once

#include <cstdint>
#include <vector>

#include "format/model.h"
#include "format/status.h"
#include "ops/head_layout.h"

namespace tern {

struct RoutingAttention {
  int heads = 1;
  int kv_heads = 0;  // key/value heads (AttentionParams.kv_heads); 0: one per query head
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

  // Where qkv rows hold each head's query, key and value (the kind table's projection, ops/head_layout.h).
  HeadLayout layout() const;
  int routing_heads() const { return heads - local_heads; }
  int64_t members(int64_t n) const { return window < n ? window : n; }
  // Continuing a sequence of at most max_tokens positions: the ring of each local head and the slots of each
  // cluster (both at most max_tokens), and the state's bytes (saturating at 2^64 - 1).
  int64_t ring_slots(int64_t max_tokens) const {
    return local_heads == 0 ? 0 : (2 * local_chunk < max_tokens ? 2 * local_chunk : max_tokens);
  }
  int64_t cluster_slots(int64_t max_tokens) const { return members(max_tokens); }
  uint64_t cache_bytes(int64_t max_tokens) const;
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
// Reference routing attention of a whole sequence: qkv [n, layout().row], out [n, heads*dh]. Plain loops with double
// accumulation of the attention; the normalised vectors and the cluster scores in float32, as the CPU kernel, so
// that both pick the same members.
void routing_attention(const float* qkv, int64_t n, const RoutingAttention& spec, float* out);
}  // namespace ref

}  // namespace tern
