// SPDX-License-Identifier: MIT
// Cases for the Llama-family ops: RMS_NORM (plain, Gemma's 1 + gain, per-head groups), ROTARY (half-split and
// interleaved pairs, partial rotary dims, dynamic NTK and LongRoPE frequencies chosen per call), GATED_ACTIVATION,
// the SILU and SOFTCAP activations, a scaled EMBEDDING, and grouped-query and soft-capped attention. Each model is
// ids -> EMBEDDING(random table) -> op; the references are ops/reference.h's kernels.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "op_cases.h"
#include "op_graph.h"
#include "ops/attention_pattern.h"
#include "ops/reference.h"
#include "ops/rotary.h"
#include "test_support.h"

namespace tern::test {
namespace {

std::vector<float> rows_of(const OpGraph& g, const std::vector<int32_t>& ids) {
  std::vector<float> x(ids.size() * size_t(g.d));
  ref::embedding(g.table.data(), g.d, ids.data(), int64_t(ids.size()), x.data());
  return x;
}

// One session of n tokens whose runs are the given cuts, each with its own reference.
CaseSession session_of(int64_t n, std::vector<CaseRun> runs) {
  CaseSession s;
  s.max_tokens = n;
  s.runs = std::move(runs);
  return s;
}

OpCase decoder_case(const std::string& name, const std::string& group) {
  OpCase c;
  c.name = name;
  c.group = group;
  c.tags = "[ops][decoder]";
  return c;
}

struct NormCase {
  std::string name;
  int64_t width, columns, group;
  float offset;
};

void add_rms_norms(std::vector<OpCase>& out) {
  const NormCase cases[] = {{"rms_norm d=48", 48, 48, 0, 0.0f},
                            {"rms_norm gain offset 1 d=48", 48, 48, 0, 1.0f},
                            {"rms_norm per head 5x8 of width 56", 56, 40, 8, 0.0f}};
  for (const NormCase& nc : cases) {
    OpCase c = decoder_case(nc.name, "rms_norm");
    c.build = [nc] {
      const int64_t rows = 30, n = 33;
      OpGraph g = start_graph(rows, nc.width, 101);
      const std::vector<float> gain = random_floats(size_t(nc.columns), 102, 0.3f, 1.7f);
      const int32_t w = add_constant(g, "gain", {nc.columns}, gain);
      const int32_t y = g.graph.add_value("y", fb::DType::F32, nc.width).value();
      fb::RmsNormParamsT p;
      p.eps = 1e-5f;
      p.weight_offset = nc.offset;
      p.group = int32_t(nc.group);
      REQUIRE(g.graph.add_op(fb::OpCode::RMS_NORM, "norm", {g.x}, {y}, {w}, p).ok());
      BuiltCase b{finish_and_load(g, y, "rms_norm", n), nc.width, {}};
      const std::vector<int32_t> ids = random_ids(n, rows, 103);
      const std::vector<float> x = rows_of(g, ids);
      std::vector<float> want(x.size());
      ref::rms_norm(x.data(), n, nc.width, gain.data(), nc.columns, nc.group, nc.offset, 1e-5f, want.data());
      b.sessions = {session_of(n, {{ids, 0, want}, {ids, 7, want}})};
      return b;
    };
    out.push_back(c);
  }
}

struct RotaryCase {
  std::string name;
  int heads, head_dim, rotary_dim;
  int64_t width;
  fb::RotaryLayout layout;
  fb::RotaryScaling scaling;
  int64_t original;  // DYNAMIC_NTK, LONGROPE
  float attention_factor;
};

// 1 / theta^(2i / rotary_dim), scaled by `by`.
std::vector<float> frequencies(int rotary_dim, double theta, double by) {
  std::vector<float> f(size_t(rotary_dim / 2));
  for (int i = 0; i < rotary_dim / 2; ++i) f[size_t(i)] = float(by / std::pow(theta, 2.0 * i / rotary_dim));
  return f;
}

void add_rotaries(std::vector<OpCase>& out) {
  using L = fb::RotaryLayout;
  using S = fb::RotaryScaling;
  const RotaryCase cases[] = {
      {"rotary half split 3 heads x16 rotary 12 width 64", 3, 16, 12, 64, L::HALF_SPLIT, S::STATIC, 0, 1.0f},
      {"rotary interleaved 2 heads x8 width 24", 2, 8, 8, 24, L::INTERLEAVED, S::STATIC, 0, 1.0f},
      {"rotary dynamic ntk original 16 heads 2x16", 2, 16, 16, 48, L::HALF_SPLIT, S::DYNAMIC_NTK, 16, 1.0f},
      {"rotary longrope original 20 heads 2x8 factor 1.2", 2, 8, 8, 32, L::HALF_SPLIT, S::LONGROPE, 20, 1.2f},
  };
  for (const RotaryCase& rc : cases) {
    OpCase c = decoder_case(rc.name, "rotary");
    c.build = [rc] {
      const int64_t rows = 40, n = 41;
      OpGraph g = start_graph(rows, rc.width, 111);
      const std::vector<float> inv = frequencies(rc.rotary_dim, 100.0, 1.0);
      std::vector<int32_t> weights = {add_constant(g, "inv_freq", {rc.rotary_dim / 2}, inv)};
      std::vector<float> long_inv;
      if (rc.scaling == S::LONGROPE) {
        long_inv = random_floats(size_t(rc.rotary_dim / 2), 112, 0.2f, 0.9f);
        for (size_t i = 0; i < long_inv.size(); ++i) long_inv[i] *= inv[i];
        weights.push_back(add_constant(g, "long_inv_freq", {rc.rotary_dim / 2}, long_inv));
      }
      const int32_t y = g.graph.add_value("y", fb::DType::F32, rc.width).value();
      fb::RotaryParamsT p;
      p.heads = rc.heads;
      p.head_dim = rc.head_dim;
      p.rotary_dim = rc.rotary_dim;
      p.layout = rc.layout;
      p.attention_factor = rc.attention_factor;
      p.scaling = rc.scaling;
      p.base = 100.0f;
      p.factor = 2.5f;
      p.original_max_positions = rc.original;
      REQUIRE(g.graph.add_op(fb::OpCode::ROTARY, "rope", {g.x}, {y}, weights, p).ok());
      BuiltCase b{finish_and_load(g, y, "rotary", n), rc.width, {}};
      const std::vector<int32_t> ids = random_ids(n, rows, 113);
      const std::vector<float> x = rows_of(g, ids);
      Rotary r;
      r.heads = rc.heads, r.head_dim = rc.head_dim, r.rotary_dim = rc.rotary_dim;
      r.interleaved = rc.layout == L::INTERLEAVED;
      r.attention_factor = rc.attention_factor;
      r.scaling = rc.scaling, r.base = 100.0f, r.factor = 2.5f, r.original_max_positions = rc.original;
      r.inv_freq = inv.data();
      r.long_inv_freq = long_inv.empty() ? nullptr : long_inv.data();
      // Each call's frequencies come from its own last position: the reference of a cut is computed call by call.
      std::vector<CaseRun> runs;
      for (int64_t segment : {int64_t(0), int64_t(10), int64_t(1)}) {
        std::vector<float> want(x.size());
        const int64_t step = segment == 0 ? n : segment;
        for (int64_t p0 = 0; p0 < n; p0 += step) {
          const int64_t m = std::min(step, n - p0);
          ref::rotary(r, x.data() + p0 * rc.width, rc.width, m, p0, p0 + m, want.data() + p0 * rc.width);
        }
        runs.push_back({ids, segment, want});
      }
      b.sessions = {session_of(n, runs)};
      return b;
    };
    out.push_back(c);
  }
}

void add_gated_activations(std::vector<OpCase>& out) {
  for (auto kind : {fb::ActivationKind::SILU, fb::ActivationKind::GELU_TANH}) {
    const std::string name = kind == fb::ActivationKind::SILU ? "silu" : "gelu_tanh";
    OpCase c = decoder_case("gated " + name + " F=36", "gated activation");
    c.build = [kind] {
      const int64_t rows = 30, f = 36, n = 29;
      OpGraph g = start_graph(rows, 2 * f, 121);
      const int32_t y = g.graph.add_value("y", fb::DType::F32, f).value();
      REQUIRE(g.graph.add_op(fb::OpCode::GATED_ACTIVATION, "glu", {g.x}, {y}, {}, fb::GatedActivationParamsT{{}, kind}).ok());
      BuiltCase b{finish_and_load(g, y, "gated", n), f, {}};
      const std::vector<int32_t> ids = random_ids(n, rows, 122);
      const std::vector<float> x = rows_of(g, ids);
      std::vector<float> want(size_t(n * f));
      ref::gated_activation(kind, x.data(), n, f, want.data());
      b.sessions = {session_of(n, {{ids, 0, want}, {ids, 5, want}})};
      return b;
    };
    out.push_back(c);
  }
}

void add_new_activations(std::vector<OpCase>& out) {
  for (auto kind : {fb::ActivationKind::SILU, fb::ActivationKind::SOFTCAP}) {
    const bool cap = kind == fb::ActivationKind::SOFTCAP;
    OpCase c = decoder_case(cap ? "activation softcap 0.6 d=50" : "activation silu d=50", "gated activation");
    c.build = [kind, cap] {
      const int64_t rows = 40, d = 50, n = 37;
      OpGraph g = start_graph(rows, d, 131);
      const int32_t y = g.graph.add_value("y", fb::DType::F32, d).value();
      fb::ActivationParamsT p;
      p.kind = kind;
      p.cap = cap ? 0.6f : 0.0f;
      REQUIRE(g.graph.add_op(fb::OpCode::ACTIVATION, "act", {g.x}, {y}, {}, p).ok());
      BuiltCase b{finish_and_load(g, y, "activation", n), d, {}};
      const std::vector<int32_t> ids = random_ids(n, rows, 132);
      const std::vector<float> x = rows_of(g, ids);
      std::vector<float> want(x.size());
      ref::activation(kind, x.data(), int64_t(x.size()), want.data(), p.cap);
      b.sessions = {session_of(n, {{ids, 0, want}})};
      return b;
    };
    out.push_back(c);
  }
}

void add_scaled_embedding(std::vector<OpCase>& out) {
  OpCase c = decoder_case("embedding scale 4.8989 rows=30 d=24", "rms_norm");
  c.build = [] {
    const int64_t rows = 30, d = 24, n = 40;
    OpGraph g = start_graph(rows, d, 141);
    const float scale = std::sqrt(24.0f);
    const std::vector<float> table = random_floats(size_t(rows * d), 142);
    const int32_t t = add_constant(g, "table2", {rows, d}, table);
    const int32_t y = g.graph.add_value("y", fb::DType::F32, d).value();
    REQUIRE(g.graph.add_op(fb::OpCode::EMBEDDING, "embed2", {0}, {y}, {t}, fb::EmbeddingParamsT{{}, scale}).ok());
    BuiltCase b{finish_and_load(g, y, "embedding_scale", n), d, {}};
    const std::vector<int32_t> ids = random_ids(n, rows, 143);
    std::vector<float> want(size_t(n * d));
    ref::embedding(table.data(), d, ids.data(), n, want.data(), scale);
    b.sessions = {session_of(n, {{ids, 0, want}, {ids, 7, want}})};
    return b;
  };
  out.push_back(c);
}

struct GroupedCase {
  std::string name;
  int heads, kv_heads, dh, window;  // window 0: dense
  float softcap;
};

// q [heads*dh] | k [kv*dh] | v [kv*dh] rows; the state holds kv_heads heads only.
void add_grouped_attention(std::vector<OpCase>& out) {
  const GroupedCase cases[] = {{"attention grouped 4 heads 2 kv x8 dense", 4, 2, 8, 0, 0.0f},
                               {"attention grouped 6 heads 1 kv x8 sliding w=5", 6, 1, 8, 5, 0.0f},
                               {"attention softcap 1.5 heads 2x8 dense", 2, 0, 8, 0, 1.5f},
                               {"attention softcap 2 grouped 4 heads 2 kv x16 sliding w=7", 4, 2, 16, 7, 2.0f}};
  for (const GroupedCase& gc : cases) {
    OpCase c = decoder_case(gc.name, "attention grouped and soft-capped");
    c.tags = "[attention][decoder][streaming]";
    c.cpu_threads = {1, 2};
    c.state_matches_cpu = true;
    c.build = [gc] {
      const int64_t n = 70, rows = 64, kv = gc.kv_heads > 0 ? gc.kv_heads : gc.heads;
      const int64_t inner = int64_t(gc.heads) * gc.dh, width = inner + 2 * kv * gc.dh;
      OpGraph g = start_graph(rows, width, 151);
      const int32_t y = g.graph.add_value("y", fb::DType::F32, inner).value();
      fb::AttentionParamsT p;
      p.heads = gc.heads;
      p.head_dim = gc.dh;
      p.scale = 0.5f;
      p.kv_heads = gc.kv_heads;
      p.logit_softcap = gc.softcap;
      if (gc.window > 0) {
        p.kind.Set(fb::SlidingWindowT{{}, gc.window});
      } else {
        p.kind.Set(fb::DenseT{});
      }
      REQUIRE(g.graph.add_op(fb::OpCode::ATTENTION, "attn", {g.x}, {y}, {}, p).ok());
      BuiltCase b{finish_and_load(g, y, "grouped_attention", n), inner, {}};
      const std::vector<int32_t> ids = random_ids(n, rows, 152);
      const std::vector<float> x = rows_of(g, ids);
      AttentionPattern pattern;
      pattern.kind = gc.window > 0 ? PatternKind::kSliding : PatternKind::kDense;
      pattern.window = gc.window;
      pattern.heads = gc.heads;
      std::vector<float> want(size_t(n * inner));
      ref::attention(x.data(), width, x.data() + inner, x.data() + inner + kv * gc.dh, width, n, 0, gc.heads, gc.dh,
                     0.5f, pattern, want.data(), gc.kv_heads, gc.softcap);
      CaseSession s = session_of(n, {{ids, 0, want}, {ids, 1, want}, {ids, 13, want}});
      // Keys and values of the key/value heads only: every position (dense), or a ring of window - 1.
      const int64_t kept = gc.window > 0 ? gc.window - 1 : n;
      s.state_bytes = 2ull * uint64_t(kept) * uint64_t(kv * gc.dh) * sizeof(float);
      if (gc.window > 0) s.state_plan_tokens = {n, 100 * n};
      // One-token appends again without subgroup arithmetic (Vulkan: attention_rows' shared-memory tree).
      CaseSession fallback = session_of(n, {{ids, 1, want}});
      fallback.device_env = {{"TERN_VULKAN_NO_SUBGROUP_ARITHMETIC", "1"}};
      fallback.on = On::kDeviceOnly;
      b.sessions = {s, fallback};
      return b;
    };
    out.push_back(c);
  }
}

}  // namespace

void add_decoder_cases(std::vector<OpCase>& out) {
  add_rms_norms(out);
  add_rotaries(out);
  add_gated_activations(out);
  add_new_activations(out);
  add_scaled_embedding(out);
  add_grouped_attention(out);
}

}  // namespace tern::test
