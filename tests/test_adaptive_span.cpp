// SPDX-License-Identifier: MIT
// Adaptive span attention (ops/adaptive_span.h): the reference kernel's zero for a head that reaches no key, the
// loader's checks, and facebookresearch/adaptive-span goldens (tools/reference/make_adaptive_span_goldens.py)
// converted and run block by block and token by token (on each backend, Vulkan also against the CPU path), with the
// planner's per-head state. The op against the reference, in one pass and streamed, with each head's reach as its
// state, is a case of the op case table (support/op_cases.h, test_backend_ops), on every backend.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <random>

#include <nlohmann/json.hpp>

#include "checkpoint.h"
#include "cli.h"
#include "convert.h"
#include "npy.h"
#include "kind_graphs.h"
#include "op_graph.h"
#include "ops/reference.h"
#include "test_support.h"
#include "writer.h"

using namespace tern;
using tern::test::random_floats;
using tern::test::relative_error;

using tern::test::make_session;

using tern::test::expected_span_reach;
using tern::test::SpanOp;

namespace {

constexpr double kModelTolerance = 1e-4;

}  // namespace

TEST_CASE("adaptive span reference: a head whose span reaches no key outputs zeros", "[attention][adaptive_span]") {
  // z = -0.5 masks every key of head 0 (reach 0); the other heads (z 0, 0.33, 1.5) reach R, part of L and all of L.
  const SpanOp op{4, 8, 40, 8, {-0.5f, 0.0f, 0.33f, 1.5f}};
  const int64_t n = 230, inner = int64_t(op.heads) * op.dh;
  const std::vector<float> key_pe = random_floats(size_t(op.dh * op.L), 51, -1, 1);
  const std::vector<float> qkv = random_floats(size_t(n * 3 * inner), 52, -1, 1);
  const AdaptiveSpan spec = tern::test::span_spec(op, key_pe);
  REQUIRE(spec.reach == std::vector<int64_t>{0, 8, 22, 40});
  std::vector<float> out(size_t(n * inner));
  ref::adaptive_span_attention(qkv.data(), 3 * inner, qkv.data() + inner, qkv.data() + 2 * inner, 3 * inner, n, 0, 0.4f,
                               spec, out.data());
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t e = 0; e < inner; ++e) {
      INFO("query " << i << ", column " << e);
      if (e < op.dh) {
        REQUIRE(out[size_t(i * inner + e)] == 0.0f);
      } else if (i > 0) {
        REQUIRE(out[size_t(i * inner + e)] != 0.0f);
      }
    }
  }
}
TEST_CASE("adaptive span op: the loader checks its weights and params", "[attention][adaptive_span]") {
  struct Case {
    std::string what;
    std::vector<int64_t> pe_shape, span_shape;  // empty span_shape: no span weight
    std::vector<float> spans;
    int32_t ramp;
    convert::AttentionKind kind;
    std::string message;
  };
  const SpanOp op;  // 4 heads, dh 8, L 40, R 8
  const std::vector<Case> cases = {
      {"key_pe shape", {8, 39}, {4}, {0, 0, 0, 0}, 8, fb::AdaptiveSpanT{{}, 40, 8}, "has shape [8, 39], expected [8, 40]"},
      {"span shape", {8, 40}, {3}, {0, 0, 0}, 8, fb::AdaptiveSpanT{{}, 40, 8}, "has shape [3], expected [4]"},
      {"ramp", {8, 40}, {4}, {0, 0, 0, 0}, 0, fb::AdaptiveSpanT{{}, 40, 0}, "ramp 0 must be in [1, 2^31]"},
      {"max_span", {8, 40}, {4}, {0, 0, 0, 0}, 8, fb::AdaptiveSpanT{{}, 0, 8}, "max_span 0 must be in [1, 2^31]"},
      {"finite span", {8, 40}, {4}, {0, NAN, 0, 0}, 8, fb::AdaptiveSpanT{{}, 40, 8}, "span of head 1 is not finite"},
      {"weights on another kind", {8, 40}, {}, {}, 8, fb::SlidingWindowT{{}, 5}, "only kinds AdaptiveSpan and RelativeXL have weights"},
  };
  for (const Case& c : cases) {
    test::OpGraph g = test::start_graph(10, 3 * 32, 5);
    const int32_t pe = test::add_constant(g, "key_pe", c.pe_shape, random_floats(size_t(c.pe_shape[0] * c.pe_shape[1]), 6));
    const int32_t span = c.span_shape.empty() ? -1 : test::add_constant(g, "span", c.span_shape, c.spans);
    const int32_t y = g.graph.add_value("y", fb::DType::F32, 32).value();
    const fb::AttentionParamsT p = convert::attention_params(op.heads, op.dh, 0.35f, c.kind);
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
    for (float v : values) reach.push_back(expected_span_reach(v, L, ap["adapt_span_ramp"].get<int64_t>()));
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
        const std::vector<float> got = test::run_ids(s, g.ids, vocab, segment);
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
        std::vector<float> got = test::run_ids(s, g.ids, vocab, segment);
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
