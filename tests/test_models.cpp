// SPDX-License-Identifier: MIT
// End-to-end: reference-family checkpoints converted and run, against PyTorch goldens (tools/reference/), on each
// backend (Vulkan also against the CPU path). The routing goldens run in tests/test_routing.cpp.
#include <catch2/catch.hpp>
#include <filesystem>

#include "cli.h"
#include "convert.h"
#include "npy.h"
#include "tern/tern.h"
#include "op_graph.h"
#include "test_support.h"

using tern::test::relative_error;

using tern::test::make_session;
using tern::test::make_session_on;

namespace {

constexpr double kModelTolerance = 1e-4;

struct Golden {
  std::vector<int32_t> ids;
  tern::npy::Array logits;  // [n, vocab]
  tern_model* model = nullptr;
};

Golden load_golden(const std::string& name) {
  const std::string dir = tern::test::source_path("tests/goldens/" + name);
  Golden g;
  std::string error;
  INFO(error);
  REQUIRE(tern::cli::read_ids_json(dir + "/ids.json", &g.ids, &error));
  REQUIRE(tern::npy::read_f32(dir + "/logits.npy", &g.logits, &error));
  REQUIRE(g.logits.shape.size() == 2);
  REQUIRE(g.logits.shape[0] == int64_t(g.ids.size()));
  const std::string out = tern::test::scratch_dir("golden_" + name) + "/model.tern";
  tern::convert::ConvertOptions opts;
  opts.quiet = true;
  tern::Status st = tern::convert::convert_checkpoint(dir, out, opts);
  INFO(st.message());
  REQUIRE(st.ok());
  REQUIRE(tern_model_load(out.c_str(), &g.model) == TERN_OK);
  return g;
}

const char* const kGoldens[] = {"pre_tied_learned_gelu", "post_untied_sinusoidal_relu", "pre_untied_nobias_gelutanh",
                                "tiny_f16",
                                // windowed and sparse attention kinds
                                "sliding_w64", "chunked_c128", "strided_merged", "strided_split", "fixed_merged",
                                "fixed_split", "mixed_layers",
                                // strided, fixed and sliding heads side by side in one layer
                                "groups_strided_fixed"};

}  // namespace

TEST_CASE("reference family: full forward matches PyTorch goldens (and, on Vulkan, the CPU path)", "[model][vulkan]") {
  TERN_EACH_BACKEND(backend);
  for (const char* name : kGoldens) {
    Golden g = load_golden(name);
    const int64_t n = int64_t(g.ids.size()), vocab = g.logits.shape[1];
    if (backend == TERN_BACKEND_VULKAN) {
      std::vector<float> gpu(size_t(n * vocab)), cpu(size_t(n * vocab));
      tern_session* s = make_session_on(backend, g.model, 1);
      INFO(name << ": " << tern_session_last_error(s));
      REQUIRE(tern_session_forward(s, g.ids.data(), n, gpu.data()) == TERN_OK);
      tern_session_free(s);
      s = make_session(g.model, 2);
      REQUIRE(tern_session_forward(s, g.ids.data(), n, cpu.data()) == TERN_OK);
      tern_session_free(s);
      const double vs_golden = relative_error(gpu.data(), g.logits.data.data(), gpu.size());
      const double vs_cpu = relative_error(gpu.data(), cpu.data(), gpu.size());
      INFO("Vulkan vs PyTorch " << vs_golden << ", vs CPU " << vs_cpu);
      CHECK(vs_golden <= kModelTolerance);
      CHECK(vs_cpu <= kModelTolerance);
    }
    for (int threads : {1, 2}) {
      if (backend != TERN_BACKEND_CPU) break;
      tern_session* s = make_session(g.model, threads);
      REQUIRE(tern_session_vocab_size(s) == vocab);
      std::vector<float> logits(size_t(n * vocab));
      INFO(name << ", threads " << threads << ": " << tern_session_last_error(s));
      REQUIRE(tern_session_forward(s, g.ids.data(), n, logits.data()) == TERN_OK);
      double err = relative_error(logits.data(), g.logits.data.data(), logits.size());
      INFO("relative error " << err);
      CHECK(err <= kModelTolerance);
      tern_session_free(s);
    }
    tern_model_free(g.model);
  }
  if (backend == TERN_BACKEND_VULKAN) CHECK(tern::test::vulkan_validation_messages() == 0);
}

// Row blocks on the CPU (cpu/row_chains.h): every golden's ops (dense, windowed and sparse attention included: they
// run a block as an append over their KV cache or ring) form one chain, run here in blocks of 37 rows, which no
// chunk, window or stride divides.
TEST_CASE("reference family: one forward in 37-row blocks through attention matches the goldens", "[model][rowblock]") {
  for (const char* name : kGoldens) {
    Golden g = load_golden(name);
    const int64_t n = int64_t(g.ids.size()), vocab = g.logits.shape[1];
    tern_session* s = make_session(g.model, 2, 0, 0, 37);
    tern_memory_plan plan{};
    REQUIRE(tern_session_plan(s, n, &plan) == TERN_OK);
    INFO(name << ": " << plan.row_chains << " chain(s) of " << plan.row_block_rows << " rows; " << tern_session_last_error(s));
    CHECK(plan.row_chains == 1);
    CHECK(plan.row_block_rows == 37);
    std::vector<float> logits(size_t(n * vocab));
    REQUIRE(tern_session_forward(s, g.ids.data(), n, logits.data()) == TERN_OK);
    const double err = relative_error(logits.data(), g.logits.data.data(), logits.size());
    INFO("relative error " << err);
    CHECK(err <= kModelTolerance);
    tern_session_free(s);
    tern_model_free(g.model);
  }
}

