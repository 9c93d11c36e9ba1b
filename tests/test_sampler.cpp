// SPDX-License-Identifier: MIT
// tern_sampler: each step against an independent computation over many seeded draws, reproducibility, validation,
// and no allocation after the first call.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <new>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/sampler.h"
#include "tern/tern.h"

// Counts every C++ allocation in this test executable.
static std::atomic<uint64_t> g_allocations{0};
void* operator new(size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}
void* operator new(size_t size, const std::nothrow_t&) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size ? size : 1);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace {

std::vector<float> random_logits(size_t vocab, uint32_t seed, float scale = 4.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> l(vocab);
  for (float& x : l) x = dist(rng);
  return l;
}

tern_sampler* make(const tern_sampler_options& o) {
  tern_sampler* s = nullptr;
  REQUIRE(tern_sampler_create(&o, &s) == TERN_OK);
  return s;
}

tern_sampler_options options(float temperature, int32_t top_k = 0, float top_p = 1.0f, float min_p = 0.0f,
                             uint64_t seed = 1) {
  tern_sampler_options o;
  tern_sampler_options_init(&o);
  o.temperature = temperature;
  o.top_k = top_k;
  o.top_p = top_p;
  o.min_p = min_p;
  o.seed = seed;
  return o;
}

int32_t draw(tern_sampler* s, const std::vector<float>& l, const std::vector<int32_t>& history = {}) {
  int32_t t = -1;
  REQUIRE(tern_sampler_sample(s, l.data(), int64_t(l.size()), history.empty() ? nullptr : history.data(),
                              int64_t(history.size()), &t) == TERN_OK);
  return t;
}

// The probabilities exp((l - max) / T), normalised, computed here independently of the library.
std::vector<double> softmax(const std::vector<float>& l, const std::vector<int32_t>& ids, double t) {
  double mx = -INFINITY;
  for (int32_t i : ids) mx = std::max(mx, double(l[size_t(i)]));
  std::vector<double> p;
  double sum = 0;
  for (int32_t i : ids) sum += p.emplace_back(std::exp((double(l[size_t(i)]) - mx) / t));
  for (double& x : p) x /= sum;
  return p;
}

// Ids by logit descending, ties to the lower id.
std::vector<int32_t> ranked(const std::vector<float>& l) {
  std::vector<int32_t> ids(l.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return l[size_t(a)] > l[size_t(b)]; });
  return ids;
}

}  // namespace

TEST_CASE("sampler: temperature 0 is the argmax, ties to the lowest id, and does not advance the PRNG", "[sampler]") {
  tern_sampler* greedy = make(options(0.0f));
  for (uint32_t seed = 0; seed < 50; ++seed) {
    std::vector<float> l = random_logits(300, seed);
    const int32_t want = int32_t(std::max_element(l.begin(), l.end()) - l.begin());  // first of the largest
    CHECK(draw(greedy, l) == want);
  }
  std::vector<float> tied(10, 1.0f);
  tied[7] = 3.0f;
  tied[3] = 3.0f;
  CHECK(draw(greedy, tied) == 3);
  tied[3] = -3.0f;
  CHECK(draw(greedy, tied) == 7);
  tern_sampler_free(greedy);
}

