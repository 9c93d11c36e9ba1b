// SPDX-License-Identifier: MIT
// Compressive memory (ops/compressive.h; reference family kind "compressive"): the goldens of
// tools/reference/make_compressive_goldens.py streamed segment by segment (on each backend: on Vulkan with both
// memories on the device), and a state that stops growing once both memories are full. The op against the reference
// kernel segment after segment, with its state, is a case of the op case table (support/op_cases.h,
// test_backend_ops), on every backend.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "convert.h"
#include "npy.h"
#include "op_graph.h"
#include "test_support.h"

using namespace tern;
using tern::test::relative_error;

using tern::test::make_session;

namespace {

struct CompGolden {
  nlohmann::json config;
  std::vector<int32_t> ids;
  npy::Array logits;
  tern_model* model = nullptr;
  int64_t segment() const { return config["segment_length"].get<int64_t>(); }
};

CompGolden load_golden(const std::string& name) {
  const std::string dir = test::source_path("tests/goldens/" + name);
  CompGolden g;
  std::string error;
  INFO(name << ": " << error);
  REQUIRE(cli::read_ids_json(dir + "/ids.json", &g.ids, &error));
  REQUIRE(npy::read_f32(dir + "/logits.npy", &g.logits, &error));
  g.config = nlohmann::json::parse(test::read_file(dir + "/config.json"));
  REQUIRE(int64_t(g.ids.size()) >= 5 * g.segment());  // compression happens several times
  const std::string out = test::scratch_dir("golden_" + name) + "/model.tern";
  convert::ConvertOptions o;
  o.quiet = true;
  Status st = convert::convert_checkpoint(dir, out, o);
  INFO(st.message());
  REQUIRE(st.ok());
  REQUIRE(tern_model_load(out.c_str(), &g.model) == TERN_OK);
  return g;
}

const char* const kGoldens[] = {"compressive_conv_mean", "compressive_max_conv_post"};

}  // namespace

TEST_CASE("compressive goldens: segment by segment with both memories matches model.py (CPU and Vulkan)", "[model][compressive][vulkan]") {
  TERN_EACH_BACKEND(backend);
  for (const char* name : kGoldens) {
    CompGolden g = load_golden(name);
    const int64_t n = int64_t(g.ids.size()), V = g.logits.shape[1], T = g.segment();
    if (backend == TERN_BACKEND_VULKAN) {
      // Both memories on the device.
      uint64_t full = 0;
      for (const auto& a : g.config["attention"]) {
        full += uint64_t(a["mem_len"].get<int64_t>() + a["rate"].get<int64_t>() - 1 + a["cmem_len"].get<int64_t>()) *
                uint64_t(g.config["hidden_size"].get<int64_t>()) * sizeof(float);
      }
      tern_session* s = test::make_session_on(backend, g.model, 1, n, T);
      for (int pass = 0; pass < 2; ++pass) {
        const std::vector<float> got = test::run_ids(s, g.ids, V, T);
        for (int64_t pos = 0; pos < n; pos += T) {
          const size_t off = size_t(pos * V), count = size_t(std::min(T, n - pos) * V);
          const double err = relative_error(got.data() + off, g.logits.data.data() + off, count);
          INFO(name << ", pass " << pass << ", segment at " << pos << ": relative error " << err);
          CHECK(err <= 1e-4);
        }
        const double err = relative_error(got.data(), g.logits.data.data(), got.size());
        INFO(name << ": relative error " << err);
        CHECK(err <= 1e-4);
      }
      tern_memory_plan allocated{}, far{};
      REQUIRE(tern_session_memory(s, &allocated) == TERN_OK);
      REQUIRE(tern_session_plan(s, 1000 * T, &far) == TERN_OK);
      CHECK(allocated.state_bytes == full);
      CHECK(far.state_bytes == full);
      tern_session_free(s);
    }
    for (int threads : {1, 2}) {
      if (backend != TERN_BACKEND_CPU) break;
      tern_session* s = make_session(g.model, threads, n, T);
      std::vector<float> got(size_t(n * V));
      for (int64_t pos = 0; pos < n; pos += T) {
        const int64_t len = std::min(T, n - pos);
        INFO(tern_session_last_error(s));
        REQUIRE(tern_session_append(s, g.ids.data() + pos, len, got.data() + pos * V) == TERN_OK);
        const double seg_err = relative_error(got.data() + pos * V, g.logits.data.data() + pos * V, size_t(len * V));
        INFO(name << ", threads " << threads << ", segment at " << pos << ": relative error " << seg_err);
        CHECK(seg_err <= 1e-4);
      }
      const double err = relative_error(got.data(), g.logits.data.data(), got.size());
      INFO(name << ", threads " << threads << ": relative error " << err);
      CHECK(err <= 1e-4);
      tern_session_free(s);
    }
    tern_model_free(g.model);
  }
  if (backend == TERN_BACKEND_VULKAN) CHECK(test::vulkan_validation_messages() == 0);
}

TEST_CASE("compressive state: constant once the memories are full, after 2 segments or 1,000", "[model][compressive][streaming]") {
  for (const char* name : kGoldens) {
    CompGolden g = load_golden(name);
    const int64_t T = g.segment(), V = g.logits.shape[1];
    uint64_t full = 0;
    for (const auto& a : g.config["attention"]) {
      full += uint64_t(a["mem_len"].get<int64_t>() + a["rate"].get<int64_t>() - 1 + a["cmem_len"].get<int64_t>()) *
              uint64_t(g.config["hidden_size"].get<int64_t>()) * sizeof(float);
    }
    const int64_t segments = 1000;
    // Learned positions end at max_position_embeddings; sinusoidal ones go on.
    const bool learned = g.config.value("position_embedding", std::string("learned")) == "learned";
    const int64_t positions = learned ? g.config["max_position_embeddings"].get<int64_t>() : segments * T;
    tern_session* s = make_session(g.model, 2, std::min(segments * T, positions), T);
    tern_memory_plan allocated{}, later{}, far{};
    REQUIRE(tern_session_memory(s, &allocated) == TERN_OK);
    REQUIRE(tern_session_plan(s, 100 * T, &later) == TERN_OK);
    REQUIRE(tern_session_plan(s, segments * T, &far) == TERN_OK);
    INFO(name);
    CHECK(allocated.state_bytes == full);
    CHECK(later.state_bytes == full);
    CHECK(far.state_bytes == full);
    // Stream 1,000 segments (as far as learned positions go); the allocation never changes.
    std::vector<float> lp(size_t(T * V));
    for (int64_t pos = 0; pos + T <= std::min(segments * T, positions); pos += T) {
      std::vector<int32_t> seg(g.ids.begin() + (pos % int64_t(g.ids.size() - T)), g.ids.begin() + (pos % int64_t(g.ids.size() - T)) + T);
      if (tern_session_append(s, seg.data(), T, lp.data()) != TERN_OK) FAIL(tern_session_last_error(s));
    }
    tern_memory_plan after{};
    REQUIRE(tern_session_memory(s, &after) == TERN_OK);
    CHECK(after.state_bytes == allocated.state_bytes);
    for (float v : lp) REQUIRE(std::isfinite(v));
    tern_session_free(s);
    tern_model_free(g.model);
  }
}
