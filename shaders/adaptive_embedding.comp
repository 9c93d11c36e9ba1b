// SPDX-License-Identifier: MIT
#version 450
// ADAPTIVE_EMBEDDING (ops/adaptive.h): y[r, o] = scale * (proj_i table_i[id - l_i])[o] for id = ids[r] in cluster i.
//   ids [n] (checked by the host), y [n, d];
//   hdr (int): ends [K + 1] at 0, dims [K] at K + 1, table offsets [K] at 2K + 1, projection offsets [K] at 3K + 1
//   (-1: none, d_i = d); data (float): every table [rows_i, d_i] and projection [d, d_i] at those offsets.
#include "common/interface.glsl"
// Push constants: AdaptiveEmbeddingPush, mirrored field for field in runtime/src/vulkan/push_constants.h.
layout(push_constant) uniform AdaptiveEmbeddingPush {
  uint off[8];
  uint d;
  float scale;
  int clusters;  // K
} pc;
layout(local_size_x = 256) in;
layout(std430, binding = 1) readonly buffer Ids { int ids[]; };
layout(std430, binding = 2) readonly buffer Hdr { int hdr[]; };
layout(std430, binding = 3) readonly buffer Data { float data[]; };
layout(std430, binding = 4) writeonly buffer Out { float y[]; };

void main() {
  uint d = pc.d;
  float scale = pc.scale;
  int K = pc.clusters;
  uint hb = pc.off[2];
  GRID_STRIDE(idx, call.n * d, 256) {
    uint r = idx / d, o = idx % d;
    int id = ids[pc.off[1] + r];
    int i = 0;
    while (i + 1 < K && id >= hdr[hb + i + 1]) ++i;
    uint di = uint(hdr[hb + K + 1 + i]);
    uint e = pc.off[3] + uint(hdr[hb + 2 * K + 1 + i]) + uint(id - hdr[hb + i]) * di;
    int proj = hdr[hb + 3 * K + 1 + i];
    float s;
    if (proj < 0) {
      s = data[e + o];
    } else {
      uint pb = pc.off[3] + uint(proj) + o * di;
      s = 0.0;
      for (uint c = 0; c < di; ++c) s += data[pb + c] * data[e + c];
    }
    y[pc.off[4] + idx] = s * scale;
  }
}
