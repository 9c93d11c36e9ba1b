// SPDX-License-Identifier: MIT
// Bounded streaming: 100,000 tokens through a sliding-window session, one at a time. The planner's state does not
// grow once the window is full, the session allocates nothing while it runs, and the process does not grow.
#include <sys/resource.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <new>
#include <random>

#include "op_graph.h"
#include "test_support.h"

// Counts every C++ allocation in this test executable.
static std::atomic<uint64_t> g_allocations{0};
void* operator new(size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}
// The nothrow forms too (std::stable_sort's buffer uses them): otherwise a sanitizer's own operator new would
// allocate what the free() above releases.
void* operator new(size_t size, const std::nothrow_t&) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size ? size : 1);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace {

uint64_t peak_rss_kib() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return uint64_t(usage.ru_maxrss);
}

}  // namespace

using namespace tern;

TEST_CASE("streaming 100,000 tokens through sliding-window attention keeps state and memory constant", "[streaming]") {
  const int heads = 4, dh = 16, window = 256;
  const int64_t inner = heads * dh, rows = 256, total = 100000;
  // ids -> embedding [3*inner] -> sinusoidal positions (any length) -> sliding attention -> output.
  auto g = test::start_graph(rows, 3 * inner, 31);
  int32_t pos = g.graph.add_value("pos", fb::DType::F32, 3 * inner).value();
  REQUIRE(g.graph.add_op(fb::OpCode::POSITION, "pos", {g.x}, {pos}, {-1},
                         fb::PositionParamsT{{}, fb::PositionKind::SINUSOIDAL, 0}).ok());
  int32_t y = g.graph.add_value("y", fb::DType::F32, inner).value();
  REQUIRE(g.graph.add_op(fb::OpCode::ATTENTION, "attn", {pos}, {y}, {},
                         convert::attention_params(heads, dh, 0.25f, fb::SlidingWindowT{{}, window}))
              .ok());
  tern_model* model = test::finish_and_load(g, y, "streaming", 1024);

  tern_session_options so;
  tern_session_options_init(&so);
  so.threads = 1;
  so.max_tokens = 1 << 20;  // far more than any dense cache could hold; the window needs window - 1 keys
  tern_session* s = nullptr;
  REQUIRE(tern_session_create(model, &so, &s) == TERN_OK);

  tern_memory_plan allocated{};
  REQUIRE(tern_session_memory(s, &allocated) == TERN_OK);
  const uint64_t key_bytes = 2ull * heads * dh * sizeof(float);  // one key and one value per head
  CHECK(allocated.state_bytes == key_bytes * (window - 1));
  CHECK(allocated.n_tokens == 1024);  // a call is at most one context by default

  // Planner: state grows until the window is full, then never.
  uint64_t previous = 0;
  for (int64_t n : {int64_t(1), int64_t(100), int64_t(window - 1), int64_t(window), int64_t(10000), total}) {
    tern_memory_plan plan{};
    REQUIRE(tern_session_plan(s, n, &plan) == TERN_OK);
    CHECK(plan.state_bytes >= previous);
    CHECK(plan.state_bytes <= allocated.state_bytes);
    if (n >= window) CHECK(plan.state_bytes == key_bytes * (window - 1));
    previous = plan.state_bytes;
  }

  std::vector<float> out(static_cast<size_t>(inner));
  std::mt19937 rng(32);
  uint64_t rss_after_warmup = 0, allocations_after_warmup = 0;
  double checksum = 0;
  for (int64_t t = 0; t < total; ++t) {
    int32_t id = int32_t(rng() % rows);
    tern_status st = tern_session_append(s, &id, 1, out.data());
    if (st != TERN_OK) FAIL("append failed at token " << t << ": " << tern_session_last_error(s));
    checksum += out[size_t(t % inner)];
    if (t == 2 * window) {
      rss_after_warmup = peak_rss_kib();
      allocations_after_warmup = g_allocations.load();
    }
  }
  CHECK(std::isfinite(checksum));
  CHECK(tern_session_position(s) == total);
  CHECK(allocations_after_warmup > 0);                        // the counter sees allocations...
  CHECK(g_allocations.load() == allocations_after_warmup);  // ...and none happened inside a run
  // Within 1 MiB: no growth with tokens (the allocation count holds under AddressSanitizer too, resident memory not).
  if (test::kRssIsTern) CHECK(peak_rss_kib() <= rss_after_warmup + 1024);
  tern_memory_plan after{};
  REQUIRE(tern_session_memory(s, &after) == TERN_OK);
  CHECK(after.state_bytes == allocated.state_bytes);
  CHECK(after.arena_bytes == allocated.arena_bytes);
  tern_session_free(s);
  tern_model_free(model);
}
