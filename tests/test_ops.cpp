// Per-op tests: each op's CPU path against its reference kernel on the same random input,
// relative error <= 1e-5 (DESIGN.md, Numerics).
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

std::vector<int32_t> shuffled_ids(int64_t n, int64_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = int32_t(rng() % uint32_t(rows));
  return ids;
}

// Runs a finished op graph on ids and returns its output [n, width].
std::vector<float> run_graph(tern_model* model, const std::vector<int32_t>& ids, int64_t width, int threads) {
  tern_session_options so;
  tern_session_options_init(&so);
  so.threads = threads;
  tern_session* session = nullptr;
  INFO(tern_last_error());
  REQUIRE(tern_session_create(model, &so, &session) == TERN_OK);
  std::vector<float> out(ids.size() * size_t(width));
  INFO(tern_session_last_error(session));
  REQUIRE(tern_session_forward(session, ids.data(), int64_t(ids.size()), out.data()) == TERN_OK);
  tern_session_free(session);
  return out;
}

std::vector<float> gather_rows(const test::OpGraph& g, const std::vector<int32_t>& ids) {
  std::vector<float> x(ids.size() * size_t(g.d));
  ref::embedding(g.table.data(), g.d, ids.data(), int64_t(ids.size()), x.data());
  return x;
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

TEST_CASE("linear (XNNPACK) through a session matches reference", "[ops]") {
  for (bool bias : {true, false}) {
    const int64_t rows = 50, in = 48, out = 37, n = 41;
    auto g = test::start_graph(rows, in, 10);
    auto w = random_floats(size_t(out * in), 11);
    auto b = random_floats(size_t(out), 12);
    int32_t wt = test::add_constant(g, "w", {out, in}, w);
    int32_t bt = bias ? test::add_constant(g, "b", {out}, b) : -1;
    int32_t y = g.graph.add_value("y", fb::DType::F32, out).value();
    REQUIRE(g.graph.add_op(fb::OpCode::LINEAR, "linear", {g.x}, {y}, {wt, bt}, convert::params::Linear{}).ok());
    tern_model* model = test::finish_and_load(g, y, bias ? "linear_bias" : "linear", n);
    auto ids = shuffled_ids(n, rows, 13);
    auto x = gather_rows(g, ids);
    std::vector<float> want(size_t(n * out));
    ref::linear(x.data(), n, in, w.data(), bias ? b.data() : nullptr, out, want.data());
    for (int threads : {1, 2}) {
      auto got = run_graph(model, ids, out, threads);
      CHECK(relative_error(got.data(), want.data(), got.size()) <= kOpTolerance);
    }
    tern_model_free(model);
  }
}

TEST_CASE("embedding and position through a session match reference", "[ops]") {
  for (auto kind : {fb::PositionKind::LEARNED, fb::PositionKind::SINUSOIDAL}) {
    const int64_t rows = 30, d = 24, n = 40;
    auto g = test::start_graph(rows, d, 14);
    auto pe = random_floats(size_t(n * d), 15);
    std::vector<int32_t> weights = {-1};  // sinusoidal positions have no table
    if (kind == fb::PositionKind::LEARNED) weights[0] = test::add_constant(g, "pe", {n, d}, pe);
    int32_t y = g.graph.add_value("y", fb::DType::F32, d).value();
    REQUIRE(g.graph.add_op(fb::OpCode::POSITION, "pos", {g.x}, {y}, weights, convert::params::Position{kind, n}).ok());
    tern_model* model = test::finish_and_load(g, y, "position" + std::to_string(int(kind)), n);
    auto ids = shuffled_ids(n, rows, 16);
    auto x = gather_rows(g, ids);
    std::vector<float> want(size_t(n * d));
    ref::position(kind, pe.data(), d, 0, n, x.data(), want.data());
    auto got = run_graph(model, ids, d, 2);
    INFO("kind=" << int(kind));
    CHECK(relative_error(got.data(), want.data(), got.size()) <= kOpTolerance);
    tern_model_free(model);
  }
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
  auto ids = shuffled_ids(n, rows, 19);
  auto x = gather_rows(g, ids);
  std::vector<float> want(size_t(n * d));
  ref::log_softmax(x.data(), n, d, want.data());
  auto got = run_graph(model, ids, d, 2);
  CHECK(relative_error(got.data(), want.data(), got.size()) <= kOpTolerance);
  tern_model_free(model);
}
