// Attention for every pattern: the pattern's decomposition, the CPU kernel against the reference kernel, and the
// session's streaming state (which keeps only the keys a pattern can still reach).
#include <catch2/catch.hpp>
#include <random>
#include <set>

#include "cpu/kernels.h"
#include "op_graph.h"
#include "ops/attention_pattern.h"
#include "ops/reference.h"
#include "test_support.h"

using namespace tern;
using tern::test::random_floats;
using tern::test::relative_error;

namespace {

constexpr double kOpTolerance = 1e-5;

struct Kind {
  std::string name;
  AttentionPattern pattern;          // heads filled in by the test
  convert::params::AttentionKind fb;  // the same kind as the converter writes it
};

std::vector<Kind> kinds() {
  auto pattern = [](PatternKind k) {
    AttentionPattern p;
    p.kind = k;
    return p;
  };
  std::vector<Kind> out;
  out.push_back({"dense", pattern(PatternKind::kDense), convert::params::DenseAttention{}});
  for (int w : {1, 5, 64}) {
    Kind k{"sliding w=" + std::to_string(w), pattern(PatternKind::kSliding), convert::params::SlidingWindow{w}};
    k.pattern.window = w;
    out.push_back(k);
  }
  for (auto [c, b] : {std::pair{8, 1}, std::pair{5, 0}, std::pair{16, 2}}) {
    Kind k{"chunked C=" + std::to_string(c) + " before=" + std::to_string(b), pattern(PatternKind::kChunked),
           convert::params::ChunkedLocal{c, b, 1}};
    k.pattern.chunk = c;
    k.pattern.chunks_before = b;
    out.push_back(k);
  }
  for (bool split : {false, true}) {
    for (int l : {1, 4, 7}) {
      Kind k{std::string("strided l=") + std::to_string(l) + (split ? " split" : " merged"), pattern(PatternKind::kStrided),
             convert::params::Strided{l, split}};
      k.pattern.stride = l;
      k.pattern.split = split;
      out.push_back(k);
    }
    for (auto [l, c] : {std::pair{8, 2}, std::pair{5, 5}, std::pair{16, 1}}) {
      Kind k{"fixed l=" + std::to_string(l) + " c=" + std::to_string(c) + (split ? " split" : " merged"),
             pattern(PatternKind::kFixed), convert::params::Fixed{l, c, split}};
      k.pattern.block = l;
      k.pattern.summary = c;
      k.pattern.split = split;
      out.push_back(k);
    }
  }
  return out;
}

struct Pool {
  explicit Pool(int threads) : pool(pthreadpool_create(size_t(threads))) {}
  ~Pool() { pthreadpool_destroy(pool); }
  pthreadpool_t pool;
};

}  // namespace

TEST_CASE("attention patterns: the contiguous run plus scattered keys are exactly the visible keys", "[attention]") {
  for (Kind k : kinds()) {
    k.pattern.heads = 4;
    for (int h = 0; h < 4; ++h) {
      for (int64_t i = 0; i < 150; ++i) {
        std::set<int64_t> want, got;
        for (int64_t j = 0; j <= i; ++j)
          if (k.pattern.visible(h, i, j)) want.insert(j);
        const int64_t lo = k.pattern.local_lo(h, i);
        for (int64_t j = lo; j <= i; ++j) got.insert(j);
        int64_t previous_end = -1;
        k.pattern.scattered(h, i, lo, [&](int64_t b, int64_t e) {
          CHECK(b >= previous_end);  // ascending, disjoint
          CHECK(e <= lo);
          previous_end = e;
          for (int64_t j = b; j < e; ++j) got.insert(j);
        });
        INFO(k.name << " head " << h << " query " << i);
        REQUIRE(got == want);
        REQUIRE(!want.empty());
        if (i > 0) CHECK(k.pattern.local_lo(h, i) >= k.pattern.local_lo(h, i - 1));
      }
    }
  }
}

