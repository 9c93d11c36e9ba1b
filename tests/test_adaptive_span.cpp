// Adaptive span attention (ops/adaptive_span.h): the CPU kernel against the reference kernel, streamed in segments;
// the loader's checks; and facebookresearch/adaptive-span goldens (tools/reference/make_adaptive_span_goldens.py)
// converted and run block by block and token by token, with the planner's per-head state. The op at device sizes and
// the goldens run on each backend (Vulkan also against the CPU path).
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <random>

#include <nlohmann/json.hpp>

#include "checkpoint.h"
#include "cli.h"
#include "convert.h"
#include "npy.h"
#include "op_graph.h"
#include "ops/reference.h"
#include "test_support.h"
#include "writer.h"

using namespace tern;
using tern::test::random_floats;
using tern::test::relative_error;

using tern::test::make_session;

namespace {

constexpr double kOpTolerance = 1e-5;
constexpr double kModelTolerance = 1e-4;

// Keys a head reaches: distances d in [1, L] with clamp((1 - d + z L) / R + 1, 0, 1) > 0, i.e. d <= ceil(z L) + R.
// Written from the formula, independently of the runtime (the test spans keep z L away from integers).
int64_t expected_reach(double z, int64_t L, int64_t R) {
  return std::max<int64_t>(0, std::min<int64_t>(L, int64_t(std::ceil(z * double(L))) + R));
}

struct SpanOp {
  int heads = 4, dh = 8;
  int64_t L = 40, R = 8;
  std::vector<float> spans;  // [heads]; empty: no span weight
};

// ids -> EMBEDDING (random qkv rows) -> ATTENTION(AdaptiveSpan) -> output.
struct SpanGraph {
  test::OpGraph g;
  std::vector<float> key_pe;  // [dh, L]
  int32_t y = -1;
};

SpanGraph build_span_graph(const SpanOp& op, int64_t rows, float scale, uint32_t seed) {
  const int64_t inner = int64_t(op.heads) * op.dh;
  SpanGraph s{test::start_graph(rows, 3 * inner, seed), random_floats(size_t(op.dh * op.L), seed + 1, -1, 1), -1};
  const int32_t pe = test::add_constant(s.g, "key_pe", {op.dh, op.L}, s.key_pe);
  const int32_t span = op.spans.empty() ? -1 : test::add_constant(s.g, "span", {op.heads}, op.spans);
  s.y = s.g.graph.add_value("y", fb::DType::F32, inner).value();
  convert::params::Attention p;
  p.heads = op.heads;
  p.head_dim = op.dh;
  p.scale = scale;
  p.kind = convert::params::AdaptiveSpan{int32_t(op.L), int32_t(op.R)};
  REQUIRE(s.g.graph.add_op(fb::OpCode::ATTENTION, "attn", {s.g.x}, {s.y}, {pe, span}, p).ok());
  return s;
}

AdaptiveSpan spec_for(const SpanOp& op, const std::vector<float>& key_pe) {
  AdaptiveSpan a;
  a.heads = op.heads;
  a.head_dim = op.dh;
  a.max_span = op.L;
  a.ramp = op.R;
  a.key_pe = key_pe.data();
  a.span = op.spans.empty() ? nullptr : op.spans.data();
  for (int h = 0; h < op.heads; ++h) a.reach.push_back(op.spans.empty() ? op.L : expected_reach(op.spans[size_t(h)], op.L, op.R));
  return a;
}

// Runs ids through the session `segment` tokens per append; returns the outputs [n, width].
std::vector<float> run_segments(tern_session* s, const std::vector<int32_t>& ids, int64_t segment, int64_t width) {
  REQUIRE(tern_session_reset(s) == TERN_OK);
  const auto n = int64_t(ids.size());
  std::vector<float> out(size_t(n * width));
  for (int64_t pos = 0; pos < n; pos += segment) {
    const int64_t len = std::min(segment, n - pos);
    INFO(tern_session_last_error(s));
    REQUIRE(tern_session_append(s, ids.data() + pos, len, out.data() + pos * width) == TERN_OK);
  }
  return out;
}

}  // namespace

