// parallel_for over [0, range) in tiles, on the session's pthreadpool (inline when pool is null).
#pragma once

#include <pthreadpool.h>

#include <cstddef>

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

}  // namespace tern::cpu
