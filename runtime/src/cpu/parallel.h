// parallel_for over [0, range) in tiles, on the session's pthreadpool (inline when pool is null).
#pragma once

#include <pthreadpool.h>

#include <cstddef>

namespace tern::cpu {

template <typename F>
void parallel_for(pthreadpool_t pool, size_t range, size_t tile, const F& fn) {  // fn(begin, end)
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

// fn(thread_index_free_slot, i, j) style 2-D loops are written with parallelize_2d directly where needed.

}  // namespace tern::cpu
