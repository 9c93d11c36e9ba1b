#include "cpu/half_rows.h"

#include "core/half.h"
#include "cpu/parallel.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace tern::cpu {
namespace {

constexpr size_t kTile = 1 << 14;  // elements per work item

// [b, e) of the arrays; the F16C instructions where the build targets them (8 at a time), core/half.h otherwise.
void widen(const uint16_t* in, float* out, size_t b, size_t e) {
#if defined(__F16C__)
  for (; b + 8 <= e; b += 8) {
    _mm256_storeu_ps(out + b, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + b))));
  }
#endif
  for (; b < e; ++b) out[b] = half_to_float(in[b]);
}

void narrow(const float* in, uint16_t* out, size_t b, size_t e) {
#if defined(__F16C__)
  for (; b + 8 <= e; b += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + b), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + b), h);
  }
#endif
  for (; b < e; ++b) out[b] = float_to_half(in[b]);
}

}  // namespace

void halves_to_floats(pthreadpool_t pool, const uint16_t* in, int64_t count, float* out) {
  parallel_for(pool, size_t(count), kTile, [&](size_t b, size_t e) { widen(in, out, b, e); });
}

void floats_to_halves(pthreadpool_t pool, const float* in, int64_t count, uint16_t* out) {
  parallel_for(pool, size_t(count), kTile, [&](size_t b, size_t e) { narrow(in, out, b, e); });
}

void add_into_halves(pthreadpool_t pool, uint16_t* x, const float* y, int64_t count) {
  parallel_for(pool, size_t(count), kTile, [&](size_t b, size_t e) {
    float sum[256];
    for (size_t s = b; s < e; s += 256) {
      const size_t len = std::min<size_t>(256, e - s);
      widen(x + s, sum, 0, len);
      for (size_t i = 0; i < len; ++i) sum[i] += y[s + i];
      narrow(sum, x + s, 0, len);
    }
  });
}

}  // namespace tern::cpu