// Streaming keeps the state in the session (on Vulkan, on the device). The CPU streams every golden whole, token by
// token and in segments of 37; Vulkan (lavapipe in CI) the kinds with a state of their own, 300 tokens in segments of 37.
const char* const kStreamingGoldensVulkan[] = {"pre_untied_nobias_gelutanh", "sliding_w64", "strided_merged",
                                               "strided_split", "fixed_merged", "fixed_split", "mixed_layers",
                                               "groups_strided_fixed"};

TEST_CASE("reference family: streaming in segments and token by token matches the goldens (CPU and Vulkan)", "[model][streaming][vulkan]") {
  TERN_EACH_BACKEND(backend);
  const bool cpu = backend == TERN_BACKEND_CPU;
  std::vector<const char*> names(std::begin(kGoldens), std::end(kGoldens));
  if (!cpu) names.assign(std::begin(kStreamingGoldensVulkan), std::end(kStreamingGoldensVulkan));
  for (const char* name : names) {
    Golden g = load_golden(name);
    // CPU: the whole golden sequence; Vulkan: at most 300 tokens.
    const int64_t n = cpu ? int64_t(g.ids.size()) : std::min<int64_t>(int64_t(g.ids.size()), 300);
    const int64_t vocab = g.logits.shape[1];
    tern_session* s = cpu ? make_session(g.model, 2) : make_session_on(backend, g.model, 1, 0, 64);
    const std::vector<int64_t> segments = cpu ? std::vector<int64_t>{1, 37} : std::vector<int64_t>{37};
    for (int64_t segment : segments) {
      REQUIRE(tern_session_reset(s) == TERN_OK);
      std::vector<float> logits(size_t(n * vocab));
      for (int64_t pos = 0; pos < n; pos += segment) {
        int64_t len = std::min(segment, n - pos);
        INFO(name << ": " << tern_session_last_error(s));
        REQUIRE(tern_session_append(s, g.ids.data() + pos, len, logits.data() + pos * vocab) == TERN_OK);
      }
      CHECK(tern_session_position(s) == n);
      double err = relative_error(logits.data(), g.logits.data.data(), logits.size());
      INFO(name << ", segment " << segment << ": relative error " << err);
      CHECK(err <= kModelTolerance);
    }
    tern_session_free(s);
    tern_model_free(g.model);
  }
  if (!cpu) CHECK(tern::test::vulkan_validation_messages() == 0);
}

TEST_CASE("append without logits advances the state like append with logits", "[model][streaming]") {
  Golden g = load_golden("pre_tied_learned_gelu");
  const int64_t vocab = g.logits.shape[1], prefix = 100, tail = 20;
  tern_session* s = make_session(g.model, 1);
  REQUIRE(tern_session_append(s, g.ids.data(), prefix, nullptr) == TERN_OK);
  std::vector<float> logits(size_t(tail * vocab));
  REQUIRE(tern_session_append(s, g.ids.data() + prefix, tail, logits.data()) == TERN_OK);
  CHECK(relative_error(logits.data(), g.logits.data.data() + prefix * vocab, logits.size()) <= kModelTolerance);
  tern_session_free(s);
  tern_model_free(g.model);
}

TEST_CASE("shipped kjv-byte model on Vulkan matches the CPU path", "[model][vulkan]") {
  TERN_SKIP_WITHOUT_VULKAN();
  const std::string out = tern::test::scratch_dir("kjv_vulkan") + "/model.tern";
  tern::convert::ConvertOptions opts;
  opts.quiet = true;
  REQUIRE(tern::convert::convert_checkpoint(tern::test::source_path("examples/models/kjv-byte"), out, opts).ok());
  tern_model* model = nullptr;
  REQUIRE(tern_model_load(out.c_str(), &model) == TERN_OK);
  const std::string text = tern::test::read_file(tern::test::source_path("examples/models/kjv-byte/heldout.txt"));
  const int64_t n = 256, vocab = 256;  // one full context window
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = int32_t(uint8_t(text[size_t(i)]));
  std::vector<float> gpu(size_t(n * vocab)), cpu(size_t(n * vocab));
  tern_session* s = make_session_on(TERN_BACKEND_VULKAN, model, 1);
  REQUIRE(tern_session_forward(s, ids.data(), n, gpu.data()) == TERN_OK);
  tern_session_free(s);
  s = make_session(model, 2);
  REQUIRE(tern_session_forward(s, ids.data(), n, cpu.data()) == TERN_OK);
  tern_session_free(s);
  const double err = relative_error(gpu.data(), cpu.data(), gpu.size());
  INFO("Vulkan vs CPU " << err);
  CHECK(err <= kModelTolerance);
  tern_model_free(model);
  CHECK(tern::test::vulkan_validation_messages() == 0);
}
