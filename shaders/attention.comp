// SPDX-License-Identifier: MIT
#version 450
// Loops over a head's dimensions are unrolled ([[unroll]]): llvmpipe (lavapipe) ends every loop of an invocation
// once 65535 iterations of all its loops together have run (LP_MAX_TGSI_LOOP_ITERATIONS, shared by every loop), which
// a row of a few hundred keys reached through them; unrolled, they count nothing.
#extension GL_EXT_control_flow_attributes : require
// ATTENTION (dense, sliding window, chunked local, strided, fixed): causal softmax attention with online softmax, so
// no [n, keys] score buffer exists anywhere. A workgroup takes BQ query rows of one head; key tiles of BK keys (k and
// v, [BK, HEAD_DIM] each) of the rows' contiguous runs are staged in shared memory and each invocation folds the
// visible ones into its row's running max m, sum l and accumulator acc. Strided's every-stride-th key and fixed's
// summaries below the run (O(n/stride) or O(summary*n/block) a row) are then read by each row on its own.
//   qkv [n, row] (ops/head_layout.h: query head h at column q + h*HEAD_DIM, its key and value at k and v +
//   kv_head*HEAD_DIM, kv_head = h / (heads / kv_heads)); state [slots, 2*kv_inner] (k | v of past positions, in
//   slot state_slot(j)), kv_inner = kv_heads * HEAD_DIM; out [n, heads * HEAD_DIM].
// Keys at positions >= pos0 come from qkv, older ones from the state (kv_append.comp writes it after this).
// SINKS (attention sinks, ops/sink_cache.h; ops_attention.cpp): qkv is the call's rows rotated by sink_view.comp and
// the state its view of the cache [ring = S + W, 2*kv_inner], entry e at slot e; the call's rows are indices
// held..held+n-1 after the held = min(pos0, S + W) cache entries, so pos0 here is held.
// A score is q·k of the scaled query, then soft-capped (softcap > 0: cap * tanh(score / cap)) before the softmax,
// in the CPU path's order.
#include "common/interface.glsl"
#include "common/math.glsl"
#include "common/attention_push.glsl"
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

uint kv_inner;
uint h, kv;  // the query head, and the key/value head it reads
int pos0;
uint ring;
int block, summary;

float key_at(int j, uint c) {
  if (j >= pos0) return qkv[pc.off[1] + uint(j - pos0) * pc.row + pc.k_col + kv * HEAD_DIM + c];
  return state[pc.off[2] + state_slot(j, ring, block, summary) * 2 * kv_inner + kv * HEAD_DIM + c];
}

float capped(float score) { return pc.softcap > 0.0 ? pc.softcap * tanh_finite(score / pc.softcap) : score; }

float value_at(int j, uint c) {
  if (j >= pos0) return qkv[pc.off[1] + uint(j - pos0) * pc.row + pc.v_col + kv * HEAD_DIM + c];
  return state[pc.off[2] + state_slot(j, ring, block, summary) * 2 * kv_inner + kv_inner + kv * HEAD_DIM + c];
}

