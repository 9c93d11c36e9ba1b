// SPDX-License-Identifier: MIT
#version 450
// ATTENTION with a memory, step 3: query i of the call (qkv row prefix + i) against keys [first, prefix + i] with
// online softmax, one invocation a (query, head): no [n, keys] buffer anywhere.
//   qkv [prefix + n, qkv_width] (q | k | v from q_col, k_col, v_col: ops/head_layout.h), out [n, inner],
//   inner = heads * DH.
//   XL (Transformer-XL, ops/relative_xl.h): score = ((q + u) . k_j + (q + v) . r(min(t, clamp))) * scale with
//   t = prefix + i - j, uv [2, inner] (r_w_bias | r_r_bias), r [P, inner] = r_net pe(p); first = i + 1 with
//   same_length, else 0. Otherwise (Compressive): score = q . k_j * scale, first = 0.
// Push constants: common/memory_rows.glsl.
#include "common/interface.glsl"
#include "common/memory_rows.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint DH = 64;
layout(constant_id = 1) const bool XL = false;
layout(std430, binding = 1) readonly buffer Qkv { float qkv[]; };
layout(std430, binding = 2) readonly buffer UV { float uv[]; };
layout(std430, binding = 3) readonly buffer R { float rp[]; };
layout(std430, binding = 4) writeonly buffer Out { float y[]; };

void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i >= call.n) return;
  uint heads = pc.heads, h = gl_WorkGroupID.y;
  float scale = pc.scale;
  uint clamp_len = pc.clamp_len;
  bool same_length = pc.same_length != 0u;
  uint inner = heads * DH, width = pc.qkv_width;
  uint prefix = prefix_rows();
  float qu[DH];
  float qv[DH];
  float acc[DH];
  uint qb = pc.off[1] + (prefix + i) * width + pc.q_col + h * DH;
  for (uint c = 0; c < DH; ++c) {
    float q = qkv[qb + c];
    qu[c] = XL ? q + uv[pc.off[2] + h * DH + c] : q;
    qv[c] = XL ? q + uv[pc.off[2] + inner + h * DH + c] : 0.0;
    acc[c] = 0.0;
  }
  uint first = (XL && same_length) ? i + 1 : 0, last = prefix + i;
  float m = -3.0e38, l = 0.0;
  for (uint j = first; j <= last; ++j) {
    uint kb = pc.off[1] + j * width + pc.k_col + h * DH;
    float s = 0.0;
    for (uint c = 0; c < DH; ++c) s += qu[c] * qkv[kb + c];
    if (XL) {
      uint t = prefix + i - j;
      uint p = (clamp_len > 0 && t > clamp_len) ? clamp_len : t;
      uint rb = pc.off[3] + p * inner + h * DH;
      for (uint c = 0; c < DH; ++c) s += qv[c] * rp[rb + c];
    }
    s *= scale;
    float m_new = max(m, s);
    float corr = exp(m - m_new);
    float e = exp(s - m_new);
    l = l * corr + e;
    for (uint c = 0; c < DH; ++c) acc[c] = acc[c] * corr + e * qkv[kb - pc.k_col + pc.v_col + c];
    m = m_new;
  }
  uint ob = pc.off[4] + i * inner + h * DH;
  for (uint c = 0; c < DH; ++c) y[ob + c] = acc[c] / l;
}
