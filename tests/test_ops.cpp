// Per-op tests: each op's CPU path against its reference kernel on the same random input, relative error <= 1e-5;
// through a session each op runs on every backend, Vulkan also against the CPU path (<= 1e-4, DESIGN.md, Numerics).
// Session sizes stay small: CI runs the Vulkan side on lavapipe, a CPU implementation of Vulkan.
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <random>

#include "cpu/kernels.h"
#include "op_graph.h"
#include "ops/reference.h"
#include "test_support.h"

using namespace tern;
using tern::test::random_floats;
using tern::test::relative_error;

namespace {

constexpr double kOpTolerance = 1e-5;

struct Pool {
  explicit Pool(int threads) : pool(pthreadpool_create(size_t(threads))) {}
  ~Pool() { pthreadpool_destroy(pool); }
  pthreadpool_t pool;
};

std::vector<float> gather_rows(const test::OpGraph& g, const std::vector<int32_t>& ids) {
  std::vector<float> x(ids.size() * size_t(g.d));
  ref::embedding(g.table.data(), g.d, ids.data(), int64_t(ids.size()), x.data());
  return x;
}

// The op graph on `backend` against the reference: on the CPU with one and two threads; on Vulkan also against the
// CPU path, with no validation message. segment > 0: appends of that many tokens through the state.
void check_on(tern_backend backend, tern_model* model, const std::vector<int32_t>& ids, int64_t width,
              const std::vector<float>& want, int64_t segment = 0) {
  if (backend == TERN_BACKEND_CPU) {
    for (int threads : {1, 2}) {
      auto got = test::run_on(backend, model, ids, width, segment, threads);
      const double err = relative_error(got.data(), want.data(), want.size());
      INFO("segment " << segment << ", threads " << threads << ": CPU vs reference " << err);
      CHECK(err <= kOpTolerance);
    }
    return;
  }
  auto cpu = test::run_on(TERN_BACKEND_CPU, model, ids, width, segment);
  auto got = test::run_on(backend, model, ids, width, segment);
  const double vs_ref = relative_error(got.data(), want.data(), want.size());
  const double vs_cpu = relative_error(got.data(), cpu.data(), cpu.size());
  INFO("segment " << segment << ": " << test::backend_name(backend) << " vs reference " << vs_ref << ", vs CPU " << vs_cpu);
  CHECK(vs_ref <= test::backend_tolerance(backend, kOpTolerance));
  CHECK(vs_cpu <= test::backend_tolerance(backend, kOpTolerance));
  CHECK(test::vulkan_validation_messages() == 0);
}

}  // namespace

TEST_CASE("layer_norm: CPU matches reference", "[ops]") {
  for (int64_t d : {2, 7, 64, 200, 1024}) {
    const int64_t n = 33;
    auto x = random_floats(size_t(n * d), 1, -3, 5);
    auto gamma = random_floats(size_t(d), 2, 0.5f, 1.5f);
    auto beta = random_floats(size_t(d), 3);
    std::vector<float> want(x.size()), got(x.size());
    ref::layer_norm(x.data(), n, d, gamma.data(), beta.data(), 1e-5f, want.data());
    Pool pool(2);
    cpu::layer_norm(pool.pool, x.data(), n, d, gamma.data(), beta.data(), 1e-5f, got.data());
    INFO("d=" << d);
    CHECK(relative_error(got.data(), want.data(), got.size()) <= kOpTolerance);
    ref::layer_norm(x.data(), n, d, gamma.data(), nullptr, 1e-6f, want.data());
    cpu::layer_norm(pool.pool, x.data(), n, d, gamma.data(), nullptr, 1e-6f, got.data());
    CHECK(relative_error(got.data(), want.data(), got.size()) <= kOpTolerance);
  }
}

TEST_CASE("activation: CPU matches reference for every kind", "[ops]") {
  auto x = random_floats(10007, 4, -6, 6);
  std::vector<float> want(x.size()), got(x.size());
  Pool pool(2);
  for (auto kind : {fb::ActivationKind::RELU, fb::ActivationKind::GELU_ERF, fb::ActivationKind::GELU_TANH}) {
    ref::activation(kind, x.data(), int64_t(x.size()), want.data());
    cpu::activation(pool.pool, kind, x.data(), int64_t(x.size()), got.data());
    INFO("kind=" << int(kind));
    CHECK(relative_error(got.data(), want.data(), got.size()) <= kOpTolerance);
  }
}

