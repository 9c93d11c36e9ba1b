#include "core/half.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace tern {

void halves_to_floats(const uint16_t* in, float* out, size_t b, size_t e) {
#if defined(__F16C__)
  for (; b + 8 <= e; b += 8) {
    _mm256_storeu_ps(out + b, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + b))));
  }
#endif
  for (; b < e; ++b) out[b] = half_to_float(in[b]);
}

void floats_to_halves(const float* in, uint16_t* out, size_t b, size_t e) {
#if defined(__F16C__)
  for (; b + 8 <= e; b += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + b), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + b), h);
  }
#endif
  for (; b < e; ++b) out[b] = float_to_half(in[b]);
}

}  // namespace tern
