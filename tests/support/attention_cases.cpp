// SPDX-License-Identifier: MIT
#include "attention_cases.h"

#include <catch2/catch.hpp>
#include <random>
#include <utility>

#include "op_graph.h"
#include "ops/reference.h"

namespace tern::test {
namespace {

// The schema's head layout of a strided or fixed pattern that splits its heads (AttentionPattern::split) or not.
fb::SparseHeads sparse_heads(bool split) { return split ? fb::SparseHeads::SPLIT : fb::SparseHeads::MERGED; }

}  // namespace

std::vector<AttentionKind> backend_attention_kinds() {
  std::vector<AttentionKind> out;
  AttentionPattern dense;
  out.push_back({"dense", dense, fb::DenseT{}});
  for (int w : {1, 5, 40}) {
    AttentionPattern p;
    p.kind = PatternKind::kSliding;
    p.window = w;
    out.push_back({"sliding w=" + std::to_string(w), p, fb::SlidingWindowT{{}, w}});
  }
  for (auto [c, b] : {std::pair{8, 1}, std::pair{5, 0}, std::pair{16, 2}}) {
    AttentionPattern p;
    p.kind = PatternKind::kChunked;
    p.chunk = c;
    p.chunks_before = b;
    out.push_back({"chunked C=" + std::to_string(c) + " before=" + std::to_string(b), p, fb::ChunkedLocalT{{}, c, b, 1}});
  }
  for (bool split : {false, true}) {
    const std::string heads = split ? " split" : " merged";
    for (int l : {1, 4, 9}) {
      AttentionPattern p;
      p.kind = PatternKind::kStrided;
      p.stride = l;
      p.split = split;
      out.push_back({"strided l=" + std::to_string(l) + heads, p, fb::StridedT{{}, l, sparse_heads(split)}});
    }
    for (auto [b, c] : {std::pair{1, 1}, std::pair{8, 2}, std::pair{12, 12}, std::pair{5, 1}}) {
      AttentionPattern p;
      p.kind = PatternKind::kFixed;
      p.block = b;
      p.summary = c;
      p.split = split;
      out.push_back({"fixed B=" + std::to_string(b) + " c=" + std::to_string(c) + heads, p, fb::FixedT{{}, b, c, sparse_heads(split)}});
    }
  }
  return out;
}

std::vector<AttentionKind> pattern_attention_kinds() {
  auto pattern = [](PatternKind k) {
    AttentionPattern p;
    p.kind = k;
    return p;
  };
  std::vector<AttentionKind> out;
  out.push_back({"dense", pattern(PatternKind::kDense), fb::DenseT{}});
  for (int w : {1, 5, 64}) {
    AttentionKind k{"sliding w=" + std::to_string(w), pattern(PatternKind::kSliding), fb::SlidingWindowT{{}, w}};
    k.pattern.window = w;
    out.push_back(k);
  }
  for (auto [c, b] : {std::pair{8, 1}, std::pair{5, 0}, std::pair{16, 2}}) {
    AttentionKind k{"chunked C=" + std::to_string(c) + " before=" + std::to_string(b), pattern(PatternKind::kChunked),
                    fb::ChunkedLocalT{{}, c, b, 1}};
    k.pattern.chunk = c;
    k.pattern.chunks_before = b;
    out.push_back(k);
  }
  for (bool split : {false, true}) {
    for (int l : {1, 4, 7}) {
      AttentionKind k{std::string("strided l=") + std::to_string(l) + (split ? " split" : " merged"),
                      pattern(PatternKind::kStrided), fb::StridedT{{}, l, sparse_heads(split)}};
      k.pattern.stride = l;
      k.pattern.split = split;
      out.push_back(k);
    }
    for (auto [l, c] : {std::pair{8, 2}, std::pair{5, 5}, std::pair{16, 1}}) {
      AttentionKind k{"fixed l=" + std::to_string(l) + " c=" + std::to_string(c) + (split ? " split" : " merged"),
                      pattern(PatternKind::kFixed), fb::FixedT{{}, l, c, sparse_heads(split)}};
      k.pattern.block = l;
      k.pattern.summary = c;
      k.pattern.split = split;
      out.push_back(k);
    }
  }
  return out;
}

AttentionModel attention_model(const AttentionKind& kind, int heads, int dh, int64_t n, const std::string& name) {
  const int64_t inner = int64_t(heads) * dh, rows = 64;
  auto g = start_graph(rows, 3 * inner, 21);
  int32_t y = g.graph.add_value("y", fb::DType::F32, inner).value();
  fb::AttentionParamsT p;
  p.heads = heads;
  p.head_dim = dh;
  p.scale = 0.4f;
  p.kind = kind.fb;
  REQUIRE(g.graph.add_op(fb::OpCode::ATTENTION, "attn", {g.x}, {y}, {}, p).ok());
  AttentionModel m;
  m.model = finish_and_load(g, y, name, n);
  std::mt19937 rng(22);
  m.ids.resize(size_t(n));
  for (auto& id : m.ids) id = int32_t(rng() % rows);
  std::vector<float> qkv(size_t(n * 3 * inner));
  ref::embedding(g.table.data(), 3 * inner, m.ids.data(), n, qkv.data());
  AttentionPattern pattern = kind.pattern;
  pattern.heads = heads;
  m.want.resize(size_t(n * inner));
  ref::attention(qkv.data(), 3 * inner, qkv.data() + inner, qkv.data() + 2 * inner, 3 * inner, n, 0, heads, dh, 0.4f,
                 pattern, m.want.data());
  return m;
}

}  // namespace tern::test