TEST_CASE("sampler: top-k never leaves the k best, and every one of them is drawn", "[sampler]") {
  for (int32_t k : {1, 3, 10}) {
    tern_sampler* s = make(options(1.5f, k, 1.0f, 0.0f, 1234 + uint64_t(k)));
    std::set<int32_t> drawn_all;
    for (uint32_t row = 0; row < 20; ++row) {
      std::vector<float> l = random_logits(200, 100 + row, 0.5f);  // flat: the k best are all likely
      const std::vector<int32_t> order = ranked(l);
      const std::set<int32_t> best(order.begin(), order.begin() + k);
      std::set<int32_t> drawn;
      for (int i = 0; i < 200; ++i) {
        const int32_t t = draw(s, l);
        INFO("k " << k << ", row " << row << ", token " << t);
        REQUIRE(best.count(t) == 1);
        drawn.insert(t);
      }
      CHECK(drawn.size() == best.size());  // k is not cut further
    }
    tern_sampler_free(s);
  }
  // Ties at the k-th place go to the lower ids.
  tern_sampler* s = make(options(1.0f, 2));
  std::vector<float> l = {0.0f, 5.0f, 1.0f, 5.0f, 5.0f, 1.0f};
  for (int i = 0; i < 100; ++i) {
    const int32_t t = draw(s, l);
    REQUIRE((t == 1 || t == 3));
  }
  tern_sampler_free(s);
}

TEST_CASE("sampler: top-p keeps the smallest set holding the stated mass, drawn in proportion", "[sampler]") {
  const double t = 0.9;
  for (float top_p : {0.3f, 0.6f, 0.9f}) {
    std::vector<float> l = random_logits(16, 7, 0.4f);
    // Independent nucleus: by probability descending (ties to the lower id), the fewest reaching top_p.
    const std::vector<int32_t> order = ranked(l);
    const std::vector<double> p = softmax(l, order, t);
    std::vector<int32_t> nucleus;
    double mass = 0;
    for (size_t i = 0; i < order.size() && mass < top_p; ++i) {
      nucleus.push_back(order[i]);
      mass += p[i];
    }
    REQUIRE(nucleus.size() >= 2);
    REQUIRE(nucleus.size() < order.size());
    tern_sampler* s = make(options(float(t), 0, top_p, 0.0f, 99));
    std::map<int32_t, int> counts;
    const int draws = 20000;
    for (int i = 0; i < draws; ++i) counts[draw(s, l)]++;
    INFO("top_p " << top_p << ", nucleus of " << nucleus.size());
    CHECK(counts.size() == nucleus.size());
    for (size_t i = 0; i < nucleus.size(); ++i) {
      const double want = p[i] / mass;  // renormalised over the nucleus
      const double got = double(counts[nucleus[i]]) / draws;
      INFO("token " << nucleus[i] << ": " << got << " vs " << want);
      CHECK(std::fabs(got - want) < 4.0 * std::sqrt(want * (1 - want) / draws) + 1e-3);
    }
    tern_sampler_free(s);
  }
}

TEST_CASE("sampler: min-p keeps the tokens at least min_p times as likely as the best", "[sampler]") {
  std::vector<float> l = random_logits(40, 11, 1.5f);
  const double t = 1.2;
  std::vector<int32_t> all(l.size());
  std::iota(all.begin(), all.end(), 0);
  const std::vector<double> p = softmax(l, all, t);
  const double p_max = *std::max_element(p.begin(), p.end());
  for (float min_p : {0.05f, 0.3f, 0.8f}) {
    std::set<int32_t> want;
    for (size_t i = 0; i < p.size(); ++i) {
      if (p[i] >= min_p * p_max) want.insert(int32_t(i));
    }
    tern_sampler* s = make(options(float(t), 0, 1.0f, min_p, 5));
    std::set<int32_t> drawn;
    for (int i = 0; i < 20000; ++i) {
      const int32_t tok = draw(s, l);
      INFO("min_p " << min_p << ", token " << tok);
      REQUIRE(want.count(tok) == 1);
      drawn.insert(tok);
    }
    CHECK(drawn == want);
    tern_sampler_free(s);
  }
}

