// SPDX-License-Identifier: MIT
// The Vulkan generation path's fusions (runtime/src/vulkan/fusion.h): in calls of up to 8 rows a LINEAR's
// matrix-vector dispatch applies the norm before it and the activation and residual add after it. Each case runs
// the same model fused, unfused (TERN_VULKAN_NO_FUSION=1) and on the CPU, in one-token and few-token appends (the
// fused tiers) and in a forward of more rows (the GEMM, never fused), and counts the dispatches a call makes.
#include <catch2/catch.hpp>
#include <algorithm>
#include <string>
#include <vector>

#include "attention_cases.h"
#include "op_graph.h"
#include "test_support.h"

using namespace tern;

namespace {

constexpr int64_t kRows = 40;  // the embedding's table: the ids' range

std::vector<float> random_row(int64_t n, uint32_t seed, float lo, float hi) {
  return test::random_floats(size_t(n), seed, lo, hi);
}

int32_t linear(test::OpGraph& g, const std::string& name, int32_t x, int64_t in, int64_t out, bool bias, uint32_t seed) {
  const int32_t w = test::add_constant(g, name + ".w", {out, in}, random_row(out * in, seed, -0.2f, 0.2f));
  const int32_t b = bias ? test::add_constant(g, name + ".b", {out}, random_row(out, seed + 1, -0.5f, 0.5f)) : -1;
  const int32_t y = g.graph.add_value(name, fb::DType::F32, out).value();
  REQUIRE(g.graph.add_op(fb::OpCode::LINEAR, name, {x}, {y}, {w, b}, fb::LinearParamsT{}).ok());
  return y;
}

int32_t activation(test::OpGraph& g, const std::string& name, int32_t x, int64_t d, fb::ActivationKind kind,
                   float cap = 0.0f) {
  const int32_t y = g.graph.add_value(name, fb::DType::F32, d).value();
  fb::ActivationParamsT p;
  p.kind = kind;
  p.cap = cap;
  REQUIRE(g.graph.add_op(fb::OpCode::ACTIVATION, name, {x}, {y}, {}, p).ok());
  return y;
}

int32_t add(test::OpGraph& g, const std::string& name, int32_t a, int32_t b, int64_t d) {
  const int32_t y = g.graph.add_value(name, fb::DType::F32, d).value();
  REQUIRE(g.graph.add_op(fb::OpCode::ADD, name, {a, b}, {y}, {}, fb::AddParamsT{}).ok());
  return y;
}

int32_t layer_norm(test::OpGraph& g, const std::string& name, int32_t x, int64_t d, bool beta, uint32_t seed) {
  const int32_t gt = test::add_constant(g, name + ".g", {d}, random_row(d, seed, 0.5f, 1.5f));
  const int32_t bt = beta ? test::add_constant(g, name + ".b", {d}, random_row(d, seed + 1, -0.5f, 0.5f)) : -1;
  const int32_t y = g.graph.add_value(name, fb::DType::F32, d).value();
  REQUIRE(g.graph.add_op(fb::OpCode::LAYER_NORM, name, {x}, {y}, {gt, bt}, fb::LayerNormParamsT{{}, 1e-5f}).ok());
  return y;
}

int32_t rms_norm(test::OpGraph& g, const std::string& name, int32_t x, int64_t d, float offset, uint32_t seed) {
  const int32_t w = test::add_constant(g, name + ".g", {d}, random_row(d, seed, -0.5f, 0.5f));
  const int32_t y = g.graph.add_value(name, fb::DType::F32, d).value();
  fb::RmsNormParamsT p;
  p.eps = 1e-5f;
  p.weight_offset = offset;
  REQUIRE(g.graph.add_op(fb::OpCode::RMS_NORM, name, {x}, {y}, {w}, p).ok());
  return y;
}

// Runs ids on Vulkan fused and unfused and on the CPU: appends of `segment` tokens, or one forward (segment 0).
void check_paths(tern_model* model, const std::vector<int32_t>& ids, int64_t width, int64_t segment) {
  INFO("segment " << segment << " (0: one forward of " << ids.size() << " rows)");
  const std::vector<float> cpu = test::run_on(TERN_BACKEND_CPU, model, ids, width, segment);
  const std::vector<float> fused = test::run_on(TERN_BACKEND_VULKAN, model, ids, width, segment, 1);
  std::vector<float> unfused;
  {
    test::EnvOverride off("TERN_VULKAN_NO_FUSION", "1");
    unfused = test::run_on(TERN_BACKEND_VULKAN, model, ids, width, segment, 1);
  }
  const double vs_cpu = test::relative_error(fused.data(), cpu.data(), cpu.size());
  const double vs_unfused = test::relative_error(fused.data(), unfused.data(), unfused.size());
  INFO("fused vs CPU " << vs_cpu << ", vs unfused " << vs_unfused);
  CHECK(vs_cpu < 2e-5);
  CHECK(vs_unfused < 2e-5);
}

// Dispatches of a call of n rows after `position` on a fused and an unfused session of the model.
struct Counts {
  uint64_t fused = 0, unfused = 0;
  std::vector<uint64_t> fused_ops, unfused_ops;
};
Counts counts(tern_model* model, int64_t n, int64_t position, int64_t max_tokens, int64_t max_batch) {
  Counts c;
  tern_session* s = test::make_session_on(TERN_BACKEND_VULKAN, model, 1, max_tokens, max_batch);
  const test::DispatchCounts fused = test::dispatch_counts(s, n, position);
  tern_session_free(s);
  test::EnvOverride off("TERN_VULKAN_NO_FUSION", "1");
  s = test::make_session_on(TERN_BACKEND_VULKAN, model, 1, max_tokens, max_batch);
  const test::DispatchCounts unfused = test::dispatch_counts(s, n, position);
  tern_session_free(s);
  c.fused = fused.total;
  c.fused_ops = fused.per_op;
  c.unfused = unfused.total;
  c.unfused_ops = unfused.per_op;
  return c;
}

}  // namespace