TEST_CASE("adaptive span op: CPU kernel matches the reference in one pass, in segments and token by token",
          "[attention][adaptive_span]") {
  // Spans: a negative z that masks every key (reach 0), z = 0 (reach R), mid values, and z > 1 (clamped to L).
  // L = 150 spans several key blocks of the kernel; the last case has no span weight (plain attention, m = 1).
  const std::vector<SpanOp> ops = {{4, 8, 40, 8, {-0.5f, 0.0f, 0.33f, 1.5f}},
                                   {2, 16, 150, 32, {0.07f, 0.61f}},
                                   {3, 4, 70, 5, {0.93f, 0.41f, 0.019f}},
                                   {2, 8, 50, 0, {}}};
  const int64_t n = 230, rows = 97;
  for (size_t c = 0; c < ops.size(); ++c) {
    const SpanOp& op = ops[c];
    const int64_t inner = int64_t(op.heads) * op.dh;
    SpanGraph sg = build_span_graph(op, rows, 0.4f, uint32_t(50 + c));
    tern_model* model = test::finish_and_load(sg.g, sg.y, "adaptive_span_op" + std::to_string(c), 0);
    std::mt19937 rng(uint32_t(60 + c));
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (auto& id : ids) id = int32_t(rng() % rows);
    std::vector<float> qkv(size_t(n * 3 * inner)), want(size_t(n * inner));
    ref::embedding(sg.g.table.data(), 3 * inner, ids.data(), n, qkv.data());
    const AdaptiveSpan spec = spec_for(op, sg.key_pe);
    ref::adaptive_span_attention(qkv.data(), 3 * inner, qkv.data() + inner, qkv.data() + 2 * inner, 3 * inner, n, 0,
                                 0.4f, spec, want.data());
    if (!op.spans.empty() && op.spans[0] < 0) {
      for (int64_t i = 0; i < n; ++i) CHECK(want[size_t(i * inner)] == 0.0f);  // a head that reaches no key is zero
    }
    for (int threads : {1, 2}) {
      tern_session* s = make_session(model, threads, n);
      for (int64_t segment : {n, int64_t(1), int64_t(13), int64_t(64)}) {
        std::vector<float> got = run_segments(s, ids, segment, inner);
        INFO("case " << c << ", threads " << threads << ", segment " << segment);
        CHECK(relative_error(got.data(), want.data(), got.size()) <= kOpTolerance);
      }
      // State: each head keeps its own reach, whatever the sequence length.
      int64_t keys = 0;
      for (int64_t r : spec.reach) keys += r;
      tern_memory_plan plan{}, far{}, allocated{};
      REQUIRE(tern_session_plan(s, n, &plan) == TERN_OK);
      REQUIRE(tern_session_plan(s, 100 * n, &far) == TERN_OK);
      REQUIRE(tern_session_memory(s, &allocated) == TERN_OK);
      const uint64_t expected = 2ull * uint64_t(keys) * uint64_t(op.dh) * sizeof(float);
      CHECK(plan.state_bytes == expected);
      CHECK(far.state_bytes == expected);
      CHECK(allocated.state_bytes == expected);
      tern_session_free(s);
    }
    tern_model_free(model);
  }
}

TEST_CASE("adaptive span op: matches the reference (and the CPU path), in one pass and streamed (CPU and Vulkan)",
          "[attention][adaptive_span][vulkan]") {
  TERN_EACH_BACKEND(backend);
  const double tolerance = test::backend_tolerance(backend, kOpTolerance);
  // A span that masks every key (reach 0), z = 0 (reach R), mid values, z > 1 (clamped to L), no span weight.
  const std::vector<SpanOp> ops = {{4, 8, 40, 8, {-0.5f, 0.0f, 0.33f, 1.5f}},
                                   {2, 16, 30, 6, {0.07f, 0.61f}},
                                   {2, 8, 20, 0, {}}};
  const int64_t n = 60, rows = 37;
  for (size_t c = 0; c < ops.size(); ++c) {
    const SpanOp& op = ops[c];
    const int64_t inner = int64_t(op.heads) * op.dh;
    SpanGraph sg = build_span_graph(op, rows, 0.4f, uint32_t(70 + 2 * c));
    tern_model* model = test::finish_and_load(sg.g, sg.y, "backend_adaptive_span" + std::to_string(c), n);
    const std::vector<int32_t> ids = test::random_ids(n, rows, uint32_t(90 + c));
    std::vector<float> qkv(size_t(n * 3 * inner)), want(size_t(n * inner));
    ref::embedding(sg.g.table.data(), 3 * inner, ids.data(), n, qkv.data());
    ref::adaptive_span_attention(qkv.data(), 3 * inner, qkv.data() + inner, qkv.data() + 2 * inner, 3 * inner, n, 0,
                                 0.4f, spec_for(op, sg.key_pe), want.data());
    tern_session* s = test::make_session_on(backend, model, backend == TERN_BACKEND_CPU ? 2 : 1, n);
    tern_session* cpu = test::make_session_on(TERN_BACKEND_CPU, model, 2, n);
    const std::vector<float> base = run_segments(cpu, ids, n, inner);
    for (int64_t segment : {n, int64_t(1), int64_t(13)}) {
      const std::vector<float> got = run_segments(s, ids, segment, inner);
      const double vs_ref = relative_error(got.data(), want.data(), got.size());
      const double vs_cpu = relative_error(got.data(), base.data(), got.size());
      INFO("case " << c << ", segment " << segment << ": vs reference " << vs_ref << ", vs CPU " << vs_cpu << "; "
                   << tern_session_last_error(s));
      CHECK(vs_ref <= tolerance);
      if (backend == TERN_BACKEND_VULKAN) CHECK(vs_cpu <= tolerance);
    }
    test::check_state_matches(s, cpu);
    tern_session_free(s);
    tern_session_free(cpu);
    tern_model_free(model);
  }
  if (backend == TERN_BACKEND_VULKAN) CHECK(test::vulkan_validation_messages() == 0);
}

