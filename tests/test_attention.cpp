// SPDX-License-Identifier: MIT
// Attention for every pattern: the pattern's decomposition into a contiguous run and scattered keys, the CPU kernel
// (cpu/kernels.h) against the reference kernel, and the planner's streaming state, which keeps only the keys a
// pattern can still reach. Each kind through a session, streamed and on every backend, is a case of the op case
// table (support/op_cases.h, test_backend_ops).
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

std::vector<Kind> kinds() { return test::pattern_attention_kinds(); }

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

TEST_CASE("attention op: the planner's state stops growing once a bounded kind's reach is full", "[attention][streaming]") {
  // Dense and strided keep every key; fixed keeps its summaries, growing slower than n; the windowed kinds a ring.
  const int heads = 4, dh = 8;
  const int64_t n = 120;
  for (Kind k : kinds()) {
    k.pattern.heads = heads;
    test::AttentionModel m = test::attention_model(k, heads, dh, n, "attention");
    tern_session* s = test::make_session(m.model, 2);
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
    tern_model_free(m.model);
  }
}

TEST_CASE("attention op: generation with fewer heads than threads splits a long cache's keys across threads",
          "[attention][streaming]") {
  // One token per call after a prompt of 1500: with 1 or 2 heads on 4 threads each head's keys go to several threads
  // (split-K, cpu/attention.cpp) and their softmax sums are merged; fixed's summaries and strided's every l-th key go
  // to the first part. Every step against the reference kernel over the whole sequence.
  auto kind = [](const std::string& name, PatternKind k, convert::AttentionKind fb) {
    Kind out{name, AttentionPattern{}, fb};
    out.pattern.kind = k;
    return out;
  };
  std::vector<Kind> cases = {kind("dense", PatternKind::kDense, fb::DenseT{}),
                             kind("sliding w=700", PatternKind::kSliding, fb::SlidingWindowT{{}, 700}),
                             kind("strided l=600 merged", PatternKind::kStrided, fb::StridedT{{}, 600, fb::SparseHeads::MERGED}),
                             kind("fixed l=1024 c=8 merged", PatternKind::kFixed, fb::FixedT{{}, 1024, 8, fb::SparseHeads::MERGED})};
  cases[1].pattern.window = 700;
  cases[2].pattern.stride = 600;
  cases[3].pattern.block = 1024;
  cases[3].pattern.summary = 8;
  const int dh = 16;
  const int64_t prompt = 1500, steps = 4, n = prompt + steps;
  for (const Kind& k : cases) {
    for (int heads : {1, 2}) {
      INFO(k.name << ", " << heads << " head(s)");
      test::AttentionModel m = test::attention_model(k, heads, dh, n, "attention_split_keys");
      tern_session* s = test::make_session(m.model, 4, n, prompt);
      const int64_t width = int64_t(heads) * dh;
      std::vector<float> out(size_t(prompt * width));
      REQUIRE(tern_session_forward(s, m.ids.data(), prompt, out.data()) == TERN_OK);
      for (int64_t i = prompt; i < n; ++i) {
        REQUIRE(tern_session_append(s, m.ids.data() + i, 1, out.data()) == TERN_OK);
        CHECK(relative_error(out.data(), m.want.data() + i * width, size_t(width)) < kOpTolerance);
      }
      tern_session_free(s);
      tern_model_free(m.model);
    }
  }
}
