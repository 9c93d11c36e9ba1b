// SPDX-License-Identifier: MIT
// The arena planner (core/planner.h): place_buffers against a direct first-fit written here, on random lifetimes
// and sizes, and the time it takes on long chains of ops (a hidden benchmark: ./test_planner "[bench]").
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "core/planner.h"
#include "op_graph.h"

using tern::BufferUse;

namespace {

// The placement rule as documented, checked pair by pair: largest first (ties in index order), each at the lowest
// aligned offset clear of every placed buffer whose lifetime overlaps.
std::vector<int64_t> first_fit(const std::vector<BufferUse>& buffers) {
  auto rounded = [](uint64_t b) { return (b + tern::kArenaAlignment - 1) / tern::kArenaAlignment * tern::kArenaAlignment; };
  std::vector<int> order;
  for (size_t b = 0; b < buffers.size(); ++b)
    if (buffers[b].first >= 0) order.push_back(int(b));
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return rounded(buffers[a].bytes) > rounded(buffers[b].bytes); });
  std::vector<int64_t> offsets(buffers.size(), -1);
  std::vector<int> placed;
  for (int v : order) {
    const uint64_t size = rounded(buffers[v].bytes);
    uint64_t offset = 0;
    for (bool moved = true; moved;) {  // move past any overlapping placed buffer until none collides
      moved = false;
      for (int p : placed) {
        const bool same_time = buffers[p].first <= buffers[v].last && buffers[v].first <= buffers[p].last;
        const uint64_t b = uint64_t(offsets[p]), e = b + rounded(buffers[p].bytes);
        if (same_time && offset < e && b < offset + size) offset = e, moved = true;
      }
    }
    offsets[v] = int64_t(offset);
    placed.push_back(v);
  }
  return offsets;
}

}  // namespace

TEST_CASE("planner: place_buffers matches first fit on random lifetimes", "[planner]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int ops = 1 + int(rng() % 60);
    std::vector<BufferUse> buffers(1 + rng() % 80);
    for (BufferUse& b : buffers) {
      if (rng() % 8 == 0) continue;  // takes no place
      b.first = int(rng() % unsigned(ops));
      b.last = b.first + int(rng() % unsigned(rng() % 4 == 0 ? ops : 4));
      b.bytes = (rng() % 3 == 0) ? 64 * (1 + rng() % 4) : 1 + rng() % 5000;  // ties and odd sizes
    }
    const tern::ArenaPlan plan = tern::place_buffers(buffers);
    const std::vector<int64_t> expected = first_fit(buffers);
    INFO("trial " << trial);
    REQUIRE(plan.offsets == expected);
    uint64_t end = 0;
    for (size_t b = 0; b < buffers.size(); ++b)
      if (expected[b] >= 0) end = std::max(end, uint64_t(expected[b]) + (buffers[b].bytes + 63) / 64 * 64);
    CHECK(plan.bytes == end);
  }
}

TEST_CASE("planner: chains of 10k to 150k ops", "[.][bench]") {
  for (int n : {10'000, 50'000, 100'000, 150'000}) {
    // A chain: value i is written by op i and read by op i + 1; every tenth also by the op 50 later.
    std::vector<BufferUse> buffers(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) buffers[size_t(i)] = {uint64_t(4096), i, std::min(n - 1, i % 10 == 0 ? i + 50 : i + 1)};
    const auto start = std::chrono::steady_clock::now();
    const tern::ArenaPlan plan = tern::place_buffers(buffers);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("place_buffers: %6d buffers in %.3f s, arena %llu bytes\n", n, s, (unsigned long long)plan.bytes);
    CHECK(plan.bytes > 0);
  }
}

TEST_CASE("planner: session creation for models of 10k to 150k chained ops", "[.][bench]") {
  // At max_batch 1 no chain runs in blocks; at 4096 rows every candidate chain is judged (choose_row_chains).
  for (int n : {10'000, 50'000, 100'000, 150'000}) {
    // ids -> EMBEDDING x -> ADD(x, x) -> ADD(previous, x) -> ... : x lives through the whole chain.
    tern::test::OpGraph g = tern::test::start_graph(16, 8, 3);
    int32_t previous = g.x;
    for (int i = 0; i < n; ++i) {
      const int32_t sum = g.graph.add_value("sum" + std::to_string(i), tern::fb::DType::F32, 8).value();
      REQUIRE(g.graph.add_op(tern::fb::OpCode::ADD, "add" + std::to_string(i), {previous, g.x}, {sum}, {},
                             tern::fb::AddParamsT{}).ok());
      previous = sum;
    }
    tern_model* model = tern::test::finish_and_load(g, previous, "chain_" + std::to_string(n), 4096);
    for (int64_t batch : {int64_t(1), int64_t(4096)}) {
      const auto start = std::chrono::steady_clock::now();
      tern_session* s = tern::test::make_session(model, 1, 4096, batch);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      tern_memory_plan p{};
      REQUIRE(tern_session_memory(s, &p) == TERN_OK);
      std::printf("session creation: %6d ops, max_batch %4lld in %.3f s (%lld row chains)\n", n,
                  static_cast<long long>(batch), seconds, static_cast<long long>(p.row_chains));
      tern_session_free(s);
    }
    tern_model_free(model);
  }
}
