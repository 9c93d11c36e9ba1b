// SPDX-License-Identifier: MIT
// One-op models of the attention kinds that carry weights (LSH rotations, routing centroids, adaptive span's key
// positions and spans), and the reference kernels' specs built from the same numbers. Shared by the op case table
// (op_cases_*.cpp) and the kinds' semantic tests (loader checks, planner growth, streaming errors).
#pragma once

#include <cstdint>
#include <vector>

#include "graph_builder.h"
#include "op_graph.h"
#include "ops/adaptive_span.h"
#include "ops/lsh.h"
#include "ops/routing.h"

namespace tern::test {

// ---- Reformer LSH: ids -> EMBEDDING (random qk | v rows [n, 2*heads*dh]) -> ATTENTION(Lsh) ----
struct LshCase {
  int heads = 2, dh = 16;
  fb::LshT kind;
};

fb::LshT lsh_kind(int32_t chunk, int32_t before, int32_t after, int32_t hashes, std::vector<int32_t> buckets,
                              int32_t pad_to, int32_t pad_above);
// sum(bucket factors) / 2: the rotations' last dimension.
int64_t lsh_rot_half(const fb::LshT& kind);
// The spec the reference kernel reads; points into `rotations` [heads, dh, hashes, rot_half].
LshAttention lsh_spec(const LshCase& c, float scale, const std::vector<float>& rotations);

struct LshGraph {
  OpGraph g;
  std::vector<float> rotations;  // [heads, dh, hashes, rot_half], in [-1.5, 1.5)
  int32_t y = -1;                // the attention's output [n, heads*dh]
};
LshGraph build_lsh_graph(const LshCase& c, int64_t rows, float scale, uint32_t seed);

// ---- Routing: ids -> EMBEDDING (random q | k | v rows [n, (heads + 2*kv)*dh]) -> ATTENTION(Routing) ----
struct RoutingCase {
  int heads = 2, dh = 16;
  fb::RoutingT kind;
  int kv_heads = 0;  // AttentionParams.kv_heads; 0: one per query head
  // Columns of a q | k | v row.
  int64_t row() const { return int64_t(heads + 2 * (kv_heads > 0 ? kv_heads : heads)) * dh; }
};

// Centroids as the reference family draws them: unit-variance rows, layer-normalised;
// [heads - local_heads, clusters, dh].
std::vector<float> random_centroids(const RoutingCase& c, uint32_t seed);
RoutingAttention routing_spec(const RoutingCase& c, float scale, const std::vector<float>& centroids);

struct RoutingGraph {
  OpGraph g;
  std::vector<float> centroids;
  int32_t y = -1;  // [n, heads*dh]
};
RoutingGraph build_routing_graph(const RoutingCase& c, int64_t rows, float scale, uint32_t seed);

// ---- Adaptive span: ids -> EMBEDDING (random q | k | v rows [n, op.row()]) -> ATTENTION(AdaptiveSpan) ----
// Keys a head reaches: distances d in [1, L] with clamp((1 - d + z L) / R + 1, 0, 1) > 0, i.e. d <= ceil(z L) + R.
// Written from the formula, independently of the runtime (the test spans keep z L away from integers).
int64_t expected_span_reach(double z, int64_t L, int64_t R);

struct SpanOp {
  int heads = 4, dh = 8;
  int64_t L = 40, R = 8;
  std::vector<float> spans;  // [heads]; empty: no span weight
  int kv_heads = 0;          // AttentionParams.kv_heads; 0: one per query head
  // Columns of a q | k | v row.
  int64_t row() const { return int64_t(heads + 2 * (kv_heads > 0 ? kv_heads : heads)) * dh; }
};

struct SpanGraph {
  OpGraph g;
  std::vector<float> key_pe;  // [dh, L]
  int32_t y = -1;             // [n, heads*dh]
};
SpanGraph build_span_graph(const SpanOp& op, int64_t rows, float scale, uint32_t seed);
// The reference spec, each head's reach from expected_span_reach (L without span weights); points into key_pe.
AdaptiveSpan span_spec(const SpanOp& op, const std::vector<float>& key_pe);

}  // namespace tern::test