void main() {
  int heads = pc.heads, window = pc.window, chunk = pc.chunk, before = pc.chunks_before;
  ring = pc.ring;
  float scale = pc.scale;
  int stride = pc.stride;
  block = KIND == 4 ? pc.block : 0;
  summary = pc.summary;
  bool split = pc.split != 0u;
  kv_inner = uint(pc.kv_heads) * HEAD_DIM;
  h = gl_WorkGroupID.y;
  kv = h / uint(heads / pc.kv_heads);
  bool second = split && int(h) >= heads / 2;
  uint n = call.n;
#ifdef SINKS
  pos0 = int(min(call.pos0, ring));
#else
  pos0 = int(call.pos0);
#endif
  uint r0 = gl_WorkGroupID.x * BQ;
  uint r = r0 + gl_LocalInvocationID.x;
  bool live = r < n;
  int i = pos0 + int(r);

  float q[HEAD_DIM];
  float acc[HEAD_DIM];
  [[unroll]] for (uint c = 0; c < HEAD_DIM; ++c) {
    q[c] = live ? qkv[pc.off[1] + r * pc.row + pc.q_col + h * HEAD_DIM + c] * scale : 0.0;
    acc[c] = 0.0;
  }
  float m = -3.402823466e38, l = 0.0;
  int my_lo = local_lo(KIND, i, window, chunk, before, stride, pc.block, second);
  // The union of the block's runs: from the first row's start to the last row.
  int first = local_lo(KIND, pos0 + int(r0), window, chunk, before, stride, pc.block, second);
  int last = pos0 + int(min(n, r0 + BQ)) - 1;
  for (int j0 = first; j0 <= last; j0 += int(BK)) {
    for (uint e = gl_LocalInvocationID.x; e < BK * HEAD_DIM; e += BQ) {
      int j = j0 + int(e / HEAD_DIM);
      uint c = e % HEAD_DIM;
      float kv = 0.0, vv = 0.0;
      if (j <= last) {
        kv = key_at(j, c);
        vv = value_at(j, c);
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
          [[unroll]] for (uint c = 0; c < HEAD_DIM; ++c) dot_qk += q[c] * ks[t * HEAD_DIM + c];
          dot_qk = capped(dot_qk);
          s[t] = dot_qk;
          block_max = max(block_max, dot_qk);
        }
        float m_new = max(m, block_max);
        float correction = exp(m - m_new);  // 0 on the row's first keys
        l *= correction;
        [[unroll]] for (uint c = 0; c < HEAD_DIM; ++c) acc[c] *= correction;
        for (int j = lo; j <= hi; ++j) {
          uint t = uint(j - j0);
          float p = exp(s[t] - m_new);
          l += p;
          [[unroll]] for (uint c = 0; c < HEAD_DIM; ++c) acc[c] += p * vs[t * HEAD_DIM + c];
        }
        m = m_new;
      }
    }
    barrier();
  }
  // The scattered keys below the run, ascending: strided's i - k*stride, fixed's last `summary` keys of each block.
  if (live && (KIND == 3 || KIND == 4) && (!split || second)) {
    int j = -1, step = 1, run_end = -1;
    if (KIND == 3 && my_lo > 0) {
      int last_below = i - ((i - (my_lo - 1) + stride - 1) / stride) * stride;  // largest i - k*stride < my_lo
      if (last_below >= 0) {
        j = last_below % stride;
        step = stride;
        run_end = last_below;
      }
    }
    int next_block = 0;  // fixed: summaries of the block starting here come next
    if (KIND == 4) {
      j = block - summary;
      run_end = min(block, my_lo) - 1;
      next_block = block;
    }
    while (j >= 0 && j <= run_end && j < my_lo) {
      float dot_qk = 0.0;
      [[unroll]] for (uint c = 0; c < HEAD_DIM; ++c) dot_qk += q[c] * key_at(j, c);
      dot_qk = capped(dot_qk);
      float m_new = max(m, dot_qk);
      float correction = exp(m - m_new);
      float p = exp(dot_qk - m_new);
      l = l * correction + p;
      [[unroll]] for (uint c = 0; c < HEAD_DIM; ++c) acc[c] = acc[c] * correction + p * value_at(j, c);
      m = m_new;
      j += step;
      if (KIND == 4 && j > run_end) {
        // The next block's summaries, while they start below the run (no overflow: next_block <= my_lo here).
        if (next_block > my_lo - block + summary) break;
        j = next_block + block - summary;
        run_end = (next_block >= my_lo - block ? my_lo : next_block + block) - 1;
        next_block += block;
      }
    }
  }
  if (live) {
    float inv = 1.0 / l;  // every row sees at least itself
    [[unroll]] for (uint c = 0; c < HEAD_DIM; ++c) y[pc.off[3] + r * uint(heads) * HEAD_DIM + h * HEAD_DIM + c] = acc[c] * inv;
  }
}
