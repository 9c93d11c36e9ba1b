#include "cpu/half_rows.h"

#include <algorithm>

#include "core/half.h"
#include "cpu/parallel.h"

namespace tern::cpu {
namespace {

constexpr size_t kTile = 1 << 14;  // elements per work item

}  // namespace

void halves_to_floats(pthreadpool_t pool, const uint16_t* in, int64_t count, float* out) {
  parallel_for(pool, size_t(count), kTile, [&](size_t b, size_t e) { tern::halves_to_floats(in, out, b, e); });
}

void floats_to_halves(pthreadpool_t pool, const float* in, int64_t count, uint16_t* out) {
  parallel_for(pool, size_t(count), kTile, [&](size_t b, size_t e) { tern::floats_to_halves(in, out, b, e); });
}

void add_into_halves(pthreadpool_t pool, uint16_t* x, const float* y, int64_t count) {
  parallel_for(pool, size_t(count), kTile, [&](size_t b, size_t e) {
    float sum[256];
    for (size_t s = b; s < e; s += 256) {
      const size_t len = std::min<size_t>(256, e - s);
      tern::halves_to_floats(x + s, sum, 0, len);
      for (size_t i = 0; i < len; ++i) sum[i] += y[s + i];
      tern::floats_to_halves(sum, x + s, 0, len);
    }
  });
}

}  // namespace tern::cpu