TEST_CASE("sampler: repetition penalty changes exactly the penalised ids", "[sampler]") {
  std::vector<float> l = random_logits(50, 3);
  l[4] = 2.0f;
  l[9] = -2.0f;
  l[30] = 0.0f;
  // History: 4 twice (penalised once), 9, 30; 17 only before the last 5 tokens.
  const std::vector<int32_t> history = {17, 4, 9, 4, 30, 9};
  std::vector<float> out = l;
  std::vector<uint8_t> marks(l.size(), 0);
  REQUIRE(tern::apply_repetition_penalty(out.data(), int64_t(l.size()), history.data(), int64_t(history.size()), 5, 2.0f,
                                         marks.data())
              .ok());
  for (size_t i = 0; i < l.size(); ++i) {
    INFO("id " << i);
    if (i == 4) CHECK(out[i] == 1.0f);          // positive: divided
    else if (i == 9) CHECK(out[i] == -4.0f);    // negative: multiplied
    else if (i == 30) CHECK(out[i] == 0.0f);    // zero stays zero
    else CHECK(out[i] == l[i]);                 // 17 is outside the last 5; every other id untouched
  }
  CHECK(std::count(marks.begin(), marks.end(), 1) == 0);
  // last_n 0: the whole history, 17 included.
  out = l;
  REQUIRE(tern::apply_repetition_penalty(out.data(), int64_t(l.size()), history.data(), int64_t(history.size()), 0, 2.0f,
                                         marks.data())
              .ok());
  CHECK(out[17] == (l[17] > 0 ? l[17] / 2.0f : l[17] * 2.0f));
  CHECK(out[4] == 1.0f);

  // Through the C API: greedy picks the best logit until the penalty pushes it below the second.
  std::vector<float> two = {0.0f, 3.0f, 2.0f, -1.0f};
  tern_sampler_options o = options(0.0f);
  o.repetition_penalty = 2.0f;
  tern_sampler* s = make(o);
  CHECK(draw(s, two) == 1);
  CHECK(draw(s, two, {1}) == 2);       // 3 / 2 = 1.5 < 2
  CHECK(draw(s, two, {1, 2}) == 1);    // 1.5 vs 1
  o.repetition_last_n = 1;
  tern_sampler* last1 = make(o);
  CHECK(draw(last1, two, {1, 2}) == 1);  // only 2 is looked at: 3 vs 1
  CHECK(draw(last1, two, {2, 1}) == 2);
  tern_sampler_free(last1);
  tern_sampler_free(s);
}

TEST_CASE("sampler: a penalty that would overflow a logit saturates it, and a token in the vocabulary comes back", "[sampler]") {
  // 30 / 1e-40 and -30 * 1e38 are past float's range: the penalised logits saturate at +-FLT_MAX, never +-inf.
  const float big = std::numeric_limits<float>::max();
  std::vector<float> l = {30.0f, -30.0f, 1.0f, -std::numeric_limits<float>::infinity()};
  const std::vector<int32_t> history = {0, 1, 3};
  std::vector<uint8_t> marks(l.size(), 0);
  std::vector<float> out = l;
  REQUIRE(tern::apply_repetition_penalty(out.data(), 4, history.data(), 3, 0, 1e-40f, marks.data()).ok());
  CHECK(out[0] == big);
  CHECK(out[1] == -30.0f * 1e-40f);
  CHECK(out[3] == -std::numeric_limits<float>::infinity());  // a masked logit stays masked
  out = l;
  REQUIRE(tern::apply_repetition_penalty(out.data(), 4, history.data(), 3, 0, 1e38f, marks.data()).ok());
  CHECK(out[0] == 30.0f / 1e38f);
  CHECK(out[1] == -big);

  // Through the C API, at every temperature and cut: a valid id and TERN_OK, the penalised best token first.
  for (float penalty : {1e-40f, 1e38f}) {
    for (float temperature : {0.0f, 1.0f, 1e-30f, 100.0f}) {
      for (float top_p : {1.0f, 0.5f}) {
        INFO("penalty " << penalty << ", temperature " << temperature << ", top_p " << top_p);
        tern_sampler_options o = options(temperature, 0, top_p, 0.1f, 7);
        o.repetition_penalty = penalty;
        tern_sampler* s = make(o);
        for (int i = 0; i < 20; ++i) {
          const int32_t t = draw(s, l, history);
          CHECK((t >= 0 && t < 3));  // never the masked id 3
          if (penalty < 1.0f) CHECK(t == 0);  // FLT_MAX: every other token has probability 0
        }
        tern_sampler_free(s);
      }
    }
  }
}

