// SPDX-License-Identifier: MIT
// White-box tests of the plain ops' CPU kernels (cpu/kernels.h) against their reference kernels on random input,
// relative error <= 1e-5, at sizes beyond the session cases (layer_norm d up to 1024, 10^4 and 5x10^4 element
// activations and adds, log_softmax with one class); and sinusoidal positions a million tokens into a stream. Each
// op through a session, on every backend, is a case of the op case table (support/op_cases.h, test_backend_ops).
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

TEST_CASE("sinusoidal positions stay exact far into a stream (CPU and Vulkan)", "[ops][vulkan]") {
  TERN_EACH_BACKEND(backend);
  const int64_t rows = 8, d = 64, n = 4;
  auto g = test::start_graph(rows, d, 40);
  int32_t y = g.graph.add_value("y", fb::DType::F32, d).value();
  REQUIRE(g.graph.add_op(fb::OpCode::POSITION, "pos", {g.x}, {y}, {-1},
                         fb::PositionParamsT{{}, fb::PositionKind::SINUSOIDAL, 0}).ok());
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

TEST_CASE("log_softmax: CPU matches reference, rows are log-probabilities, one class is log 1", "[ops]") {
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
}