TEST_CASE("attention: CPU kernel matches the reference for every pattern", "[attention]") {
  const int heads = 4, dh = 16;
  const int64_t inner = heads * dh;
  for (Kind k : kinds()) {
    k.pattern.heads = heads;
    for (int64_t n : {1, 37, 150}) {
      auto qkv = random_floats(size_t(n * 3 * inner), uint32_t(n), -2, 2);
      std::vector<float> k_rows(size_t(n * inner)), v_rows(size_t(n * inner));
      for (int64_t t = 0; t < n; ++t)
        for (int64_t e = 0; e < inner; ++e) {
          k_rows[t * inner + e] = qkv[t * 3 * inner + inner + e];
          v_rows[t * inner + e] = qkv[t * 3 * inner + 2 * inner + e];
        }
      std::vector<float> want(size_t(n * inner)), got(size_t(n * inner));
      ref::attention(qkv.data(), 3 * inner, k_rows.data(), v_rows.data(), inner, n, 0, heads, dh, 0.25f, k.pattern,
                     want.data());
      for (int threads : {1, 2}) {
        std::vector<float> scratch(size_t(cpu::attention_scratch_floats(dh, threads)));
        Pool pool(threads);
        cpu::attention(pool.pool, threads, {&k.pattern, qkv.data(), n, heads, dh, 0.25f, got.data(), scratch.data()});
        INFO(k.name << ", n " << n << ", threads " << threads);
        CHECK(relative_error(got.data(), want.data(), got.size()) <= kOpTolerance);
      }
    }
  }
}

TEST_CASE("attention op in a session: streaming in segments matches one full pass, state stays bounded", "[attention][streaming]") {
  const int heads = 4, dh = 8;
  const int64_t inner = heads * dh, n = 120, rows = 64;
  for (Kind k : kinds()) {
    k.pattern.heads = heads;
    auto g = test::start_graph(rows, 3 * inner, 21);
    int32_t y = g.graph.add_value("y", fb::DType::F32, inner).value();
    convert::params::Attention p;
    p.heads = heads;
    p.head_dim = dh;
    p.scale = 0.4f;
    p.kind = k.fb;
    REQUIRE(g.graph.add_op(fb::OpCode::ATTENTION, "attn", {g.x}, {y}, {}, p).ok());
    tern_model* model = test::finish_and_load(g, y, "attention", n);
    std::mt19937 rng(22);
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (auto& id : ids) id = int32_t(rng() % rows);
    std::vector<float> qkv(size_t(n * 3 * inner));
    ref::embedding(g.table.data(), 3 * inner, ids.data(), n, qkv.data());
    std::vector<float> k_rows(size_t(n * inner)), v_rows(size_t(n * inner)), want(size_t(n * inner));
    for (int64_t t = 0; t < n; ++t)
      for (int64_t e = 0; e < inner; ++e) {
        k_rows[t * inner + e] = qkv[t * 3 * inner + inner + e];
        v_rows[t * inner + e] = qkv[t * 3 * inner + 2 * inner + e];
      }
    ref::attention(qkv.data(), 3 * inner, k_rows.data(), v_rows.data(), inner, n, 0, heads, dh, 0.4f, k.pattern, want.data());

    tern_session_options so;
    tern_session_options_init(&so);
    so.threads = 2;
    tern_session* s = nullptr;
    REQUIRE(tern_session_create(model, &so, &s) == TERN_OK);
    for (int64_t segment : {n, int64_t(1), int64_t(13)}) {
      REQUIRE(tern_session_reset(s) == TERN_OK);
      std::vector<float> got(size_t(n * inner));
      for (int64_t pos = 0; pos < n; pos += segment) {
        int64_t len = std::min(segment, n - pos);
        REQUIRE(tern_session_append(s, ids.data() + pos, len, got.data() + pos * inner) == TERN_OK);
      }
      INFO(k.name << ", segment " << segment);
      CHECK(relative_error(got.data(), want.data(), got.size()) <= kOpTolerance);
    }
    // Planner: bounded kinds stop growing once their reach is full; dense and strided keep every key.
    tern_memory_plan at_n{}, at_10n{};
    REQUIRE(tern_session_plan(s, n, &at_n) == TERN_OK);
    REQUIRE(tern_session_plan(s, 10 * n, &at_10n) == TERN_OK);
    INFO(k.name);
    if (k.pattern.keeps_all_keys()) {
      CHECK(at_10n.state_bytes == 10 * at_n.state_bytes);
    } else if (k.pattern.kind == PatternKind::kFixed) {
      CHECK(at_10n.state_bytes < 10 * at_n.state_bytes);
    } else {
      CHECK(at_10n.state_bytes == at_n.state_bytes);
    }
    tern_session_free(s);
    tern_model_free(model);
  }
}
