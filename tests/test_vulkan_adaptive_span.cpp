// Adaptive span attention on the Vulkan backend (runtime/src/vulkan/ops_adaptive_span.cpp): against the CPU path
// (itself checked against the reference kernel by test_adaptive_span.cpp) on random inputs, in one pass, in segments and token by token through the per-head rings on
// the device (state bytes as the CPU path's); and the facebookresearch/adaptive-span goldens on Vulkan.
#include <catch2/catch.hpp>
#include <random>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "convert.h"
#include "npy.h"
#include "op_graph.h"
#include "test_support.h"

using namespace tern;
using tern::test::make_session_on;
using tern::test::random_floats;
using tern::test::relative_error;

namespace {

constexpr double kVulkanTolerance = 1e-4;

struct SpanOp {
  int heads, dh;
  int64_t L, R;
  std::vector<float> spans;  // [heads]; empty: no span weight
};

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

TEST_CASE("vulkan: adaptive span attention matches the CPU path, in one pass and streamed",
          "[vulkan][attention][adaptive_span]") {
  TERN_SKIP_WITHOUT_VULKAN();
  // A span that masks every key (reach 0), z = 0 (reach R), mid values, z > 1 (clamped to L), no span weight.
  const std::vector<SpanOp> ops = {{4, 8, 40, 8, {-0.5f, 0.0f, 0.33f, 1.5f}},
                                   {2, 16, 30, 6, {0.07f, 0.61f}},
                                   {2, 8, 20, 0, {}}};
  const int64_t n = 60, rows = 37;
  for (size_t c = 0; c < ops.size(); ++c) {
    const SpanOp& op = ops[c];
    const int64_t inner = int64_t(op.heads) * op.dh;
    auto g = test::start_graph(rows, 3 * inner, uint32_t(70 + c));
    const std::vector<float> key_pe = random_floats(size_t(op.dh * op.L), uint32_t(80 + c));
    const int32_t pe = test::add_constant(g, "key_pe", {op.dh, op.L}, key_pe);
    const int32_t span = op.spans.empty() ? -1 : test::add_constant(g, "span", {op.heads}, op.spans);
    const int32_t y = g.graph.add_value("y", fb::DType::F32, inner).value();
    convert::params::Attention p;
    p.heads = op.heads;
    p.head_dim = op.dh;
    p.scale = 0.4f;
    p.kind = convert::params::AdaptiveSpan{int32_t(op.L), int32_t(op.R)};
    REQUIRE(g.graph.add_op(fb::OpCode::ATTENTION, "attn", {g.x}, {y}, {pe, span}, p).ok());
    tern_model* model = test::finish_and_load(g, y, "vk_adaptive_span" + std::to_string(c), n);

    std::mt19937 rng(uint32_t(90 + c));
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (auto& id : ids) id = int32_t(rng() % rows);
    tern_session* gpu = make_session_on(TERN_BACKEND_VULKAN, model, 1, n);
    tern_session* cpu = make_session_on(TERN_BACKEND_CPU, model, 2, n);
    const std::vector<float> base = run_segments(cpu, ids, n, inner);
    for (int64_t segment : {n, int64_t(1), int64_t(13)}) {
      const std::vector<float> got = run_segments(gpu, ids, segment, inner);
      const double vs_cpu = relative_error(got.data(), base.data(), got.size());
      INFO("case " << c << ", segment " << segment << ": vs CPU " << vs_cpu << "; " << tern_session_last_error(gpu));
      CHECK(vs_cpu <= kVulkanTolerance);
    }
    tern_memory_plan on_gpu{}, on_cpu{};
    REQUIRE(tern_session_memory(gpu, &on_gpu) == TERN_OK);
    REQUIRE(tern_session_memory(cpu, &on_cpu) == TERN_OK);
    CHECK(on_gpu.state_bytes == on_cpu.state_bytes);
    tern_session_free(gpu);
    tern_session_free(cpu);
    tern_model_free(model);
  }
  CHECK(test::vulkan_validation_messages() == 0);
}

TEST_CASE("vulkan: adaptive-span goldens, block by block and token by token", "[vulkan][model][adaptive_span]") {
  TERN_SKIP_WITHOUT_VULKAN();
  for (const char* name : {"adaptive_span_learned", "adaptive_span_fixed_span", "adaptive_span_long_block"}) {
    const std::string dir = test::source_path(std::string("tests/goldens/") + name);
    std::vector<int32_t> ids;
    npy::Array logits;
    std::string error;
    INFO(name << ": " << error);
    REQUIRE(cli::read_ids_json(dir + "/ids.json", &ids, &error));
    REQUIRE(npy::read_f32(dir + "/logits.npy", &logits, &error));
    const auto config = nlohmann::json::parse(test::read_file(dir + "/config.json"));
    const std::string out = test::scratch_dir(std::string("vk_golden_") + name) + "/model.tern";
    REQUIRE(convert::convert_checkpoint(dir, out, {true}).ok());
    tern_model* model = nullptr;
    REQUIRE(tern_model_load(out.c_str(), &model) == TERN_OK);
    const int64_t n = int64_t(ids.size()), vocab = logits.shape[1];
    const int64_t block = config["model_params"]["block_size"];
    tern_session* s = make_session_on(TERN_BACKEND_VULKAN, model, 1, n);
    tern_session* cpu = make_session_on(TERN_BACKEND_CPU, model, 2, n);
    for (int64_t segment : {block, int64_t(1)}) {
      const std::vector<float> got = run_segments(s, ids, segment, vocab);
      const double err = relative_error(got.data(), logits.data.data(), got.size());
      INFO(name << ", segment " << segment << ": relative error " << err << "; " << tern_session_last_error(s));
      CHECK(err <= kVulkanTolerance);
    }
    tern_memory_plan on_gpu{}, on_cpu{};
    REQUIRE(tern_session_memory(s, &on_gpu) == TERN_OK);
    REQUIRE(tern_session_memory(cpu, &on_cpu) == TERN_OK);
    CHECK(on_gpu.state_bytes == on_cpu.state_bytes);
    tern_session_free(s);
    tern_session_free(cpu);
    tern_model_free(model);
  }
  CHECK(test::vulkan_validation_messages() == 0);
}
