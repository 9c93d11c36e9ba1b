// SPDX-License-Identifier: MIT
// Lowering of ATTENTION of kind Routing (semantics: ops/routing.h) to dispatches, whole sequences only:
//   local heads:   shaders/attention.comp as chunked local attention (own chunk and the one before);
//   routing heads: routing_prep.comp    normalised queries and keys         xn      [Hr, 2, max_batch, dh]
//                  routing_scores.comp  their scores against each centroid  scores  [Hr, 2, K, max_batch]
//                  routing_select.comp  each cluster's top-w members         members [Hr, 2, K, max_w], slot_of [Hr, K, max_batch]
//                  routing_attend.comp  member queries attend member keys    outputs [Hr, K, max_w, dh]
//                  routing_combine.comp sum per position / (count + count_eps) into the op's output.
// Hr = routing heads, K = clusters, max_w = min(window, max_batch). Scratch is linear in max_batch (K and w fixed by
// the model); nothing is n x n. Every binding is checked against maxStorageBufferRange at session creation.
#include <algorithm>

#include "ops/attention_kinds.h"
#include "ops/routing.h"
#include "vulkan/ops.h"

namespace tern::vk {
namespace {

constexpr uint32_t kQueryRows = 32;  // BQ: member queries (invocations) per workgroup
constexpr uint32_t kKeyTile = 32;    // BK: keys staged in shared memory at a time, fewer for wide heads

uint32_t key_tile_for(const Lowering& low, int dh, uint64_t extra_bytes) {
  uint32_t tile = kKeyTile;
  while (tile > 1 && 2ull * tile * uint64_t(dh) * sizeof(float) + extra_bytes * tile >
                         low.ctx.limits().max_compute_shared_memory_size) {
    tile /= 2;
  }
  return tile;
}

uint32_t clamp32(int64_t v) { return uint32_t(std::min<int64_t>(std::max<int64_t>(v, 0), INT32_MAX)); }

}  // namespace

Status lower_routing(const Node& node, Lowering& low) {
  TERN_ASSIGN_OR_RETURN(auto spec, RoutingAttention::from(node));
  const RoutingAttention& a = spec;
  const int heads = a.heads, dh = a.head_dim, local = a.local_heads, hr = a.routing_heads();
  const int64_t K = a.clusters, batch = low.max_batch, max_w = std::min<int64_t>(a.window, batch);
  const Binding qkv = low.values[node.inputs[0]];  // [n, (heads + 2*kv_heads)*dh]: a.layout()
  const Binding out = low.values[node.outputs[0]];  // [n, heads*dh]

  // Local heads: chunked local attention of chunk local_chunk with one chunk before, on heads [0, local).
  if (local > 0) {
    const uint32_t tile = key_tile_for(low, dh, 0);
    TERN_ASSIGN_OR_RETURN(auto unused, low.scratch(sizeof(float), "routing local heads (no state)"));
    // Chunks of local_chunk with one chunk before; ring 1 is never read (every key is in this call).
    AttentionPush attention = attention_push(head_layout(node));
    attention.window = 0;
    attention.chunk = int32_t(clamp32(a.local_chunk));
    attention.chunks_before = 1;
    attention.ring = 1;
    attention.scale = a.scale;
    attention.stride = 1;
    attention.block = 1;
    attention.summary = 0;
    attention.split = 0;
    DispatchSpec d = make_dispatch(node, "attention", {kQueryRows, uint32_t(dh), tile, 2}, kQueryRows, attention,
                                   [local](int64_t n) {
                                     return Groups{uint32_t((n + kQueryRows - 1) / kQueryRows), uint32_t(local), 1};
                                   },
                                   {qkv, {unused, 0, 0, "routing local heads (no state)"}, out});
    d.shared_bytes = uint32_t(std::min<uint64_t>(2ull * tile * uint64_t(dh) * sizeof(float), UINT32_MAX));
    TERN_RETURN_IF_ERROR(low.program.add(std::move(d)));
  }

  // Routing heads.
  TERN_ASSIGN_OR_RETURN(auto mu, low.weight(node.weights[0]));  // [Hr, K, dh]
  const uint64_t f = sizeof(float);
  TERN_ASSIGN_OR_RETURN(auto xn, low.scratch(uint64_t(hr) * 2 * uint64_t(batch) * uint64_t(dh) * f,
                                             "routing normalised queries and keys"));
  TERN_ASSIGN_OR_RETURN(auto scores,
                        low.scratch(uint64_t(hr) * 2 * uint64_t(K) * uint64_t(batch) * f, "routing cluster scores"));
  TERN_ASSIGN_OR_RETURN(auto members,
                        low.scratch(uint64_t(hr) * 2 * uint64_t(K) * uint64_t(max_w) * f, "routing cluster members"));
  TERN_ASSIGN_OR_RETURN(auto slot_of,
                        low.scratch(uint64_t(hr) * uint64_t(K) * uint64_t(batch) * f, "routing member slots"));
  TERN_ASSIGN_OR_RETURN(auto outputs, low.scratch(uint64_t(hr) * uint64_t(K) * uint64_t(max_w) * uint64_t(dh) * f,
                                                  "routing cluster outputs"));
  auto bind = [](const Result<Slice>& s, const char* what) { return Binding{s.value(), 0, 0, what}; };
  // Every routing shader gets the same numbers and reads the ones it needs.
  RoutingPush push;
  push.heads = uint32_t(heads);
  push.local_heads = uint32_t(local);
  push.routing_heads = uint32_t(hr);
  push.clusters = uint32_t(K);
  push.max_batch = uint32_t(batch);
  push.window = clamp32(a.window);
  push.max_w = uint32_t(max_w);
  push.scale = a.scale;
  push.norm_eps = a.norm_eps;
  push.count_eps = a.count_eps;
  const HeadLayout heads_layout = a.layout();
  push.row = uint32_t(heads_layout.row);
  push.q_col = uint32_t(heads_layout.q);
  push.k_col = uint32_t(heads_layout.k);
  push.v_col = uint32_t(heads_layout.v);
  push.kv_heads = uint32_t(heads_layout.kv_heads);

  TERN_RETURN_IF_ERROR(low.program.add(make_dispatch(
      node, "routing_prep", {uint32_t(dh)}, 64, push,
      [hr](int64_t n) { return stride_groups(n * hr * 2, 64); }, {qkv, bind(xn, "routing normalised queries and keys")})));

  TERN_RETURN_IF_ERROR(low.program.add(make_dispatch(node, "routing_scores", {uint32_t(dh)}, 64, push,
                                                     [hr, K](int64_t n) { return stride_groups(n * K * 2 * hr, 64); },
                                                     {bind(xn, "routing normalised queries and keys"),
                                                      {mu, 0, 0, "routing centroids"},
                                                      bind(scores, "routing cluster scores")})));

  DispatchSpec sel = make_dispatch(
      node, "routing_select", {}, 256, push,
      [hr, K](int64_t) { return stride_groups(K * 2 * hr, 1); },
      {bind(scores, "routing cluster scores"), bind(members, "routing cluster members"),
       bind(slot_of, "routing member slots")});
  sel.shared_bytes = 2 * 256 * 4;
  TERN_RETURN_IF_ERROR(low.program.add(std::move(sel)));

  const uint32_t tile = key_tile_for(low, dh, sizeof(int32_t));
  const int64_t window = a.window;
  DispatchSpec att = make_dispatch(
      node, "routing_attend", {kQueryRows, uint32_t(dh), tile}, kQueryRows, push,
      [hr, K, window](int64_t n) {
        const int64_t w = std::min(window, n);
        return Groups{uint32_t((w + kQueryRows - 1) / kQueryRows), uint32_t(std::min<int64_t>(K, UINT32_MAX)),
                      uint32_t(hr)};
      },
      {bind(xn, "routing normalised queries and keys"), qkv, bind(members, "routing cluster members"),
       bind(outputs, "routing cluster outputs")});
  att.shared_bytes = uint32_t(std::min<uint64_t>(2ull * tile * uint64_t(dh) * f + tile * sizeof(int32_t), UINT32_MAX));
  TERN_RETURN_IF_ERROR(low.program.add(std::move(att)));

  return low.program.add(make_dispatch(
      node, "routing_combine", {uint32_t(dh)}, 64, push,
      [hr, dh](int64_t n) { return stride_groups(n * hr * dh, 64); },
      {bind(slot_of, "routing member slots"), bind(outputs, "routing cluster outputs"), out}));
}

}  // namespace tern::vk