TEST_CASE("vulkan fusion: a pre-norm block's norm, bias, activation and residual run inside its projections",
          "[vulkan]") {
  TERN_SKIP_WITHOUT_VULKAN();
  // x -> LAYER_NORM -> LINEAR(bias) -> GELU -> LINEAR(bias) -> ADD(x) -> RMS_NORM(1 + gain) -> three LINEARs on the
  // same input (one prologue, three readers) -> ADD, ADD (not fused: not next to their inputs' LINEARs) -> LINEAR ->
  // SOFTCAP (the model's output). Widths not multiples of the 16-byte units (unaligned loads) in the first half.
  const int64_t d = 36, ff = 70, n = 12;
  test::OpGraph g = test::start_graph(kRows, d, 41);
  const int32_t ln = layer_norm(g, "ln", g.x, d, true, 42);
  const int32_t up = linear(g, "up", ln, d, ff, true, 44);
  const int32_t act = activation(g, "act", up, ff, fb::ActivationKind::GELU_ERF);
  const int32_t down = linear(g, "down", act, ff, d, true, 46);
  const int32_t h = add(g, "resid", g.x, down, d);
  const int32_t rms = rms_norm(g, "rms", h, d, 1.0f, 48);
  const int32_t q = linear(g, "q", rms, d, 32, false, 50);
  const int32_t k = linear(g, "k", rms, d, 32, true, 52);
  const int32_t v = linear(g, "v", rms, d, 32, false, 54);
  const int32_t qk = add(g, "qk", q, k, 32);
  const int32_t qkv = add(g, "qkv", qk, v, 32);
  const int32_t logits = linear(g, "head", qkv, 32, kRows, true, 56);
  const int32_t capped = activation(g, "cap", logits, kRows, fb::ActivationKind::SOFTCAP, 3.0f);
  tern_model* model = test::finish_and_load(g, capped, "vk_fusion_block", n);
  const std::vector<int32_t> ids = test::random_ids(n, kRows, 57);

  for (int64_t segment : {1, 3, 8, 0}) check_paths(model, ids, kRows, segment);

  // The ops fused for one row (ln, act, resid, rms, cap) dispatch nothing then; a call of more than 8 rows runs
  // every op. Op order: embed, ln, up, act, down, resid, rms, q, k, v, qk, qkv, head, cap.
  const Counts one = counts(model, 1, 4, n, n);
  CHECK(one.fused == one.unfused - 5);
  const std::vector<size_t> skipped = {1, 3, 5, 6, 13};
  for (size_t op = 0; op < one.fused_ops.size(); ++op) {
    INFO("op " << op);
    const bool fused_away = std::find(skipped.begin(), skipped.end(), op) != skipped.end();
    CHECK(one.fused_ops[op] == (fused_away ? 0u : one.unfused_ops[op]));
  }
  const Counts many = counts(model, n, 0, n, n);
  CHECK(many.fused == many.unfused);
  CHECK(many.fused_ops == many.unfused_ops);
  CHECK(test::vulkan_validation_messages() == 0);  // with TERN_VULKAN_VALIDATION=1: the layer reported nothing
  tern_model_free(model);
}