TEST_CASE("sampler: the same seed gives the same tokens, other seeds differ, set_seed restarts", "[sampler]") {
  const std::vector<float> l = random_logits(256, 21, 1.0f);
  auto run = [&](tern_sampler* s) {
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) out.push_back(draw(s, l, out));
    return out;
  };
  tern_sampler_options o = options(1.0f, 40, 0.95f, 0.01f, 7);
  o.repetition_penalty = 1.3f;
  tern_sampler *a = make(o), *b = make(o);
  o.seed = 8;
  tern_sampler* c = make(o);
  const std::vector<int32_t> ta = run(a);
  CHECK(ta == run(b));
  CHECK(ta != run(c));
  REQUIRE(tern_sampler_set_seed(a, 7) == TERN_OK);
  CHECK(run(a) == ta);
  // The sequence is the library's own (xoshiro256** from splitmix64, 53-bit doubles), pinned to values computed by an
  // independent implementation of the published algorithms (splitmix64(0) gives 0xe220a8397b1dcdaf), so that no platform,
  // compiler or later change moves it.
  tern::Xoshiro256 rng(7);
  CHECK(rng.next() == 0xb358faf74ef9765aull);
  CHECK(rng.next() == 0x475c3d964f482cd2ull);
  tern::Xoshiro256 zero(0);
  const double u = zero.uniform();
  CHECK(u >= 0.0);
  CHECK(u < 1.0);
  CHECK(u == double(tern::Xoshiro256(0).next() >> 11) / 9007199254740992.0);
  tern_sampler_free(a);
  tern_sampler_free(b);
  tern_sampler_free(c);
}

