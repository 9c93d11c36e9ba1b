// Per-op tests: each op's CPU path against its reference kernel on the same random input,
// relative error <= 1e-5 (DESIGN.md, Numerics).
#include <catch2/catch.hpp>
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

TEST_CASE("attention_dense: blockwise online softmax matches reference", "[ops][attention]") {
  struct Case {
    int heads, head_dim;
    int64_t n, pos0;
    int threads;
  };
  // Shapes cover partial query/key blocks, a streaming continuation (pos0 > 0), one token, and threads.
  for (Case c : {Case{1, 8, 1, 0, 1}, Case{2, 16, 17, 0, 1}, Case{4, 32, 100, 0, 2}, Case{3, 24, 65, 40, 2},
                 Case{2, 64, 1, 300, 1}, Case{8, 16, 257, 0, 2}}) {
    const int64_t T = c.pos0 + c.n, inner = int64_t(c.heads) * c.head_dim;
    auto q = random_floats(size_t(c.n * 3 * inner), 7, -2, 2);  // [n, 3*inner], only the q block is read
    auto k = random_floats(size_t(T * inner), 8, -2, 2);        // [T, inner]
    auto v = random_floats(size_t(T * inner), 9);
    const float scale = 1.0f / std::sqrt(float(c.head_dim));
    std::vector<float> want(size_t(c.n * inner)), got(size_t(c.n * inner));
    ref::attention_dense(q.data(), 3 * inner, k.data(), v.data(), inner, c.n, c.pos0, T, c.heads, c.head_dim, scale, true,
                         want.data());
    // The CPU kernel reads a head-major cache [heads, capacity, dh] with spare capacity.
    const int64_t capacity = T + 5;
    std::vector<float> kc(size_t(c.heads * capacity * c.head_dim)), vc(kc.size());
    for (int h = 0; h < c.heads; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int e = 0; e < c.head_dim; ++e) {
          kc[(h * capacity + t) * c.head_dim + e] = k[t * inner + h * c.head_dim + e];
          vc[(h * capacity + t) * c.head_dim + e] = v[t * inner + h * c.head_dim + e];
        }
    std::vector<float> scratch(size_t(cpu::attention_scratch_floats(c.head_dim, c.threads)));
    Pool pool(c.threads);
    cpu::DenseAttentionArgs args{q.data(), 3 * inner, kc.data(), vc.data(), capacity, c.n, c.pos0, T, c.heads,
                                 c.head_dim, scale, true, got.data(), scratch.data()};
    cpu::attention_dense(pool.pool, c.threads, args);
    INFO("heads=" << c.heads << " dh=" << c.head_dim << " n=" << c.n << " pos0=" << c.pos0);
    CHECK(relative_error(got.data(), want.data(), got.size()) <= kOpTolerance);
  }
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

TEST_CASE("attention op through a session: fused qkv, streaming cache, matches reference", "[ops][attention]") {
  const int heads = 3, dh = 8;
  const int64_t inner = heads * dh, rows = 64, n = 50;
  auto g = test::start_graph(rows, 3 * inner, 17);
  int32_t y = g.graph.add_value("y", fb::DType::F32, inner).value();
  convert::params::Attention p;
  p.heads = heads;
  p.head_dim = dh;
  p.scale = 0.3f;
  REQUIRE(g.graph.add_op(fb::OpCode::ATTENTION, "attn", {g.x}, {y}, {}, p).ok());
  tern_model* model = test::finish_and_load(g, y, "attention", n);
  auto ids = shuffled_ids(n, rows, 18);
  auto qkv = gather_rows(g, ids);  // [n, 3*inner]
  std::vector<float> k(size_t(n * inner)), v(size_t(n * inner)), want(size_t(n * inner));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t e = 0; e < inner; ++e) {
      k[t * inner + e] = qkv[t * 3 * inner + inner + e];
      v[t * inner + e] = qkv[t * 3 * inner + 2 * inner + e];
    }
  ref::attention_dense(qkv.data(), 3 * inner, k.data(), v.data(), inner, n, 0, n, heads, dh, 0.3f, true, want.data());
  auto got = run_graph(model, ids, inner, 2);
  CHECK(relative_error(got.data(), want.data(), got.size()) <= kOpTolerance);

  // The same sequence fed in uneven segments through the session's cache.
  tern_session* session = nullptr;
  REQUIRE(tern_session_create(model, nullptr, &session) == TERN_OK);
  std::vector<float> streamed(size_t(n * inner));
  for (int64_t s = 0, len = 1; s < n; s += len, len = len % 7 + 1) {
    len = std::min(len, n - s);
    REQUIRE(tern_session_append(session, ids.data() + s, len, streamed.data() + s * inner) == TERN_OK);
  }
  CHECK(relative_error(streamed.data(), want.data(), streamed.size()) <= kOpTolerance);
  tern_session_free(session);
  tern_model_free(model);
}