TEST_CASE("adaptive span op: the loader checks its weights and params", "[attention][adaptive_span]") {
  struct Case {
    std::string what;
    std::vector<int64_t> pe_shape, span_shape;  // empty span_shape: no span weight
    std::vector<float> spans;
    int32_t ramp;
    convert::params::AttentionKind kind;
    std::string message;
  };
  const SpanOp op;  // 4 heads, dh 8, L 40, R 8
  const std::vector<Case> cases = {
      {"key_pe shape", {8, 39}, {4}, {0, 0, 0, 0}, 8, convert::params::AdaptiveSpan{40, 8}, "has shape [8, 39], expected [8, 40]"},
      {"span shape", {8, 40}, {3}, {0, 0, 0}, 8, convert::params::AdaptiveSpan{40, 8}, "has shape [3], expected [4]"},
      {"ramp", {8, 40}, {4}, {0, 0, 0, 0}, 0, convert::params::AdaptiveSpan{40, 0}, "ramp 0 must be in [1, 2^31]"},
      {"max_span", {8, 40}, {4}, {0, 0, 0, 0}, 8, convert::params::AdaptiveSpan{0, 8}, "max_span 0 must be in [1, 2^31]"},
      {"finite span", {8, 40}, {4}, {0, NAN, 0, 0}, 8, convert::params::AdaptiveSpan{40, 8}, "span of head 1 is not finite"},
      {"weights on another kind", {8, 40}, {}, {}, 8, convert::params::SlidingWindow{5}, "only kinds AdaptiveSpan and RelativeXL have weights"},
  };
  for (const Case& c : cases) {
    test::OpGraph g = test::start_graph(10, 3 * 32, 5);
    const int32_t pe = test::add_constant(g, "key_pe", c.pe_shape, random_floats(size_t(c.pe_shape[0] * c.pe_shape[1]), 6));
    const int32_t span = c.span_shape.empty() ? -1 : test::add_constant(g, "span", c.span_shape, c.spans);
    const int32_t y = g.graph.add_value("y", fb::DType::F32, 32).value();
    convert::params::Attention p{op.heads, op.dh, 0.35f, true, c.kind};
    REQUIRE(g.graph.add_op(fb::OpCode::ATTENTION, "attn", {g.x}, {y}, {pe, span}, p).ok());
    INFO(c.what);
    test::expect_load_rejected(g, y, "adaptive_span_bad", c.message);
  }
}

namespace {

struct SpanGolden {
  std::string dir;
  nlohmann::json config;
  std::vector<int32_t> ids;
  npy::Array logits;  // [n, vocab], log-probabilities
  tern_model* model = nullptr;
};

SpanGolden load_span_golden(const std::string& name) {
  SpanGolden g;
  g.dir = test::source_path("tests/goldens/" + name);
  std::string error;
  INFO(name << ": " << error);
  REQUIRE(cli::read_ids_json(g.dir + "/ids.json", &g.ids, &error));
  REQUIRE(npy::read_f32(g.dir + "/logits.npy", &g.logits, &error));
  g.config = nlohmann::json::parse(test::read_file(g.dir + "/config.json"));
  REQUIRE(g.logits.shape == std::vector<int64_t>{int64_t(g.ids.size()), g.config["vocab_size"].get<int64_t>()});
  const std::string out = test::scratch_dir("golden_" + name) + "/model.tern";
  Status st = convert::convert_checkpoint(g.dir, out, {true});
  INFO(st.message());
  REQUIRE(st.ok());
  REQUIRE(tern_model_load(out.c_str(), &g.model) == TERN_OK);
  return g;
}

// Per layer and head, the keys the state keeps: the reach from each head's learned z (or attn_span without spans).
std::vector<int64_t> golden_reach(const SpanGolden& g) {
  const auto& mp = g.config["model_params"];
  const auto& ap = g.config["adapt_span_params"];
  const int64_t layers = mp["nb_layers"], heads = mp["nb_heads"], L = mp["attn_span"];
  auto checkpoint = convert::Checkpoint::open(g.dir);
  REQUIRE(checkpoint.ok());
  const std::string prefix = checkpoint.value()->find("module.in_emb.weight") ? "module." : "";
  std::vector<int64_t> reach;
  for (int64_t l = 0; l < layers; ++l) {
    if (!ap["adapt_span_enabled"].get<bool>()) {
      reach.insert(reach.end(), size_t(heads), L);
      continue;
    }
    const auto* z = checkpoint.value()->find(prefix + "layers." + std::to_string(l) + ".attn.attn.adaptive_span._mask.current_val");
    REQUIRE(z != nullptr);
    std::vector<float> values(static_cast<size_t>(heads));
    REQUIRE(convert::to_f32(*z, values.data()).ok());
    for (float v : values) reach.push_back(expected_reach(v, L, ap["adapt_span_ramp"].get<int64_t>()));
  }
  return reach;
}

const char* const kSpanGoldens[] = {"adaptive_span_learned", "adaptive_span_fixed_span", "adaptive_span_long_block"};

}  // namespace

