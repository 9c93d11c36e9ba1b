// SPDX-License-Identifier: MIT
#include "cpu/half_rows.h"

#include "cpu/isa.h"
#include "cpu/parallel.h"

namespace tern::cpu {
namespace {

constexpr size_t kTile = 1 << 14;  // elements per work item

}  // namespace

void halves_to_floats(pthreadpool_t pool, const uint16_t* in, int64_t count, float* out) {
  const IsaKernels& k = isa();
  parallel_for(pool, size_t(count), kTile, [&](size_t b, size_t e) {
    k.halves_to_floats(in + b, int64_t(e - b), out + b);
  });
}

void floats_to_halves(pthreadpool_t pool, const float* in, int64_t count, uint16_t* out) {
  const IsaKernels& k = isa();
  parallel_for(pool, size_t(count), kTile, [&](size_t b, size_t e) {
    k.floats_to_halves(in + b, int64_t(e - b), out + b);
  });
}

void add_into_halves(pthreadpool_t pool, uint16_t* x, const float* y, int64_t count) {
  const IsaKernels& k = isa();
  parallel_for(pool, size_t(count), kTile, [&](size_t b, size_t e) {
    k.add_into_halves(x + b, y + b, int64_t(e - b));
  });
}

}  // namespace tern::cpu