TEST_CASE("add: CPU matches reference", "[ops]") {
  auto a = random_floats(50001, 5), b = random_floats(50001, 6);
  std::vector<float> want(a.size()), got(a.size());
  ref::add(a.data(), b.data(), int64_t(a.size()), want.data());
  Pool pool(2);
  cpu::add(pool.pool, a.data(), b.data(), int64_t(a.size()), got.data());
  CHECK(relative_error(got.data(), want.data(), got.size()) <= kOpTolerance);
}

TEST_CASE("linear (XNNPACK on the CPU, tiled GEMM on Vulkan) with and without bias through a session matches reference",
          "[ops][vulkan]") {
  TERN_EACH_BACKEND(backend);
  for (bool bias : {true, false}) {
    const int64_t rows = 50, in = 48, out = 37, n = 41;  // none a multiple of Vulkan's 16-wide tile
    auto g = test::start_graph(rows, in, 10);
    auto w = random_floats(size_t(out * in), 11);
    auto b = random_floats(size_t(out), 12);
    int32_t wt = test::add_constant(g, "w", {out, in}, w);
    int32_t bt = bias ? test::add_constant(g, "b", {out}, b) : -1;
    int32_t y = g.graph.add_value("y", fb::DType::F32, out).value();
    REQUIRE(g.graph.add_op(fb::OpCode::LINEAR, "linear", {g.x}, {y}, {wt, bt}, convert::params::Linear{}).ok());
    tern_model* model = test::finish_and_load(g, y, bias ? "linear_bias" : "linear", n);
    auto ids = test::random_ids(n, rows, 13);
    auto x = gather_rows(g, ids);
    std::vector<float> want(size_t(n * out));
    ref::linear(x.data(), n, in, w.data(), bias ? b.data() : nullptr, out, want.data());
    INFO("bias " << bias);
    check_on(backend, model, ids, out, want);
    tern_model_free(model);
  }
}

TEST_CASE("embedding and learned / sinusoidal positions through a session match reference (CPU and Vulkan)", "[ops][vulkan]") {
  TERN_EACH_BACKEND(backend);
  for (auto kind : {fb::PositionKind::LEARNED, fb::PositionKind::SINUSOIDAL}) {
    const int64_t rows = 30, d = 24, n = 40;
    auto g = test::start_graph(rows, d, 14);
    auto pe = random_floats(size_t(n * d), 15);
    std::vector<int32_t> weights = {-1};  // sinusoidal positions have no table
    if (kind == fb::PositionKind::LEARNED) weights[0] = test::add_constant(g, "pe", {n, d}, pe);
    int32_t y = g.graph.add_value("y", fb::DType::F32, d).value();
    REQUIRE(g.graph.add_op(fb::OpCode::POSITION, "pos", {g.x}, {y}, weights, convert::params::Position{kind, n}).ok());
    tern_model* model = test::finish_and_load(g, y, "position" + std::to_string(int(kind)), n);
    auto ids = test::random_ids(n, rows, 16);
    auto x = gather_rows(g, ids);
    std::vector<float> want(size_t(n * d));
    ref::position(kind, pe.data(), d, 0, n, x.data(), want.data());
    INFO("kind=" << int(kind));
    check_on(backend, model, ids, d, want);
    check_on(backend, model, ids, d, want, 7);  // positions continue across appends
    tern_model_free(model);
  }
}

TEST_CASE("sinusoidal positions stay exact far into a stream (CPU and Vulkan)", "[ops][vulkan]") {
  TERN_EACH_BACKEND(backend);
  const int64_t rows = 8, d = 64, n = 4;
  auto g = test::start_graph(rows, d, 40);
  int32_t y = g.graph.add_value("y", fb::DType::F32, d).value();
  REQUIRE(g.graph.add_op(fb::OpCode::POSITION, "pos", {g.x}, {y}, {-1},
                         convert::params::Position{fb::PositionKind::SINUSOIDAL, 0}).ok());
  tern_model* model = test::finish_and_load(g, y, "position_far", 0);
  auto ids = test::random_ids(n, rows, 41);
  auto x = gather_rows(g, ids);
  const int64_t far = 1000000;  // a million tokens in: float angles would be off by ~0.1 here
  std::vector<float> want(size_t(n * d)), got(size_t(n * d));
  ref::position(fb::PositionKind::SINUSOIDAL, nullptr, d, far, n, x.data(), want.data());
  tern_session* s = test::make_session_on(backend, model, 1, far + n, 1 << 16);
  std::vector<int32_t> filler(size_t(1) << 16, 0);
  for (int64_t pos = 0; pos < far; pos += int64_t(filler.size())) {
    const int64_t len = std::min<int64_t>(int64_t(filler.size()), far - pos);
    REQUIRE(tern_session_append(s, filler.data(), len, nullptr) == TERN_OK);
  }
  REQUIRE(tern_session_append(s, ids.data(), n, got.data()) == TERN_OK);
  CHECK(relative_error(got.data(), want.data(), want.size()) <= test::backend_tolerance(backend, kOpTolerance));
  tern_session_free(s);
  tern_model_free(model);
}

