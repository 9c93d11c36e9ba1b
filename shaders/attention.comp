#version 450
// ATTENTION (dense, sliding window, chunked local): causal softmax attention with online softmax, so no [n, keys]
// score buffer exists anywhere. A workgroup takes BQ query rows of one head; key tiles of BK keys (k and v,
// [BK, HEAD_DIM] each) are staged in shared memory and each invocation folds the visible ones into its row's running
// max m, sum l and accumulator acc.
//   qkv [n, 3*inner] (q | k | v, head h at columns h*HEAD_DIM of each), inner = heads * HEAD_DIM;
//   state [slots, 2*inner] (k | v of past positions; position j in slot j % slots); out [n, inner].
// Keys at positions >= pos0 come from qkv, older ones from the state (kv_append.comp writes it after this).
// arg: heads, window, chunk, chunks_before, slots, scale (float bits).
#include "common/interface.glsl"
#include "common/attention_pattern.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint BQ = 32;
layout(constant_id = 1) const uint HEAD_DIM = 64;
layout(constant_id = 2) const uint BK = 32;
layout(constant_id = 3) const int KIND = 0;
layout(std430, binding = 1) readonly buffer Qkv { float qkv[]; };
layout(std430, binding = 2) readonly buffer State { float state[]; };
layout(std430, binding = 3) writeonly buffer Out { float y[]; };
shared float ks[BK * HEAD_DIM];
shared float vs[BK * HEAD_DIM];

void main() {
  int heads = pc.arg[0], window = pc.arg[1], chunk = pc.arg[2], before = pc.arg[3];
  uint slots = uint(pc.arg[4]);
  float scale = intBitsToFloat(pc.arg[5]);
  uint inner = uint(heads) * HEAD_DIM;
  uint h = gl_WorkGroupID.y;
  uint n = call.n;
  int pos0 = int(call.pos0);
  uint r0 = gl_WorkGroupID.x * BQ;
  uint r = r0 + gl_LocalInvocationID.x;
  bool live = r < n;
  int i = pos0 + int(r);

  float q[HEAD_DIM];
  float acc[HEAD_DIM];
  for (uint c = 0; c < HEAD_DIM; ++c) {
    q[c] = live ? qkv[pc.off[1] + r * 3 * inner + h * HEAD_DIM + c] * scale : 0.0;
    acc[c] = 0.0;
  }
  float m = -3.402823466e38, l = 0.0;
  int my_lo = local_lo(KIND, i, window, chunk, before);
  // The union of the block's runs: from the first row's start to the last row.
  int first = local_lo(KIND, pos0 + int(r0), window, chunk, before);
  int last = pos0 + int(min(n, r0 + BQ)) - 1;
  for (int j0 = first; j0 <= last; j0 += int(BK)) {
    for (uint e = gl_LocalInvocationID.x; e < BK * HEAD_DIM; e += BQ) {
      int j = j0 + int(e / HEAD_DIM);
      uint c = e % HEAD_DIM;
      float kv = 0.0, vv = 0.0;
      if (j <= last) {
        if (j >= pos0) {
          uint at = pc.off[1] + uint(j - pos0) * 3 * inner + h * HEAD_DIM + c;
          kv = qkv[at + inner];
          vv = qkv[at + 2 * inner];
        } else {
          uint at = pc.off[2] + (uint(j) % slots) * 2 * inner + h * HEAD_DIM + c;
          kv = state[at];
          vv = state[at + inner];
        }
      }
      ks[e] = kv;
      vs[e] = vv;
    }
    barrier();
    if (live) {
      int lo = max(my_lo, j0), hi = min(i, j0 + int(BK) - 1);
      if (lo <= hi) {
        float s[BK];
        float block_max = -3.402823466e38;
        for (int j = lo; j <= hi; ++j) {
          uint t = uint(j - j0);
          float dot_qk = 0.0;
          for (uint c = 0; c < HEAD_DIM; ++c) dot_qk += q[c] * ks[t * HEAD_DIM + c];
          s[t] = dot_qk;
          block_max = max(block_max, dot_qk);
        }
        float m_new = max(m, block_max);
        float correction = exp(m - m_new);  // 0 on the row's first keys
        l *= correction;
        for (uint c = 0; c < HEAD_DIM; ++c) acc[c] *= correction;
        for (int j = lo; j <= hi; ++j) {
          uint t = uint(j - j0);
          float p = exp(s[t] - m_new);
          l += p;
          for (uint c = 0; c < HEAD_DIM; ++c) acc[c] += p * vs[t * HEAD_DIM + c];
        }
        m = m_new;
      }
    }
    barrier();
  }
  if (live) {
    float inv = 1.0 / l;  // every row sees at least itself
    for (uint c = 0; c < HEAD_DIM; ++c) y[pc.off[3] + r * inner + h * HEAD_DIM + c] = acc[c] * inv;
  }
}
