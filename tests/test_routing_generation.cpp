// SPDX-License-Identifier: MIT
// Continuing a sequence through routing layers (ops/routing.h, "Continuing a sequence"): each step against the
// goldens of tools/reference/routing_steps.py (the prefix recomputed by brute force each step), the cache as the
// planner's state, saved and restored, a forged cache refused, none kept by a forward_only session, and Vulkan's
// refusal by name.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "generation_golden.h"
#include "op_graph.h"
#include "test_support.h"

using namespace tern;
using tern::test::make_session;
using tern::test::relative_error;

namespace {

constexpr double kModelTolerance = 1e-4;

tern_model* load_golden_model(const std::string& name) {
  const std::string path = test::convert_golden(name, "routing_gen_" + name);
  REQUIRE(!path.empty());
  tern_model* model = nullptr;
  REQUIRE(tern_model_load(path.c_str(), &model) == TERN_OK);
  return model;
}

}  // namespace

TEST_CASE("routing generation: each step matches the prefix recomputed in PyTorch within 1e-4 on the CPU",
          "[model][routing][streaming]") {
  for (const char* name : {"routing_only", "routing_mixed", "groups_routing_sliding"}) {
    const test::Generation gen = test::load_generation(test::source_path(std::string("tests/goldens/") + name));
    tern_model* model = load_golden_model(name);
    test::check_generation(model, gen, name, kModelTolerance);
    tern_model_free(model);
  }
}

TEST_CASE("routing generation: the cache is the planner's state, bounded by the window, and a forged one is refused",
          "[model][routing][streaming]") {
  // routing_only: 2 layers of 4 routing heads, 6 clusters of window 48, dh 16, no local heads.
  tern_model* model = load_golden_model("routing_only");
  const nlohmann::json config =
      nlohmann::json::parse(test::read_file(test::source_path("tests/goldens/routing_only/config.json")));
  const int64_t layers = config["num_layers"], heads = config["num_heads"];
  const int64_t dh = int64_t(config["hidden_size"]) / heads;
  const int64_t clusters = config["attention"]["clusters"], window = config["attention"]["window"];
  for (int64_t n : {int64_t(20), int64_t(148), int64_t(512)}) {
    tern_session* s = make_session(model, 1, n);
    tern_memory_plan plan{}, used{};
    REQUIRE(tern_session_plan(s, n, &plan) == TERN_OK);
    REQUIRE(tern_session_memory(s, &used) == TERN_OK);
    // Per cluster min(window, n) slots of a key position, a key score, a key, a value and a query score.
    const uint64_t want = uint64_t(layers * heads * clusters * std::min(window, n) * (2 * dh + 3) * 4);
    INFO("max_tokens " << n);
    CHECK(plan.state_bytes == want);
    CHECK(used.state_bytes == want);
    tern_session_free(s);
  }

  const test::Generation gen = test::load_generation(test::source_path("tests/goldens/routing_only"));
  const int64_t n = int64_t(gen.ids.size()), vocab = gen.logits.shape[1];
  tern_session* s = make_session(model, 1, n);
  std::vector<float> out(size_t(n * vocab));
  REQUIRE(tern_session_forward(s, gen.ids.data(), gen.prompt, out.data()) == TERN_OK);
  std::vector<uint8_t> blob = test::saved_state(s);
  // The payload (after the 48-byte header and one 16-byte entry per layer) starts with the first layer's key
  // positions: slot 0 of cluster 0 holds a prompt position. Point it past the sequence.
  const size_t first = 48 + size_t(layers) * 16;
  int32_t slot0 = -2;
  std::memcpy(&slot0, blob.data() + first, 4);
  REQUIRE(slot0 >= 0);
  REQUIRE(slot0 < gen.prompt);
  const int32_t bad = int32_t(gen.prompt);
  std::memcpy(blob.data() + first, &bad, 4);
  test::reseal_state(&blob);
  tern_session* other = make_session(model, 1, n);
  CHECK(tern_session_load_state(other, blob.data(), blob.size()) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_session_last_error(other)), Catch::Contains("saved routing key position 100"));
  tern_session_free(other);
  tern_session_free(s);

  test::check_forward_only(model, gen, out);
  tern_model_free(model);
}

TEST_CASE("routing generation: Vulkan runs whole sequences and refuses, at creation and by name, a session that may "
          "continue one",
          "[routing][vulkan]") {
  TERN_SKIP_WITHOUT_VULKAN();
  tern_model* model = load_golden_model("routing_mixed");
  const test::Generation gen = test::load_generation(test::source_path("tests/goldens/routing_mixed"));
  const int64_t n = int64_t(gen.ids.size()), vocab = gen.logits.shape[1];
  CHECK(test::refused_session_on(TERN_BACKEND_VULKAN, model, n) == TERN_UNSUPPORTED);
  CHECK_THAT(std::string(tern_last_error()), Catch::Contains("Routing attention runs on the CPU backend only") &&
                                                 Catch::Contains("forward_only") && Catch::Contains("--backend cpu"));
  tern_session* s = test::make_forward_session_on(TERN_BACKEND_VULKAN, model, 1, n);
  std::vector<float> out(size_t(n * vocab));
  REQUIRE(tern_session_forward(s, gen.ids.data(), gen.prompt, out.data()) == TERN_OK);
  CHECK(relative_error(out.data() + (gen.prompt - 1) * vocab, gen.logits.data.data(), size_t(vocab)) <= kModelTolerance);
  tern_session_free(s);
  tern_model_free(model);
}