TEST_CASE("sampler: options are checked field by field, and struct_size by the ABI rule", "[sampler]") {
  struct Bad {
    const char* field;
    void (*set)(tern_sampler_options*);
  };
  const Bad bad[] = {
      {"temperature", [](tern_sampler_options* o) { o->temperature = -0.5f; }},
      {"temperature", [](tern_sampler_options* o) { o->temperature = NAN; }},
      {"temperature", [](tern_sampler_options* o) { o->temperature = INFINITY; }},
      {"top_k", [](tern_sampler_options* o) { o->top_k = -1; }},
      {"top_p", [](tern_sampler_options* o) { o->top_p = 0.0f; }},
      {"top_p", [](tern_sampler_options* o) { o->top_p = 1.5f; }},
      {"top_p", [](tern_sampler_options* o) { o->top_p = NAN; }},
      {"min_p", [](tern_sampler_options* o) { o->min_p = -0.1f; }},
      {"min_p", [](tern_sampler_options* o) { o->min_p = 2.0f; }},
      {"min_p", [](tern_sampler_options* o) { o->min_p = NAN; }},
      {"repetition_penalty", [](tern_sampler_options* o) { o->repetition_penalty = 0.0f; }},
      {"repetition_penalty", [](tern_sampler_options* o) { o->repetition_penalty = NAN; }},
      {"repetition_last_n", [](tern_sampler_options* o) { o->repetition_last_n = -1; }},
  };
  for (const Bad& b : bad) {
    tern_sampler_options o;
    tern_sampler_options_init(&o);
    b.set(&o);
    tern_sampler* s = reinterpret_cast<tern_sampler*>(&o);  // must be set to NULL on failure
    INFO(b.field);
    CHECK(tern_sampler_create(&o, &s) == TERN_INVALID_ARGUMENT);
    CHECK(s == nullptr);
    CHECK_THAT(std::string(tern_last_error()), Catch::Contains(std::string("tern_sampler_options.") + b.field));
  }
  tern_sampler_options o;
  tern_sampler_options_init(&o);
  CHECK(o.struct_size == sizeof(tern_sampler_options));
  CHECK(o.temperature == 1.0f);
  CHECK(o.top_k == 0);
  CHECK(o.top_p == 1.0f);
  CHECK(o.min_p == 0.0f);
  CHECK(o.repetition_penalty == 1.0f);
  CHECK(o.repetition_last_n == 64);
  tern_sampler* s = nullptr;
  o.struct_size = 0;
  CHECK(tern_sampler_create(&o, &s) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_last_error()), Catch::Contains("uninitialised"));
  o.struct_size = sizeof(tern_sampler_options) + 8;
  CHECK(tern_sampler_create(&o, &s) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_last_error()), Catch::Contains("newer"));
  // An older, shorter struct: the fields past it take their defaults (here an invalid top_k past the end is unread).
  tern_sampler_options_init(&o);
  o.temperature = 0.0f;
  o.top_k = -5;
  o.struct_size = offsetof(tern_sampler_options, top_k);
  REQUIRE(tern_sampler_create(&o, &s) == TERN_OK);
  const std::vector<float> l = {1.0f, 4.0f, 2.0f};
  CHECK(draw(s, l) == 1);  // temperature 0 was read
  tern_sampler_free(s);
  REQUIRE(tern_sampler_create(nullptr, &s) == TERN_OK);  // NULL: the defaults
  int32_t t = -7;
  CHECK(tern_sampler_sample(s, nullptr, 3, nullptr, 0, &t) == TERN_INVALID_ARGUMENT);
  CHECK(tern_sampler_sample(s, l.data(), 0, nullptr, 0, &t) == TERN_INVALID_ARGUMENT);
  CHECK(tern_sampler_sample(s, l.data(), 3, nullptr, 2, &t) == TERN_INVALID_ARGUMENT);
  const std::vector<int32_t> outside = {0, 3};
  CHECK(tern_sampler_sample(s, l.data(), 3, outside.data(), 2, &t) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_last_error()), Catch::Contains("history[1] = 3"));
  const std::vector<float> nan = {1.0f, NAN, 2.0f};
  CHECK(tern_sampler_sample(s, nan.data(), 3, nullptr, 0, &t) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_last_error()), Catch::Contains("logits[1] is nan"));
  const std::vector<float> none = {-INFINITY, -INFINITY};
  CHECK(tern_sampler_sample(s, none.data(), 2, nullptr, 0, &t) == TERN_INVALID_ARGUMENT);
  CHECK(t == -7);  // left alone on errors
  const std::vector<float> masked = {-INFINITY, 0.5f, -INFINITY};
  for (int i = 0; i < 20; ++i) CHECK(draw(s, masked) == 1);
  CHECK(tern_sampler_set_seed(nullptr, 1) == TERN_INVALID_ARGUMENT);
  tern_sampler_free(s);
  tern_sampler_free(nullptr);
}

TEST_CASE("sampler: allocates nothing after the first call for a vocab", "[sampler]") {
  tern_sampler_options o = options(0.8f, 50, 0.9f, 0.02f, 3);
  o.repetition_penalty = 1.2f;
  tern_sampler* s = make(o);
  const std::vector<float> l = random_logits(5000, 4);
  std::vector<int32_t> history(100);
  for (size_t i = 0; i < history.size(); ++i) history[i] = int32_t(i * 37 % 5000);
  int32_t t = -1;
  REQUIRE(tern_sampler_sample(s, l.data(), 5000, history.data(), 100, &t) == TERN_OK);
  const uint64_t before = g_allocations.load();
  for (int i = 0; i < 100; ++i) REQUIRE(tern_sampler_sample(s, l.data(), 5000, history.data(), 100, &t) == TERN_OK);
  CHECK(g_allocations.load() == before);
  tern_sampler_free(s);
}
