// SPDX-License-Identifier: MIT
// parallel_for over [0, range) in tiles, on the session's pthreadpool (inline when pool is null).
#pragma once

#include <pthreadpool.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace tern::cpu {

template <typename F>
void parallel_for(pthreadpool_t pool, size_t range, size_t tile, const F& fn) {  // fn(begin, end)
  if (pool == nullptr || range <= tile) {  // one tile: waking workers would cost more than the work
    if (range > 0) fn(size_t(0), range);
    return;
  }
  struct Ctx {
    const F* fn;
    size_t range;
  } ctx{&fn, range};
  auto task = [](void* p, size_t begin, size_t count) {
    auto* c = static_cast<Ctx*>(p);
    (*c->fn)(begin, begin + count);
  };
  pthreadpool_parallelize_1d_tile_1d(pool, task, &ctx, range, tile, PTHREADPOOL_FLAG_DISABLE_DENORMALS);
}

// Calls fn(slot, item) for item in [0, items), each slot (one per thread) pulling items in turn.
template <typename F>
void run_slots(pthreadpool_t pool, int threads, int64_t items, const F& fn) {
  if (items <= 0) return;
  const int slots = int(std::min<int64_t>(std::max(1, threads), items));
  std::atomic<int64_t> next{0};
  parallel_for(pool, size_t(slots), 1, [&](size_t b, size_t e) {
    for (size_t slot = b; slot < e; ++slot)
      for (int64_t item; (item = next.fetch_add(1)) < items;) fn(int(slot), item);
  });
}

}  // namespace tern::cpu
