// SPDX-License-Identifier: MIT
#version 450
// ATTENTION (AdaptiveSpan; semantics: runtime/src/ops/adaptive_span.h): query i of head h reads the keys at distances
// d = 1..reach[h] (never itself), score (q·k_j + q·pe_d) * scale, where a key before position 0 is a zero vector that
// still scores q·pe_d. The soft span mask applies after the softmax: each row carries its running max, sum(e) and
// sum(e·m) and accumulates sum(e·m·v); out = acc / (sum(e·m) + eps·sum(e)), zeros where that is 0. One invocation per
// query row and head; at most max_span keys a row, nothing n x n.
//   qkv [n, row] (head h's q at q_col + h*HEAD_DIM, its key and value at k_col, v_col + g*HEAD_DIM for its key/value
//   head g = h / (heads / kv_heads): ops/head_layout.h);
//   state: keys [sum(cap), HEAD_DIM] then values [sum(cap), HEAD_DIM], key/value head g's ring of cap[g] slots from
//   ring_offset[g] (position j in slot j % cap[g]); tables: per query head (reach, mask_offset, and its key/value
//   head's ring_offset and cap) as int bits [heads, 4], then m_h(d) [sum(reach)], then pe [max_span, HEAD_DIM] by
//   distance (row d-1);
//   out [n, inner]. Keys at positions >= pos0 come from qkv, older ones from the state (span_append.comp).
#include "common/interface.glsl"
// Push constants: AdaptiveSpanPush, mirrored field for field in runtime/src/vulkan/push_constants.h.
layout(push_constant) uniform AdaptiveSpanPush {
  uint off[8];
  uint heads;
  float scale;
  float eps;  // 0: unmasked
  uint mask_at;  // where the masks start in tables
  uint pe_at;  // where pe starts in tables
  uint total_slots;  // sum(cap)
  uint row;  // the head layout: columns of a qkv row, where q, k and v start
  uint q_col;
  uint k_col;
  uint v_col;
  uint kv_heads;
} pc;
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint HEAD_DIM = 64;
layout(std430, binding = 1) readonly buffer Qkv { float qkv[]; };
layout(std430, binding = 2) readonly buffer State { float state[]; };
layout(std430, binding = 3) readonly buffer Tables { float tables[]; };
layout(std430, binding = 4) writeonly buffer Out { float y[]; };

void main() {
  uint heads = pc.heads;
  float scale = pc.scale, eps = pc.eps;
  uint mask_at = pc.mask_at, pe_at = pc.pe_at, total = pc.total_slots;
  uint inner = heads * HEAD_DIM;
  uint r = gl_GlobalInvocationID.x, h = gl_WorkGroupID.y;
  uint kv_head = h / (heads / pc.kv_heads);
  if (r >= call.n) return;  // no barriers below
  int pos0 = int(call.pos0);
  int i = pos0 + int(r);
  uint info = pc.off[3] + h * 4;
  int reach = floatBitsToInt(tables[info]), mask_offset = floatBitsToInt(tables[info + 1]);
  uint ring_offset = uint(floatBitsToInt(tables[info + 2])), cap = uint(floatBitsToInt(tables[info + 3]));

  float q[HEAD_DIM];
  float acc[HEAD_DIM];
  for (uint c = 0; c < HEAD_DIM; ++c) {
    q[c] = qkv[pc.off[1] + r * pc.row + pc.q_col + h * HEAD_DIM + c] * scale;
    acc[c] = 0.0;
  }
  float mx = -3.402823466e38, sum = 0.0, sum_m = 0.0;
  for (int d = reach; d >= 1; --d) {  // keys in ascending position
    int j = i - d;
    uint pe = pc.off[3] + pe_at + uint(d - 1) * HEAD_DIM;
    uint k = 0xffffffffu, kv_stride = 0;  // where k_j lies (qkv or state); none before position 0
    if (j >= pos0) {
      k = pc.off[1] + uint(j - pos0) * pc.row + pc.k_col + kv_head * HEAD_DIM;
    } else if (j >= 0) {
      k = pc.off[2] + (ring_offset + uint(j) % cap) * HEAD_DIM;
    }
    float s = 0.0;
    if (k == 0xffffffffu) {
      for (uint c = 0; c < HEAD_DIM; ++c) s += q[c] * tables[pe + c];
    } else if (j >= pos0) {
      for (uint c = 0; c < HEAD_DIM; ++c) s += q[c] * (qkv[k + c] + tables[pe + c]);
    } else {
      for (uint c = 0; c < HEAD_DIM; ++c) s += q[c] * (state[k + c] + tables[pe + c]);
    }
    float m_new = max(mx, s);
    float correction = exp(mx - m_new);  // 0 on the row's first key
    float e = exp(s - m_new);
    float em = e * tables[pc.off[3] + mask_at + uint(mask_offset + d - 1)];
    sum = sum * correction + e;
    sum_m = sum_m * correction + em;
    for (uint c = 0; c < HEAD_DIM; ++c) acc[c] *= correction;
    if (k != 0xffffffffu && em != 0.0) {
      if (j >= pos0) {
        for (uint c = 0; c < HEAD_DIM; ++c) acc[c] += em * qkv[k - pc.k_col + pc.v_col + c];
      } else {
        for (uint c = 0; c < HEAD_DIM; ++c) acc[c] += em * state[k + total * HEAD_DIM + c];
      }
    }
    mx = m_new;
  }
  float denom = sum_m + eps * sum;
  float inv = denom > 0.0 ? 1.0 / denom : 0.0;  // a head masked at every distance attends to nothing
  for (uint c = 0; c < HEAD_DIM; ++c) y[pc.off[4] + r * inner + h * HEAD_DIM + c] = acc[c] * inv;
}
