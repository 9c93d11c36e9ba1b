// SPDX-License-Identifier: MIT
#version 450
// ADAPTIVE_LOG_SOFTMAX (ops/adaptive.h) in three dispatches (STAGE):
//   0: px[r, pxoff_i + c] = (x_r proj_i)[c] (x_r itself without a projection)       grid over n * PXW
//   1: the logits: out[r, j] = px_i . W_i[j - l_i] + b_i for j in cluster i; hc[r, t] = px_0 . CW[t] + CB[t], the
//      head's column of tail t                                                         grid over n * (V + T)
//   2: log-softmax, one workgroup a row: the head (shortlist and hc) together, each tail on its own plus its head
//      log-probability
// x [n, d], px [n, PXW], hc [n, max(T, 1)], out [n, V]; T = K - 1 tails.
// hdr (int), K clusters: ends [K + 1] at 0, dims at K + 1, weight offsets at 2K + 1, bias offsets at 3K + 1 (-1 none),
// projection offsets at 4K + 1 (-1 none; proj_i [d, d_i]), px offsets [K + 1] at 5K + 1, then cluster weight and
// cluster bias offsets (-1 none) at 6K + 2, 6K + 3; data (float): every tensor at those offsets.
#include "common/interface.glsl"
// Push constants: AdaptiveLogSoftmaxPush, mirrored field for field in runtime/src/vulkan/push_constants.h.
layout(push_constant) uniform AdaptiveLogSoftmaxPush {
  uint off[8];
  uint d;
  uint vocab;  // V
  int clusters;  // K
  uint px_width;  // PXW
} pc;
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const int STAGE = 0;
layout(std430, binding = 1) readonly buffer Hdr { int hdr[]; };
layout(std430, binding = 2) readonly buffer Data { float data[]; };
layout(std430, binding = 3) readonly buffer X { float x[]; };
layout(std430, binding = 4) buffer Px { float px[]; };
layout(std430, binding = 5) buffer Hc { float hc[]; };
layout(std430, binding = 6) buffer Out { float y[]; };
shared float red[WG];
#include "common/reduce.glsl"

int H(int at) { return hdr[pc.off[1] + at]; }

float row_lse(uint base, uint count, uint lid) {
  float m = -3.0e38;
  for (uint j = lid; j < count; j += WG) m = max(m, y[base + j]);
  m = reduce_max(m);
  float s = 0.0;
  for (uint j = lid; j < count; j += WG) s += exp(y[base + j] - m);
  return m + log(reduce_sum(s));
}

void main() {
  uint d = pc.d, V = pc.vocab;
  int K = pc.clusters;
  uint PXW = pc.px_width;
  uint T = uint(K - 1);
  uint hw = max(T, 1u);
  uint db = pc.off[2];
  if (STAGE == 0) {
    GRID_STRIDE(idx, call.n * PXW, WG) {
      uint r = idx / PXW, col = idx % PXW;
      int i = 0;
      while (i + 1 < K && int(col) >= H(5 * K + 1 + i + 1)) ++i;
      uint c = col - uint(H(5 * K + 1 + i)), di = uint(H(K + 1 + i));
      int proj = H(4 * K + 1 + i);
      uint xb = pc.off[3] + r * d;
      float s;
      if (proj < 0) {
        s = x[xb + c];
      } else {
        s = 0.0;
        for (uint k = 0; k < d; ++k) s += x[xb + k] * data[db + uint(proj) + k * di + c];
      }
      px[pc.off[4] + idx] = s;
    }
  } else if (STAGE == 1) {
    GRID_STRIDE(idx, call.n * (V + T), WG) {
      uint r = idx / (V + T), j = idx % (V + T);
      uint pb = pc.off[4] + r * PXW;
      if (j < V) {
        int i = 0;
        while (i + 1 < K && int(j) >= H(i + 1)) ++i;
        uint di = uint(H(K + 1 + i));
        uint wb = db + uint(H(2 * K + 1 + i)) + (j - uint(H(i))) * di;
        int bias = H(3 * K + 1 + i);
        pb += uint(H(5 * K + 1 + i));
        float s = bias < 0 ? 0.0 : data[db + uint(bias) + j - uint(H(i))];
        for (uint c = 0; c < di; ++c) s += px[pb + c] * data[wb + c];
        y[pc.off[6] + r * V + j] = s;
      } else {
        uint t = j - V, d0 = uint(H(K + 1));
        uint wb = db + uint(H(6 * K + 2)) + t * d0;
        int bias = H(6 * K + 3);
        float s = bias < 0 ? 0.0 : data[db + uint(bias) + t];
        for (uint c = 0; c < d0; ++c) s += px[pb + c] * data[wb + c];
        hc[pc.off[5] + r * hw + t] = s;
      }
    }
  } else {
    uint lid = gl_LocalInvocationID.x;
    uint shortlist = uint(H(1));
    for (uint r = gl_WorkGroupID.x; r < call.n; r += gl_NumWorkGroups.x) {
      uint ob = pc.off[6] + r * V, hb = pc.off[5] + r * hw;
      float m = -3.0e38;
      for (uint j = lid; j < shortlist; j += WG) m = max(m, y[ob + j]);
      for (uint j = lid; j < T; j += WG) m = max(m, hc[hb + j]);
      m = reduce_max(m);
      float s = 0.0;
      for (uint j = lid; j < shortlist; j += WG) s += exp(y[ob + j] - m);
      for (uint j = lid; j < T; j += WG) s += exp(hc[hb + j] - m);
      float head = m + log(reduce_sum(s));
      for (int i = 1; i < K; ++i) {
        uint l = uint(H(i)), count = uint(H(i + 1)) - l;
        float shift = hc[hb + uint(i - 1)] - head - row_lse(ob + l, count, lid);
        for (uint j = lid; j < count; j += WG) y[ob + l + j] += shift;
      }
      for (uint j = lid; j < shortlist; j += WG) y[ob + j] -= head;
      barrier();
    }
  }
}
