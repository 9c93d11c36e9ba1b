// SPDX-License-Identifier: MIT
#version 450
// ATTENTION (Routing), step 4: every member query of a cluster attends the cluster's keys at positions <= its own
// (normalised queries and keys, the values as they are), with online softmax over key tiles staged in shared memory.
// A workgroup takes BQ member queries of one cluster of one routing head; members ascend by position, so the keys a
// query sees are a prefix of the cluster's key list. A query without a visible key gets zeros.
//   xn [Hr, 2, max_batch, HEAD_DIM]; qkv [n, row] (the values, at v_col, of key/value head h / (heads / kv_heads));
//   members [Hr, 2, K, max_w];
//   outputs [Hr, K, max_w, HEAD_DIM], one row per member query.
// Push constants: common/routing.glsl.
#include "common/interface.glsl"
#include "common/routing.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint BQ = 32;
layout(constant_id = 1) const uint HEAD_DIM = 64;
layout(constant_id = 2) const uint BK = 32;
layout(std430, binding = 1) readonly buffer Xn { float xn[]; };
layout(std430, binding = 2) readonly buffer Qkv { float qkv[]; };
layout(std430, binding = 3) readonly buffer Members { int members[]; };
layout(std430, binding = 4) writeonly buffer Outputs { float outputs[]; };
shared float ks[BK * HEAD_DIM];
shared float vs[BK * HEAD_DIM];
shared int kpos[BK];

void main() {
  uint local_heads = pc.local_heads, clusters = pc.clusters;
  uint max_batch = pc.max_batch, max_w = pc.max_w;
  float scale = pc.scale;
  uint n = call.n;
  uint w = min(pc.window, n);
  uint c = gl_WorkGroupID.y, r = gl_WorkGroupID.z;
  uint kv_head = (local_heads + r) / (pc.heads / pc.kv_heads);
  uint m0 = gl_WorkGroupID.x * BQ;
  uint m = m0 + gl_LocalInvocationID.x;
  bool live = m < w;
  uint qrow = pc.off[3] + ((r * 2 + 0) * clusters + c) * max_w;
  uint krow = pc.off[3] + ((r * 2 + 1) * clusters + c) * max_w;
  int i = live ? members[qrow + m] : -1;
  float q[HEAD_DIM];
  float acc[HEAD_DIM];
  uint qat = pc.off[1] + ((r * 2 + 0) * max_batch + uint(max(i, 0))) * HEAD_DIM;
  for (uint d = 0; d < HEAD_DIM; ++d) {
    q[d] = live ? xn[qat + d] * scale : 0.0;
    acc[d] = 0.0;
  }
  float mx = -3.402823466e38, l = 0.0;
  // The keys the block needs: up to the last member query's position.
  int last = m0 < w ? members[qrow + min(w, m0 + BQ) - 1] : -1;
  for (uint t0 = 0; t0 < w; t0 += BK) {
    if (members[krow + t0] > last) break;  // uniform: every invocation reads the same values
    for (uint e = gl_LocalInvocationID.x; e < BK * HEAD_DIM; e += BQ) {
      uint t = t0 + e / HEAD_DIM, d = e % HEAD_DIM;
      float kv = 0.0, vv = 0.0;
      if (t < w) {
        int j = members[krow + t];
        kv = xn[pc.off[1] + ((r * 2 + 1) * max_batch + uint(j)) * HEAD_DIM + d];
        vv = qkv[pc.off[2] + uint(j) * pc.row + pc.v_col + kv_head * HEAD_DIM + d];
      }
      ks[e] = kv;
      vs[e] = vv;
    }
    for (uint e = gl_LocalInvocationID.x; e < BK; e += BQ) kpos[e] = t0 + e < w ? members[krow + t0 + e] : 2147483647;
    barrier();
    if (live) {
      float s[BK];
      float block_max = -3.402823466e38;
      uint visible = 0;
      for (uint t = 0; t < BK; ++t) {
        if (kpos[t] > i) break;
        float dot_qk = 0.0;
        for (uint d = 0; d < HEAD_DIM; ++d) dot_qk += q[d] * ks[t * HEAD_DIM + d];
        s[t] = dot_qk;
        block_max = max(block_max, dot_qk);
        visible = t + 1;
      }
      if (visible > 0) {
        float m_new = max(mx, block_max);
        float correction = exp(mx - m_new);
        l *= correction;
        for (uint d = 0; d < HEAD_DIM; ++d) acc[d] *= correction;
        for (uint t = 0; t < visible; ++t) {
          float p = exp(s[t] - m_new);
          l += p;
          for (uint d = 0; d < HEAD_DIM; ++d) acc[d] += p * vs[t * HEAD_DIM + d];
        }
        mx = m_new;
      }
    }
    barrier();
  }
  if (live) {
    float inv = l > 0.0 ? 1.0 / l : 0.0;
    uint o = pc.off[4] + ((r * clusters + c) * max_w + m) * HEAD_DIM;
    for (uint d = 0; d < HEAD_DIM; ++d) outputs[o + d] = acc[d] * inv;
  }
}
