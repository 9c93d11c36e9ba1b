// Attention for every pattern: the pattern's decomposition, the CPU kernel against the reference kernel, the
// session's streaming state (which keeps only the keys a pattern can still reach), and every kind with a shader on
// each backend against the reference and (on Vulkan) the CPU path, at sizes a software Vulkan device runs quickly.
#include <catch2/catch.hpp>
#include <random>
#include <set>

#include "attention_cases.h"
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

using Kind = test::AttentionKind;

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
  const int64_t inner = heads * dh, n = 120;
  for (Kind k : kinds()) {
    k.pattern.heads = heads;
    test::AttentionModel m = test::attention_model(k, heads, dh, n, "attention");
    tern_model* model = m.model;
    tern_session* s = test::make_session(model, 2);
    for (int64_t segment : {n, int64_t(1), int64_t(13)}) {
      std::vector<float> got = test::run_ids(s, m.ids, inner, segment);
      INFO(k.name << ", segment " << segment);
      CHECK(relative_error(got.data(), m.want.data(), got.size()) <= kOpTolerance);
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

TEST_CASE("attention kinds match the reference (and the CPU path), in one pass and streamed (CPU and Vulkan)",
          "[attention][streaming][vulkan]") {
  TERN_EACH_BACKEND(backend);
  const double tolerance = test::backend_tolerance(backend, kOpTolerance);
  const int64_t n = 70;
  for (const Kind& kind : test::backend_attention_kinds()) {
    // Split heads need an even count: a wide-head case with two heads for them.
    const std::pair<int, int> wide = kind.pattern.split ? std::pair{2, 32} : std::pair{1, 64};
    for (auto [heads, dh] : {std::pair{2, 8}, wide}) {
      test::AttentionModel m = test::attention_model(kind, heads, dh, n, "backend_attention");
      const int64_t inner = int64_t(heads) * dh;
      tern_session* s = test::make_session_on(backend, m.model, backend == TERN_BACKEND_CPU ? 2 : 1, n);
      tern_session* cpu = backend == TERN_BACKEND_CPU ? nullptr : test::make_session_on(TERN_BACKEND_CPU, m.model, 2, n);
      for (int64_t segment : {n, int64_t(1), int64_t(13)}) {
        auto got = test::run_ids(s, m.ids, inner, segment);
        const double vs_ref = relative_error(got.data(), m.want.data(), got.size());
        INFO(kind.name << ", heads " << heads << " x " << dh << ", segment " << segment << ": vs reference " << vs_ref);
        CHECK(vs_ref <= tolerance);
        if (cpu != nullptr) {
          auto base = test::run_ids(cpu, m.ids, inner, segment);
          const double vs_cpu = relative_error(got.data(), base.data(), got.size());
          INFO("vs CPU " << vs_cpu);
          CHECK(vs_cpu <= tolerance);
        }
      }
      if (cpu != nullptr) {
        // The device state holds what the CPU path holds: every key for dense, a ring for the windowed kinds.
        INFO(kind.name);
        test::check_state_matches(s, cpu);
        tern_session_free(cpu);
      }
      tern_session_free(s);
      tern_model_free(m.model);
    }
  }
  if (backend == TERN_BACKEND_VULKAN) CHECK(test::vulkan_validation_messages() == 0);
}