TEST_CASE("log_softmax: CPU matches reference, directly and through a session", "[ops]") {
  Pool pool(2);
  for (int64_t d : {1, 7, 64, 1000}) {
    const int64_t n = 37;
    auto x = random_floats(size_t(n * d), 17, -30, 30);
    std::vector<float> want(x.size()), got(x.size());
    ref::log_softmax(x.data(), n, d, want.data());
    cpu::log_softmax(pool.pool, x.data(), n, d, got.data());
    INFO("d=" << d);
    if (d == 1) {
      for (float v : got) CHECK(v == 0.0f);  // one class: log 1
      continue;
    }
    CHECK(relative_error(got.data(), want.data(), got.size()) <= kOpTolerance);
    for (int64_t i = 0; i < n; ++i) {  // rows are log-probabilities
      double sum = 0;
      for (int64_t j = 0; j < d; ++j) sum += std::exp(double(got[size_t(i * d + j)]));
      CHECK(std::abs(sum - 1.0) < 1e-5);
    }
  }
  const int64_t rows = 20, d = 50, n = 33;
  auto g = test::start_graph(rows, d, 18);
  int32_t y = g.graph.add_value("y", fb::DType::F32, d).value();
  REQUIRE(g.graph.add_op(fb::OpCode::LOG_SOFTMAX, "log_softmax", {g.x}, {y}, {}, convert::params::LogSoftmax{}).ok());
  tern_model* model = test::finish_and_load(g, y, "log_softmax", n);
  auto ids = test::random_ids(n, rows, 19);
  auto x = gather_rows(g, ids);
  std::vector<float> want(size_t(n * d));
  ref::log_softmax(x.data(), n, d, want.data());
  auto got = test::run_on(TERN_BACKEND_CPU, model, ids, d);
  CHECK(relative_error(got.data(), want.data(), got.size()) <= kOpTolerance);
  tern_model_free(model);
}

TEST_CASE("layer_norm with and without beta through a session matches reference (CPU and Vulkan)", "[ops][vulkan]") {
  TERN_EACH_BACKEND(backend);
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
      tern_model* model = test::finish_and_load(g, y, "session_layer_norm", n);
      auto ids = test::random_ids(n, rows, 4);
      auto x = gather_rows(g, ids);
      std::vector<float> want(size_t(n * d));
      ref::layer_norm(x.data(), n, d, gamma.data(), beta ? b.data() : nullptr, 1e-5f, want.data());
      INFO("d " << d << ", beta " << beta);
      check_on(backend, model, ids, d, want);
      tern_model_free(model);
    }
  }
}

TEST_CASE("activations (relu, gelu erf, gelu tanh) through a session match reference (CPU and Vulkan)", "[ops][vulkan]") {
  TERN_EACH_BACKEND(backend);
  for (auto kind : {fb::ActivationKind::RELU, fb::ActivationKind::GELU_ERF, fb::ActivationKind::GELU_TANH}) {
    const int64_t rows = 40, d = 50, n = 37;
    auto g = test::start_graph(rows, d, 5);
    int32_t y = g.graph.add_value("y", fb::DType::F32, d).value();
    REQUIRE(g.graph.add_op(fb::OpCode::ACTIVATION, "act", {g.x}, {y}, {}, convert::params::Activation{kind}).ok());
    tern_model* model = test::finish_and_load(g, y, "session_activation", n);
    auto ids = test::random_ids(n, rows, 6);
    auto x = gather_rows(g, ids);
    std::vector<float> want(x.size());
    ref::activation(kind, x.data(), int64_t(x.size()), want.data());
    INFO("kind " << int(kind));
    check_on(backend, model, ids, d, want);
    tern_model_free(model);
  }
}

TEST_CASE("add and log_softmax through a session match reference (CPU and Vulkan)", "[ops][vulkan]") {
  TERN_EACH_BACKEND(backend);
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
    tern_model* model = test::finish_and_load(g, y, "session_add_log_softmax", n);
    auto ids = test::random_ids(n, rows, 9);
    auto x = gather_rows(g, ids);
    std::vector<float> s(x.size()), want(x.size());
    for (size_t i = 0; i < x.size(); ++i) s[i] = x[i] + table2[size_t(ids[i / size_t(d)]) * size_t(d) + i % size_t(d)];
    ref::log_softmax(s.data(), n, d, want.data());
    INFO("d " << d);
    check_on(backend, model, ids, d, want);
    tern_model_free(model);
  }
}
