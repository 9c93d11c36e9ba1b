// Per-op parity on the Vulkan backend: each op with a shader runs on the same random input through the reference
// kernel, the CPU path and the Vulkan path (fp32, relative error <= 1e-4, DESIGN.md). Small sizes: CI runs these on
// lavapipe, a CPU implementation of Vulkan. Without a device each case ends as a visible skip.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "op_graph.h"
#include "ops/reference.h"
#include "test_support.h"

using namespace tern;
using tern::test::random_floats;
using tern::test::relative_error;

namespace {

constexpr double kVulkanTolerance = 1e-4;

std::vector<int32_t> random_ids(int64_t n, int64_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = int32_t(rng() % uint32_t(rows));
  return ids;
}

// The model's output for ids on a backend: one forward, or appends of `segment` tokens through the state.
std::vector<float> run_on(tern_backend backend, tern_model* model, const std::vector<int32_t>& ids, int64_t width,
                          int64_t segment = 0) {
  const int64_t n = int64_t(ids.size());
  tern_session* s = test::make_session_on(backend, model, 2, n, segment > 0 ? segment : 0);
  std::vector<float> out(size_t(n * width));
  if (segment == 0) {
    INFO(tern_session_last_error(s));
    REQUIRE(tern_session_forward(s, ids.data(), n, out.data()) == TERN_OK);
  } else {
    for (int64_t pos = 0; pos < n; pos += segment) {
      const int64_t len = std::min(segment, n - pos);
      INFO(tern_session_last_error(s));
      REQUIRE(tern_session_append(s, ids.data() + pos, len, out.data() + pos * width) == TERN_OK);
    }
  }
  tern_session_free(s);
  return out;
}

std::vector<float> gather_rows(const test::OpGraph& g, const std::vector<int32_t>& ids) {
  std::vector<float> x(ids.size() * size_t(g.d));
  ref::embedding(g.table.data(), g.d, ids.data(), int64_t(ids.size()), x.data());
  return x;
}

// Vulkan against the reference and against the CPU path.
void check_parity(tern_model* model, const std::vector<int32_t>& ids, int64_t width, const std::vector<float>& want,
                  int64_t segment = 0) {
  auto cpu = run_on(TERN_BACKEND_CPU, model, ids, width, segment);
  auto gpu = run_on(TERN_BACKEND_VULKAN, model, ids, width, segment);
  const double vs_ref = relative_error(gpu.data(), want.data(), want.size());
  const double vs_cpu = relative_error(gpu.data(), cpu.data(), cpu.size());
  INFO("segment " << segment << ": Vulkan vs reference " << vs_ref << ", vs CPU " << vs_cpu);
  CHECK(vs_ref <= kVulkanTolerance);
  CHECK(vs_cpu <= kVulkanTolerance);
  CHECK(test::vulkan_validation_messages() == 0);
}

}  // namespace

TEST_CASE("vulkan: linear (tiled GEMM) with and without bias matches CPU and reference", "[vulkan][ops]") {
  TERN_SKIP_WITHOUT_VULKAN();
  for (bool bias : {true, false}) {
    const int64_t rows = 50, in = 48, out = 37, n = 41;  // none a multiple of the 16-wide tile
    auto g = test::start_graph(rows, in, 10);
    auto w = random_floats(size_t(out * in), 11);
    auto b = random_floats(size_t(out), 12);
    int32_t wt = test::add_constant(g, "w", {out, in}, w);
    int32_t bt = bias ? test::add_constant(g, "b", {out}, b) : -1;
    int32_t y = g.graph.add_value("y", fb::DType::F32, out).value();
    REQUIRE(g.graph.add_op(fb::OpCode::LINEAR, "linear", {g.x}, {y}, {wt, bt}, convert::params::Linear{}).ok());
    tern_model* model = test::finish_and_load(g, y, bias ? "vk_linear_bias" : "vk_linear", n);
    auto ids = random_ids(n, rows, 13);
    auto x = gather_rows(g, ids);
    std::vector<float> want(size_t(n * out));
    ref::linear(x.data(), n, in, w.data(), bias ? b.data() : nullptr, out, want.data());
    check_parity(model, ids, out, want);
    tern_model_free(model);
  }
}

