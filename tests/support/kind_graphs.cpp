// SPDX-License-Identifier: MIT
#include "kind_graphs.h"

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>

#include "test_support.h"

namespace tern::test {

fb::LshT lsh_kind(int32_t chunk, int32_t before, int32_t after, int32_t hashes, std::vector<int32_t> buckets,
                              int32_t pad_to, int32_t pad_above) {
  fb::LshT k;
  k.chunk = chunk;
  k.chunks_before = before;
  k.chunks_after = after;
  k.hashes = hashes;
  k.buckets = std::move(buckets);
  k.pad_to = pad_to;
  k.pad_above = pad_above;
  return k;
}

int64_t lsh_rot_half(const fb::LshT& kind) {
  int64_t sum = 0;
  for (int32_t f : kind.buckets) sum += f;
  return sum / 2;
}

LshAttention lsh_spec(const LshCase& c, float scale, const std::vector<float>& rotations) {
  LshAttention a;
  a.heads = c.heads;
  a.head_dim = c.dh;
  a.scale = scale;
  a.chunk = c.kind.chunk;
  a.before = c.kind.chunks_before;
  a.after = c.kind.chunks_after;
  a.hashes = c.kind.hashes;
  a.buckets = 1;
  for (int32_t f : c.kind.buckets) {
    a.factors.push_back(f);
    a.buckets *= f;
  }
  a.rot_half = lsh_rot_half(c.kind);
  a.pad_to = c.kind.pad_to;
  a.pad_above = c.kind.pad_above;
  a.rotations = rotations.data();
  return a;
}

LshGraph build_lsh_graph(const LshCase& c, int64_t rows, float scale, uint32_t seed) {
  const int64_t inner = int64_t(c.heads) * c.dh, rot_half = lsh_rot_half(c.kind);
  const std::vector<int64_t> rot_shape = {c.heads, c.dh, c.kind.hashes, rot_half};
  LshGraph s{start_graph(rows, 2 * inner, seed),
             random_floats(size_t(c.heads * c.dh * c.kind.hashes * rot_half), seed + 1, -1.5f, 1.5f), -1};
  const int32_t rot = add_constant(s.g, "rotations", rot_shape, s.rotations);
  s.y = s.g.graph.add_value("y", fb::DType::F32, inner).value();
  fb::AttentionParamsT p;
  p.heads = c.heads;
  p.head_dim = c.dh;
  p.scale = scale;
  p.kind = convert::AttentionKind(c.kind);
  REQUIRE(s.g.graph.add_op(fb::OpCode::ATTENTION, "attn", {s.g.x}, {s.y}, {rot}, p).ok());
  return s;
}

std::vector<float> random_centroids(const RoutingCase& c, uint32_t seed) {
  const int64_t rows = int64_t(c.heads - c.kind.local_heads) * c.kind.clusters;
  std::vector<float> mu = random_floats(size_t(rows * c.dh), seed, -1.7f, 1.7f);
  for (int64_t r = 0; r < rows; ++r) routing_normalize(&mu[size_t(r * c.dh)], c.dh, 1e-6f, &mu[size_t(r * c.dh)]);
  return mu;
}

RoutingAttention routing_spec(const RoutingCase& c, float scale, const std::vector<float>& centroids) {
  RoutingAttention a;
  a.heads = c.heads;
  a.kv_heads = c.kv_heads;
  a.head_dim = c.dh;
  a.scale = scale;
  a.clusters = c.kind.clusters;
  a.window = c.kind.window;
  a.local_heads = c.kind.local_heads;
  a.local_chunk = c.kind.local_chunk;
  a.centroids = centroids.data();
  return a;
}

RoutingGraph build_routing_graph(const RoutingCase& c, int64_t rows, float scale, uint32_t seed) {
  const int64_t inner = int64_t(c.heads) * c.dh;
  RoutingGraph s{start_graph(rows, c.row(), seed), random_centroids(c, seed + 1), -1};
  const int32_t mu = add_constant(s.g, "centroids", {c.heads - c.kind.local_heads, c.kind.clusters, c.dh}, s.centroids);
  s.y = s.g.graph.add_value("y", fb::DType::F32, inner).value();
  fb::AttentionParamsT p = convert::attention_params(c.heads, c.dh, scale, c.kind);
  p.kv_heads = c.kv_heads;
  REQUIRE(s.g.graph.add_op(fb::OpCode::ATTENTION, "attn", {s.g.x}, {s.y}, {mu}, p).ok());
  return s;
}

int64_t expected_span_reach(double z, int64_t L, int64_t R) {
  return std::max<int64_t>(0, std::min<int64_t>(L, int64_t(std::ceil(z * double(L))) + R));
}

SpanGraph build_span_graph(const SpanOp& op, int64_t rows, float scale, uint32_t seed) {
  const int64_t inner = int64_t(op.heads) * op.dh;
  SpanGraph s{start_graph(rows, op.row(), seed), random_floats(size_t(op.dh * op.L), seed + 1, -1, 1), -1};
  const int32_t pe = add_constant(s.g, "key_pe", {op.dh, op.L}, s.key_pe);
  const int32_t span = op.spans.empty() ? -1 : add_constant(s.g, "span", {op.heads}, op.spans);
  s.y = s.g.graph.add_value("y", fb::DType::F32, inner).value();
  fb::AttentionParamsT p;
  p.heads = op.heads;
  p.head_dim = op.dh;
  p.kv_heads = op.kv_heads;
  p.scale = scale;
  p.kind.Set(fb::AdaptiveSpanT{{}, int32_t(op.L), int32_t(op.R)});
  REQUIRE(s.g.graph.add_op(fb::OpCode::ATTENTION, "attn", {s.g.x}, {s.y}, {pe, span}, p).ok());
  return s;
}

AdaptiveSpan span_spec(const SpanOp& op, const std::vector<float>& key_pe) {
  AdaptiveSpan a;
  a.heads = op.heads;
  a.kv_heads = op.kv_heads;
  a.head_dim = op.dh;
  a.max_span = op.L;
  a.ramp = op.R;
  a.key_pe = key_pe.data();
  a.span = op.spans.empty() ? nullptr : op.spans.data();
  for (int h = 0; h < op.heads; ++h) {
    a.reach.push_back(op.spans.empty() ? op.L : expected_span_reach(op.spans[size_t(h)], op.L, op.R));
  }
  return a;
}

}  // namespace tern::test