TEST_CASE("adaptive-span goldens: block by block and token by token match the reference codebase's evaluation (CPU and Vulkan)",
          "[model][adaptive_span][vulkan]") {
  TERN_EACH_BACKEND(backend);
  for (const char* name : kSpanGoldens) {
    SpanGolden g = load_span_golden(name);
    const int64_t n = int64_t(g.ids.size()), vocab = g.logits.shape[1];
    const int64_t block = g.config["model_params"]["block_size"];
    if (backend == TERN_BACKEND_VULKAN) {
      tern_session* s = test::make_session_on(backend, g.model, 1, n);
      tern_session* cpu = make_session(g.model, 2, n);
      for (int64_t segment : {block, int64_t(1)}) {
        const std::vector<float> got = run_segments(s, g.ids, segment, vocab);
        const double err = relative_error(got.data(), g.logits.data.data(), got.size());
        INFO(name << ", segment " << segment << ": relative error " << err << "; " << tern_session_last_error(s));
        CHECK(err <= kModelTolerance);
      }
      test::check_state_matches(s, cpu);
      tern_session_free(s);
      tern_session_free(cpu);
    }
    for (int threads : {1, 2}) {
      if (backend != TERN_BACKEND_CPU) break;
      tern_session* s = make_session(g.model, threads, n);
      REQUIRE(tern_session_vocab_size(s) == vocab);
      for (int64_t segment : {block, int64_t(1), n}) {
        if (threads == 1 && segment != block) continue;  // one thread: the evaluation's own blocks only
        std::vector<float> got = run_segments(s, g.ids, segment, vocab);
        const double err = relative_error(got.data(), g.logits.data.data(), got.size());
        INFO(name << ", threads " << threads << ", segment " << segment << ": relative error " << err);
        CHECK(err <= kModelTolerance);
      }
      tern_session_free(s);
    }
    tern_model_free(g.model);
  }
  if (backend == TERN_BACKEND_VULKAN) CHECK(test::vulkan_validation_messages() == 0);
}

TEST_CASE("adaptive-span goldens: each head's state is its own reach", "[model][adaptive_span][streaming]") {
  for (const char* name : kSpanGoldens) {
    SpanGolden g = load_span_golden(name);
    const int64_t n = int64_t(g.ids.size());
    const int64_t dh = g.config["model_params"]["hidden_size"].get<int64_t>() / g.config["model_params"]["nb_heads"].get<int64_t>();
    const std::vector<int64_t> reach = golden_reach(g);
    auto bytes_after = [&](int64_t tokens) {
      uint64_t keys = 0;
      for (int64_t r : reach) keys += uint64_t(std::min(r, tokens));
      return 2ull * keys * uint64_t(dh) * sizeof(float);
    };
    tern_session* s = make_session(g.model, 2, n);
    tern_memory_plan early{}, at_n{}, far{}, allocated{};
    REQUIRE(tern_session_plan(s, 20, &early) == TERN_OK);
    REQUIRE(tern_session_plan(s, n, &at_n) == TERN_OK);
    REQUIRE(tern_session_plan(s, 1000 * n, &far) == TERN_OK);
    REQUIRE(tern_session_memory(s, &allocated) == TERN_OK);
    INFO(name);
    CHECK(early.state_bytes == bytes_after(20));
    CHECK(at_n.state_bytes == bytes_after(n));
    CHECK(far.state_bytes == at_n.state_bytes);  // every reach is full: the state no longer grows
    CHECK(allocated.state_bytes == bytes_after(n));
    tern_session_free(s);
    tern_model_free(g.model);
  }
}
