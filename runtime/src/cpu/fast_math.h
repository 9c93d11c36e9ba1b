// exp, erf and tanh from arithmetic only, so loops over them vectorise (the libm calls do not without -ffast-math);
// and the dot product the attention kernels share.
// Accuracy: exp ~2e-7 relative; erf 1.5e-7 absolute (Abramowitz & Stegun 7.1.26); tanh ~2e-7 absolute.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace tern::cpu {

// q · k with eight partial sums, so that the loop vectorises.
inline float dot(const float* q, const float* k, int dh) {
  float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int c = 0;
  for (; c + 8 <= dh; c += 8)
    for (int l = 0; l < 8; ++l) part[l] += q[c + l] * k[c + l];
  float sum = 0.0f;
  for (; c < dh; ++c) sum += q[c] * k[c];
  for (float p : part) sum += p;
  return sum;
}

inline float exp_approx(float x_in) {
  // Clamped so that 2^n below stays a normal float; NaN takes the low end here (converting NaN to int is undefined)
  // and is given back at the end, as std::exp would.
  const float x = x_in >= -87.3f ? std::min(x_in, 88.3f) : -87.3f;
  // round(x / ln 2) by adding and removing 1.5 * 2^23 (std::floor would stop the loop from vectorising)
  const float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
  const float r = (x - n * 0.693145752f) - n * 1.42860677e-6f;  // ln 2 split in two for exactness, |r| <= ln2/2
  const float p =
      1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
  const int32_t bits = (int32_t(n) + 127) << 23;  // 2^n
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return x_in == x_in ? p * scale : x_in;
}

inline float erf_approx(float x) {
  const float a = std::fabs(x);
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  const float poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  return std::copysign(1.0f - poly * exp_approx(-a * a), x);
}

inline float tanh_approx(float x) { return 1.0f - 2.0f / (exp_approx(2.0f * x) + 1.0f); }

}  // namespace tern::cpu
