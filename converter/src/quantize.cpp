// SPDX-License-Identifier: MIT
#include "quantize.h"

#include <cmath>
#include <string>

#include "format/half.h"

namespace tern::convert {

Status quantize_f16(const float* w, int64_t count, uint16_t* out) {
  for (int64_t i = 0; i < count; ++i) {
    if (std::fabs(w[i]) > 65504.0f) {
      return InvalidArgument("element " + std::to_string(i) + " (" + std::to_string(w[i]) +
                             ") is beyond float16's range (65504)");
    }
    out[i] = float_to_half(w[i]);
  }
  return Status::Ok();
}

namespace {

// "row 3, elements [64, 96)": where a group of w [out, in] sits, for messages.
std::string group_name(int64_t o, int64_t k, int64_t g) {
  return "row " + std::to_string(o) + ", elements [" + std::to_string(k * g) + ", " + std::to_string((k + 1) * g) + ")";
}

}  // namespace

Status quantize_i8(const float* w, int64_t out, int64_t in, int64_t group, int8_t* q, float* scales) {
  const int64_t g = group ? group : in, groups = in / g;
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t k = 0; k < groups; ++k) {
      const float* x = w + o * in + k * g;
      float amax = 0;
      for (int64_t i = 0; i < g; ++i) amax = std::fmax(amax, std::fabs(x[i]));
      if (!std::isfinite(amax)) return InvalidArgument(group_name(o, k, g) + " holds an infinite value");
      const float scale = amax / 127.0f, inv = amax > 0 ? 127.0f / amax : 0.0f;
      scales[o * groups + k] = scale;
      for (int64_t i = 0; i < g; ++i) {
        const long r = std::lround(x[i] * inv);
        q[o * in + k * g + i] = int8_t(r > 127 ? 127 : (r < -127 ? -127 : r));
      }
    }
  }
  return Status::Ok();
}

namespace {

int nibble_of(float x, float inv) {
  const long r = std::lround(x * inv);
  return int(r > 7 ? 7 : (r < -8 ? -8 : r));
}

// Squared error of the group x [g] at a float16 scale, rounding each value to its nearest level.
double group_error(const float* x, int64_t g, uint16_t scale_bits) {
  const float d = half_to_float(scale_bits), inv = d != 0 ? 1.0f / d : 0.0f;
  double e = 0;
  for (int64_t i = 0; i < g; ++i) {
    const double diff = double(x[i]) - double(d) * nibble_of(x[i], inv);
    e += diff * diff;
  }
  return e;
}

}  // namespace

Status quantize_i4(const float* w, int64_t out, int64_t in, int64_t group, uint8_t* q, uint16_t* scales) {
  const int64_t g = group ? group : in, groups = in / g;
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t k = 0; k < groups; ++k) {
      const float* x = w + o * in + k * g;
      float peak = 0;  // the value of largest magnitude, with its sign
      for (int64_t i = 0; i < g; ++i)
        if (std::fabs(x[i]) > std::fabs(peak)) peak = x[i];
      // Candidates: Q4_0's -peak/8, then the peak mapped onto -t and +t for t from 4 to 9 in steps of 1/4 (the
      // clamp to [-8, 7] decides what lands beyond the levels). A candidate past float16's range (a peak above
      // 4 x 65504) is no scale at all and is passed over; a group where every one is (a peak above 9 x 65504) has
      // no int4 form.
      uint16_t best = float_to_half(-peak / 8.0f);
      double best_error = half_is_finite(best) ? group_error(x, g, best) : HUGE_VAL;
      for (int quarter = 16; quarter <= 36; ++quarter) {
        for (float sign : {1.0f, -1.0f}) {
          const uint16_t cand = float_to_half(sign * peak * 4.0f / float(quarter));
          if (!half_is_finite(cand)) continue;
          const double e = group_error(x, g, cand);
          if (e < best_error || !half_is_finite(best)) best_error = e, best = cand;
        }
      }
      if (!half_is_finite(best) || !std::isfinite(peak)) {
        return InvalidArgument(group_name(o, k, g) + " holds " + std::to_string(peak) +
                               ", beyond what int4 with a float16 scale holds (9 x 65504 = 589536)");
      }
      scales[o * groups + k] = best;
      const float d = half_to_float(best), inv = d != 0 ? 1.0f / d : 0.0f;
      for (int64_t i = 0; i < g; ++i) {
        const int64_t c = k * g + i, block = c / 32, pos = c % 32;
        uint8_t& byte = q[(o * in + block * 32) / 2 + pos % 16];
        const uint8_t u = uint8_t(nibble_of(x[i], inv) + 8);
        byte = pos < 16 ? uint8_t((byte & 0xF0) | u) : uint8_t((byte & 0x0F) | (u << 4));
      }
    }
  }
  return Status::Ok();
}

}  // namespace tern::convert