TEST_CASE("vulkan: embedding and learned / sinusoidal positions match CPU and reference", "[vulkan][ops]") {
  TERN_SKIP_WITHOUT_VULKAN();
  for (auto kind : {fb::PositionKind::LEARNED, fb::PositionKind::SINUSOIDAL}) {
    const int64_t rows = 30, d = 24, n = 40;
    auto g = test::start_graph(rows, d, 14);
    auto pe = random_floats(size_t(n * d), 15);
    std::vector<int32_t> weights = {-1};
    if (kind == fb::PositionKind::LEARNED) weights[0] = test::add_constant(g, "pe", {n, d}, pe);
    int32_t y = g.graph.add_value("y", fb::DType::F32, d).value();
    REQUIRE(g.graph.add_op(fb::OpCode::POSITION, "pos", {g.x}, {y}, weights, convert::params::Position{kind, n}).ok());
    tern_model* model = test::finish_and_load(g, y, "vk_position" + std::to_string(int(kind)), n);
    auto ids = random_ids(n, rows, 16);
    auto x = gather_rows(g, ids);
    std::vector<float> want(size_t(n * d));
    ref::position(kind, pe.data(), d, 0, n, x.data(), want.data());
    INFO("kind " << int(kind));
    check_parity(model, ids, d, want);
    check_parity(model, ids, d, want, 7);  // positions continue across appends
    tern_model_free(model);
  }
}

TEST_CASE("vulkan: sinusoidal positions stay exact far into a stream", "[vulkan][ops]") {
  TERN_SKIP_WITHOUT_VULKAN();
  const int64_t rows = 8, d = 64, n = 4;
  auto g = test::start_graph(rows, d, 40);
  int32_t y = g.graph.add_value("y", fb::DType::F32, d).value();
  REQUIRE(g.graph.add_op(fb::OpCode::POSITION, "pos", {g.x}, {y}, {-1},
                         convert::params::Position{fb::PositionKind::SINUSOIDAL, 0}).ok());
  tern_model* model = test::finish_and_load(g, y, "vk_position_far", 0);
  auto ids = random_ids(n, rows, 41);
  auto x = gather_rows(g, ids);
  const int64_t far = 1000000;  // a million tokens in: float angles would be off by ~0.1 here
  std::vector<float> want(size_t(n * d)), got(size_t(n * d));
  ref::position(fb::PositionKind::SINUSOIDAL, nullptr, d, far, n, x.data(), want.data());
  tern_session* s = test::make_session_on(TERN_BACKEND_VULKAN, model, 1, far + n, 1 << 16);
  std::vector<int32_t> filler(size_t(1) << 16, 0);
  for (int64_t pos = 0; pos < far; pos += int64_t(filler.size())) {
    const int64_t len = std::min<int64_t>(int64_t(filler.size()), far - pos);
    REQUIRE(tern_session_append(s, filler.data(), len, nullptr) == TERN_OK);
  }
  REQUIRE(tern_session_append(s, ids.data(), n, got.data()) == TERN_OK);
  CHECK(relative_error(got.data(), want.data(), want.size()) <= kVulkanTolerance);
  tern_session_free(s);
  tern_model_free(model);
}

