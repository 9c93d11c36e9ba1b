// SPDX-License-Identifier: MIT
#include "format/half.h"

#if defined(__F16C__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>  // AArch64 always has NEON and its float16 <-> float32 conversions (FCVTL, FCVTN)
#endif

namespace tern {

void halves_to_floats(const uint16_t* in, float* out, size_t b, size_t e) {
#if defined(__F16C__)
  for (; b + 8 <= e; b += 8) {
    _mm256_storeu_ps(out + b, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + b))));
  }
#elif defined(__aarch64__)
  for (; b + 8 <= e; b += 8) {
    const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(in + b));
    vst1q_f32(out + b, vcvt_f32_f16(vget_low_f16(h)));
    vst1q_f32(out + b + 4, vcvt_high_f32_f16(h));
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
#elif defined(__aarch64__)
  for (; b + 8 <= e; b += 8) {  // rounds as FPCR says: nearest even, what float_to_half does
    const float16x8_t h = vcvt_high_f16_f32(vcvt_f16_f32(vld1q_f32(in + b)), vld1q_f32(in + b + 4));
    vst1q_u16(out + b, vreinterpretq_u16_f16(h));
  }
#endif
  for (; b < e; ++b) out[b] = float_to_half(in[b]);
}

}  // namespace tern
