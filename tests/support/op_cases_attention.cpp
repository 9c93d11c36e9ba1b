// SPDX-License-Identifier: MIT
// Cases for the attention pattern kinds (dense, sliding windows, chunked local, strided and fixed with merged and
// split heads) and adaptive span. Every kind streams: appends after a reset give the one-pass reference, since
// keys before position 0 are zero and each query sees only earlier keys.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>

#include "attention_cases.h"
#include "kind_graphs.h"
#include "op_cases.h"
#include "op_graph.h"
#include "ops/reference.h"
#include "test_support.h"

namespace tern::test {
namespace {

std::string heads_name(int heads, int dh) { return " heads " + std::to_string(heads) + "x" + std::to_string(dh); }

// "attention sliding" for "sliding w=5": one test per pattern family and backend.
std::string pattern_group(const AttentionKind& kind) { return "attention " + kind.name.substr(0, kind.name.find(' ')); }

// A stateless-cut session: each segment one run against the same one-pass reference.
CaseSession cuts(const AttentionModel& m, int64_t max_tokens, int64_t max_batch, std::vector<int64_t> segments) {
  CaseSession s;
  s.max_tokens = max_tokens;
  s.max_batch = max_batch;
  for (int64_t segment : segments) s.runs.push_back({m.ids, segment, m.want});
  return s;
}

// Device sizes (backend_attention_kinds, n 70): each kind at 2 heads x 8 and a wide case (1 x 64, or 2 x 32 for
// split heads, which need an even count). Sliding windows of w >= 2 also: the state is a ring of w - 1 keys (k and
// v), for the session's 70 tokens and for one of 100,000 tokens in appends of 16. One-token appends run again
// without subgroup arithmetic.
void add_device_size_patterns(std::vector<OpCase>& out) {
  for (const AttentionKind& kind : backend_attention_kinds()) {
    const std::pair<int, int> wide = kind.pattern.split ? std::pair{2, 32} : std::pair{1, 64};
    for (auto [heads, dh] : {std::pair{2, 8}, wide}) {
      OpCase c;
      c.name = "attention " + kind.name + heads_name(heads, dh) + " n=70";
      c.group = pattern_group(kind);
      c.tags = "[attention][streaming]";
      c.cpu_threads = {2};
      c.state_matches_cpu = true;  // dense keeps every key, the windowed kinds a ring: on each backend alike
      c.build = [kind, heads = heads, dh = dh] {
        const int64_t n = 70, inner = int64_t(heads) * dh;
        AttentionModel m = attention_model(kind, heads, dh, n, "backend_attention");
        BuiltCase b{m.model, inner, {cuts(m, n, 0, {n, 1, 13})}};
        // One-token appends without subgroup arithmetic (Vulkan: attention_rows' shared-memory tree).
        CaseSession fallback = cuts(m, n, 0, {1});
        fallback.device_env = {{"TERN_VULKAN_NO_SUBGROUP_ARITHMETIC", "1"}};
        fallback.on = On::kDeviceOnly;
        if (kind.pattern.kind == PatternKind::kSliding && kind.pattern.window >= 2) {
          const uint64_t ring = 2ull * uint64_t(kind.pattern.window - 1) * uint64_t(inner) * sizeof(float);
          b.sessions[0].state_bytes = ring;
          b.sessions[0].state_plan_tokens = {n, 100 * n};
          CaseSession far = cuts(m, 100000, 16, {16});
          far.state_bytes = ring;
          far.state_plan_tokens = {100000};
          b.sessions.push_back(std::move(far));
        }
        b.sessions.push_back(std::move(fallback));
        return b;
      };
      out.push_back(c);
    }
  }
}

// Rows of many keys on a wide head (dense, 1 x 128, n 600: each row's keys times the head's width well past 65,535,
// where llvmpipe stops an invocation's loops; its rows past 224 came out wrong while the shaders looped over the
// head's dimensions), in one call and in one-token appends.
void add_device_long_rows(std::vector<OpCase>& out) {
  const AttentionKind kind = backend_attention_kinds()[0];  // dense
  OpCase c;
  c.name = "attention " + kind.name + heads_name(1, 128) + " n=600";
  c.group = pattern_group(kind);
  c.tags = "[attention][streaming]";
  c.cpu_threads = {2};
  c.state_matches_cpu = true;
  c.build = [kind] {
    const int64_t n = 600;
    AttentionModel m = attention_model(kind, 1, 128, n, "backend_attention_long");
    return BuiltCase{m.model, 128, {cuts(m, n, 0, {n, 1})}};
  };
  out.push_back(c);
}

// CPU sizes (pattern_attention_kinds: windows and blocks up to 64, n 120, 4 heads x 8), in a session of the
// model's own max_context.
void add_cpu_size_patterns(std::vector<OpCase>& out) {
  for (const AttentionKind& kind : pattern_attention_kinds()) {
    OpCase c;
    c.name = "attention " + kind.name + heads_name(4, 8) + " n=120";
    c.group = pattern_group(kind);
    c.tags = "[attention][streaming]";
    c.on = On::kCpuOnly;
    c.cpu_threads = {2};
    c.build = [kind] {
      const int64_t n = 120;
      AttentionModel m = attention_model(kind, 4, 8, n, "attention");
      return BuiltCase{m.model, 32, {cuts(m, 0, 0, {n, 1, 13})}};
    };
    out.push_back(c);
  }
}

std::string spans_name(const SpanOp& op) {
  std::string s = "adaptive span L=" + std::to_string(op.L) + " R=" + std::to_string(op.R) + heads_name(op.heads, op.dh);
  if (op.kv_heads > 0) s += " kv " + std::to_string(op.kv_heads);
  if (op.spans.empty()) return s + " no span weight";
  s += " z";
  for (float z : op.spans) {
    char buf[16];
    std::snprintf(buf, sizeof buf, " %g", double(z));
    s += buf;
  }
  return s;
}

struct SpanSizes {
  int64_t n, rows;
  uint32_t graph_seed, ids_seed;
  bool device;  // false: CPU sizes, the ids from std::mt19937
};

// ids -> EMBEDDING -> ATTENTION(AdaptiveSpan), scale 0.4, and its one-pass reference.
struct SpanModel {
  tern_model* model;
  std::vector<int32_t> ids;
  std::vector<float> want;
  AdaptiveSpan spec;
};

SpanModel span_model(const SpanOp& op, const SpanSizes& z, SpanGraph& sg) {
  const int64_t inner = int64_t(op.heads) * op.dh, kv_inner = (op.row() - inner) / 2, row = op.row(), n = z.n;
  sg = build_span_graph(op, z.rows, 0.4f, z.graph_seed);
  SpanModel m{finish_and_load(sg.g, sg.y, "adaptive_span", z.device ? n : 0), {}, {}, span_spec(op, sg.key_pe)};
  if (z.device) {
    m.ids = random_ids(n, z.rows, z.ids_seed);
  } else {
    std::mt19937 rng(z.ids_seed);
    m.ids.resize(size_t(n));
    for (auto& id : m.ids) id = int32_t(rng() % uint32_t(z.rows));
  }
  std::vector<float> qkv(size_t(n * row));
  m.want.resize(size_t(n * inner));
  ref::embedding(sg.g.table.data(), row, m.ids.data(), n, qkv.data());
  ref::adaptive_span_attention(qkv.data(), row, qkv.data() + inner, qkv.data() + inner + kv_inner, row, n, 0, 0.4f,
                               m.spec, m.want.data());
  return m;
}

// The state bytes of a session of max_tokens: k and v of each key/value head's reach, the longest of the query
// heads that share it (each query head its own without kv_heads), at most max_tokens.
uint64_t span_state_bytes(const SpanOp& op, const AdaptiveSpan& spec, int64_t max_tokens) {
  const int kv = op.kv_heads > 0 ? op.kv_heads : op.heads, group = op.heads / kv;
  int64_t keys = 0;
  for (int g = 0; g < kv; ++g) {
    int64_t reach = 0;
    for (int h = g * group; h < (g + 1) * group; ++h) reach = std::max(reach, spec.reach[size_t(h)]);
    keys += std::min(reach, max_tokens);
  }
  return 2ull * uint64_t(keys) * uint64_t(op.dh) * sizeof(float);
}

// Spans: a negative z that masks every key (reach 0), z = 0 (reach R), mid values, z > 1 (clamped to L), and no span
// weight (plain attention over the previous L keys). The CPU sizes reach L = 150, several key blocks of the kernel,
// with appends of 1, 13 and 64 through n = 230, and check each head's own reach as the state, however far planned.
// Grouped query heads (kv_heads 2 of 4, and one key/value head for all): each key/value head keeps the longest reach
// of its query heads, on every backend.
void add_adaptive_spans(std::vector<OpCase>& out) {
  const std::vector<SpanOp> device = {{4, 8, 40, 8, {-0.5f, 0.0f, 0.33f, 1.5f}},
                                      {2, 16, 30, 6, {0.07f, 0.61f}},
                                      {2, 8, 20, 0, {}},
                                      {4, 8, 40, 8, {-0.5f, 0.0f, 0.33f, 1.5f}, 2},
                                      {4, 16, 30, 6, {0.07f, 0.61f, 0.27f, -0.5f}, 1},
                                      {4, 8, 20, 0, {}, 2}};
  for (size_t i = 0; i < device.size(); ++i) {
    OpCase c;
    c.name = spans_name(device[i]) + " n=60";
    c.group = "adaptive span";
    c.tags = "[attention][adaptive_span][streaming]";
    c.cpu_threads = {2};
    c.state_matches_cpu = true;
    c.build = [op = device[i], i] {
      SpanGraph sg;
      const SpanModel m = span_model(op, {60, 37, uint32_t(70 + 2 * i), uint32_t(90 + i), true}, sg);
      CaseSession s;
      s.max_tokens = 60;
      for (int64_t segment : {int64_t(60), int64_t(1), int64_t(13)}) s.runs.push_back({m.ids, segment, m.want});
      if (op.kv_heads > 0) s.state_bytes = span_state_bytes(op, m.spec, 60);
      return BuiltCase{m.model, int64_t(op.heads) * op.dh, {s}};
    };
    out.push_back(c);
  }
  const std::vector<SpanOp> cpu = {{4, 8, 40, 8, {-0.5f, 0.0f, 0.33f, 1.5f}},
                                   {2, 16, 150, 32, {0.07f, 0.61f}},
                                   {3, 4, 70, 5, {0.93f, 0.41f, 0.019f}},
                                   {2, 8, 50, 0, {}},
                                   {4, 8, 150, 32, {0.07f, 0.61f, 0.93f, 0.019f}, 2},
                                   {3, 4, 70, 5, {0.93f, 0.41f, 0.019f}, 1}};
  for (size_t i = 0; i < cpu.size(); ++i) {
    OpCase c;
    c.name = spans_name(cpu[i]) + " n=230";
    c.group = "adaptive span";
    c.tags = "[attention][adaptive_span][streaming]";
    c.on = On::kCpuOnly;
    c.build = [op = cpu[i], i] {
      const int64_t n = 230;
      SpanGraph sg;
      const SpanModel m = span_model(op, {n, 97, uint32_t(50 + i), uint32_t(60 + i), false}, sg);
      CaseSession s;
      s.max_tokens = n;
      for (int64_t segment : {n, int64_t(1), int64_t(13), int64_t(64)}) s.runs.push_back({m.ids, segment, m.want});
      int64_t keys = 0;
      for (int64_t r : m.spec.reach) keys += r;
      s.state_bytes = 2ull * uint64_t(keys) * uint64_t(op.dh) * sizeof(float);  // k and v of each head's reach
      if (op.kv_heads > 0) s.state_bytes = span_state_bytes(op, m.spec, n);
      s.state_plan_tokens = {n, 100 * n};
      return BuiltCase{m.model, int64_t(op.heads) * op.dh, {s}};
    };
    out.push_back(c);
  }
}

}  // namespace

void add_attention_cases(std::vector<OpCase>& out) {
  add_device_size_patterns(out);
  add_device_long_rows(out);
  add_cpu_size_patterns(out);
  add_adaptive_spans(out);
}

}  // namespace tern::test