TEST_CASE("vulkan: layer_norm with and without beta matches CPU and reference", "[vulkan][ops]") {
  TERN_SKIP_WITHOUT_VULKAN();
  for (int64_t d : {7, 64, 300}) {
    for (bool beta : {true, false}) {
      const int64_t rows = 20, n = 33;
      auto g = test::start_graph(rows, d, 1);
      auto gamma = random_floats(size_t(d), 2, 0.5f, 1.5f);
      auto b = random_floats(size_t(d), 3);
      int32_t gt = test::add_constant(g, "gamma", {d}, gamma);
      int32_t bt = beta ? test::add_constant(g, "beta", {d}, b) : -1;
      int32_t y = g.graph.add_value("y", fb::DType::F32, d).value();
      REQUIRE(g.graph.add_op(fb::OpCode::LAYER_NORM, "ln", {g.x}, {y}, {gt, bt}, convert::params::LayerNorm{1e-5f}).ok());
      tern_model* model = test::finish_and_load(g, y, "vk_layer_norm", n);
      auto ids = random_ids(n, rows, 4);
      auto x = gather_rows(g, ids);
      std::vector<float> want(size_t(n * d));
      ref::layer_norm(x.data(), n, d, gamma.data(), beta ? b.data() : nullptr, 1e-5f, want.data());
      INFO("d " << d << ", beta " << beta);
      check_parity(model, ids, d, want);
      tern_model_free(model);
    }
  }
}

TEST_CASE("vulkan: activations (relu, gelu erf, gelu tanh) match CPU and reference", "[vulkan][ops]") {
  TERN_SKIP_WITHOUT_VULKAN();
  for (auto kind : {fb::ActivationKind::RELU, fb::ActivationKind::GELU_ERF, fb::ActivationKind::GELU_TANH}) {
    const int64_t rows = 40, d = 50, n = 37;
    auto g = test::start_graph(rows, d, 5);
    int32_t y = g.graph.add_value("y", fb::DType::F32, d).value();
    REQUIRE(g.graph.add_op(fb::OpCode::ACTIVATION, "act", {g.x}, {y}, {}, convert::params::Activation{kind}).ok());
    tern_model* model = test::finish_and_load(g, y, "vk_activation", n);
    auto ids = random_ids(n, rows, 6);
    auto x = gather_rows(g, ids);
    std::vector<float> want(x.size());
    ref::activation(kind, x.data(), int64_t(x.size()), want.data());
    INFO("kind " << int(kind));
    check_parity(model, ids, d, want);
    tern_model_free(model);
  }
}

TEST_CASE("vulkan: add and log_softmax match CPU and reference", "[vulkan][ops]") {
  TERN_SKIP_WITHOUT_VULKAN();
  for (int64_t d : {7, 300}) {
    const int64_t rows = 25, n = 31;
    auto g = test::start_graph(rows, d, 7);
    auto table2 = random_floats(size_t(rows * d), 8, -20, 20);
    int32_t t2 = test::add_constant(g, "table2", {rows, d}, table2);
    int32_t x2 = g.graph.add_value("x2", fb::DType::F32, d).value();
    int32_t sum = g.graph.add_value("sum", fb::DType::F32, d).value();
    int32_t y = g.graph.add_value("y", fb::DType::F32, d).value();
    const int32_t ids_value = 0;  // start_graph's first value
    REQUIRE(g.graph.add_op(fb::OpCode::EMBEDDING, "embed2", {ids_value}, {x2}, {t2}, convert::params::Embedding{}).ok());
    REQUIRE(g.graph.add_op(fb::OpCode::ADD, "add", {g.x, x2}, {sum}, {}, convert::params::Add{}).ok());
    REQUIRE(g.graph.add_op(fb::OpCode::LOG_SOFTMAX, "lsm", {sum}, {y}, {}, convert::params::LogSoftmax{}).ok());
    tern_model* model = test::finish_and_load(g, y, "vk_add_log_softmax", n);
    auto ids = random_ids(n, rows, 9);
    auto x = gather_rows(g, ids);
    std::vector<float> s(x.size()), want(x.size());
    for (size_t i = 0; i < x.size(); ++i) s[i] = x[i] + table2[size_t(ids[i / size_t(d)]) * size_t(d) + i % size_t(d)];
    ref::log_softmax(s.data(), n, d, want.data());
    INFO("d " << d);
    check_parity(model, ids, d, want);
    tern_model_free(model);
  }
}