TEST_CASE("vulkan fusion: an op another op also reads, or that runs apart from its LINEAR, stays its own dispatch",
          "[vulkan]") {
  TERN_SKIP_WITHOUT_VULKAN();
  // LAYER_NORM read by a LINEAR and by an ADD; a LINEAR's output read by its ACTIVATION and an ADD; a RMS_NORM whose
  // LINEAR comes after another op. Nothing fuses but the last LINEAR's residual ADD.
  const int64_t d = 32, n = 10;
  test::OpGraph g = test::start_graph(kRows, d, 61);
  const int32_t ln = layer_norm(g, "ln", g.x, d, false, 62);
  const int32_t a = linear(g, "a", ln, d, d, true, 64);
  const int32_t a_act = activation(g, "a_act", a, d, fb::ActivationKind::SILU);
  const int32_t both = add(g, "both", a_act, a, d);
  const int32_t mixed = add(g, "mixed", both, ln, d);
  const int32_t rms = rms_norm(g, "rms", mixed, d, 0.0f, 66);
  const int32_t relu = activation(g, "relu", mixed, d, fb::ActivationKind::RELU);
  const int32_t b = linear(g, "b", rms, d, d, false, 68);
  const int32_t out = add(g, "out", relu, b, d);
  tern_model* model = test::finish_and_load(g, out, "vk_fusion_kept", n);
  const std::vector<int32_t> ids = test::random_ids(n, kRows, 69);

  for (int64_t segment : {1, 4, 0}) check_paths(model, ids, d, segment);

  const Counts one = counts(model, 1, 3, n, n);
  CHECK(one.fused == one.unfused - 1);  // out: b's residual
  // Op order: embed, ln, a, a_act, both, mixed, rms, relu, b, out.
  REQUIRE(one.fused_ops.size() == 10);
  for (size_t op : {1, 3, 6}) CHECK(one.fused_ops[op] >= 1);
  CHECK(one.fused_ops[9] == 0);
  CHECK(test::vulkan_validation_messages() == 0);
  tern_model_free(model);
}

TEST_CASE("vulkan fusion: dense attention appends its keys and values in the matrix-vector dispatch, a window does not",
          "[vulkan]") {
  TERN_SKIP_WITHOUT_VULKAN();
  // Index 0: dense (every key at its own slot: appended by attention_rows.comp); index 2: sliding window w = 5 (a
  // ring: kv_append.comp after the call). Appends of 1 and 3 tokens read back what earlier appends stored.
  const int64_t n = 20;
  for (size_t index : {size_t(0), size_t(2)}) {
    const test::AttentionKind kind = test::backend_attention_kinds()[index];
    INFO(kind.name);
    test::AttentionModel m = test::attention_model(kind, 2, 8, n, "vk_fusion_attention");
    for (int64_t segment : {1, 3}) check_paths(m.model, m.ids, 2 * 8, segment);
    const Counts one = counts(m.model, 1, 7, n, 4);
    REQUIRE(one.fused_ops.size() == 2);  // the embedding, the attention
    CHECK(one.fused_ops[1] == one.unfused_ops[1] - (index == 0 ? 1u : 0u));
    const Counts many = counts(m.model, 4, 7, n, 4);
    CHECK(many.fused_ops[1] == many.unfused_ops[1] - (index == 0 ? 1u : 0u));  // up to 8 rows
    tern_model_free(m.model);
  }
  CHECK(test::vulkan_validation_messages() == 0);
}
