// SPDX-License-Identifier: MIT
#version 450
// LSH attention, step 3 (runtime/src/ops/lsh.h): every query against its window, with HF's float32 log-sum-exp.
// Chunked call: the sorted axis (hashes * n_pad slots per head) in chunks of `chunk`; the queries of chunk c see the
// slots of chunks c - before .. c + after, modulo the number of chunks (circular, across rounds). Unchunked call
// (n_pad <= chunk): query i sees positions 0..i. Either way a slot holding position j is invisible when j is a pad
// (j >= n) or the future (j > i), scores self_mask_value when j == i (a replacement), else q_i . key_j; a position
// in several slots of a window counts once per slot. Per query: m = max score, lse = log(sum exp(s - m)) + m,
// out = sum exp(s - m) v * exp(m - lse) (as the CPU path, so rows that see only themselves keep HF's rounding).
// A workgroup takes BQ queries of one chunk (or of the sequence) and one head; the window's keys and values are
// staged BK at a time in shared memory and folded in with an online softmax.
//   qkv [n, row] (qk | v: head h's qk at k_col + h*HEAD_DIM, its v at v_col + h*HEAD_DIM);
//   keys [heads, n, HEAD_DIM]; order [heads, hashes * n_pad];
//   outs [heads, rounds, n, HEAD_DIM], lses [heads, rounds, n] (rounds: hashes, or 1 unchunked).
// Push constants: common/lsh.glsl.
#include "common/interface.glsl"
#include "common/lsh.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint BQ = 32;
layout(constant_id = 1) const uint HEAD_DIM = 64;
layout(constant_id = 2) const uint BK = 32;
layout(std430, binding = 1) readonly buffer Qkv { float qkv[]; };
layout(std430, binding = 2) readonly buffer Keys { float keys[]; };
layout(std430, binding = 3) readonly buffer Order { uint order[]; };
layout(std430, binding = 4) writeonly buffer Outs { float outs[]; };
layout(std430, binding = 5) writeonly buffer Lses { float lses[]; };
shared float ks[BK * HEAD_DIM];
shared float vs[BK * HEAD_DIM];
shared uint kpos[BK];

void main() {
  uint heads = pc.heads, hashes = pc.hashes, chunk = pc.chunk;
  uint before = pc.chunks_before, after = pc.chunks_after;
  float self_mask = pc.self_mask_value;
  uint n = call.n;
  uint n_pad = lsh_padded(n);
  bool chunked = n_pad > chunk;
  uint h = gl_WorkGroupID.y, lid = gl_LocalInvocationID.x;
  uint n_chunks = chunked ? hashes * n_pad / chunk : 1u;
  uint blocks_per_chunk = (chunk + BQ - 1u) / BQ;
  uint items = chunked ? n_chunks * blocks_per_chunk : (n + BQ - 1u) / BQ;
  uint rounds = chunked ? hashes : 1u;
  uint ohead = h * hashes * n_pad;  // this head's sorted axis in order[]

  for (uint item = gl_WorkGroupID.x; item < items; item += gl_NumWorkGroups.x) {
    uint i = n, r = 0u, count, c = 0u;
    if (chunked) {
      c = item / blocks_per_chunk;
      uint within = (item % blocks_per_chunk) * BQ + lid;
      if (within < chunk) {
        uint u = c * chunk + within;
        i = order[pc.off[3] + ohead + u];
        r = u / n_pad;
      }
      count = chunk * (1u + before + after);
    } else {
      if (item * BQ + lid < n) i = item * BQ + lid;
      count = min(n, (item + 1u) * BQ);
    }
    bool live = i < n;
    float q[HEAD_DIM];
    float acc[HEAD_DIM];
    for (uint e = 0; e < HEAD_DIM; ++e) {
      q[e] = live ? qkv[pc.off[1] + i * pc.row + pc.k_col + h * HEAD_DIM + e] : 0.0;
      acc[e] = 0.0;
    }
    float m = -3.402823466e38, l = 0.0;
    for (uint t0 = 0; t0 < count; t0 += BK) {
      for (uint e = lid; e < BK * HEAD_DIM; e += BQ) {
        uint t = t0 + e / HEAD_DIM, ch = e % HEAD_DIM;
        uint j = n;  // nothing
        if (t < count) {
          if (chunked) {
            uint cc = (c + t / chunk + n_chunks - before % n_chunks) % n_chunks;
            j = order[pc.off[3] + ohead + cc * chunk + t % chunk];
          } else {
            j = t;
          }
        }
        float kv = 0.0, vv = 0.0;
        if (j < n) {
          kv = keys[pc.off[2] + (h * n + j) * HEAD_DIM + ch];
          vv = qkv[pc.off[1] + j * pc.row + pc.v_col + h * HEAD_DIM + ch];
        }
        ks[e] = kv;
        vs[e] = vv;
        if (ch == 0u) kpos[e / HEAD_DIM] = j;
      }
      barrier();
      if (live) {
        float s[BK];
        float block_max = -3.402823466e38;
        bool any = false;
        for (uint t = 0; t < BK; ++t) {
          uint j = kpos[t];
          if (j >= n || j > i) continue;
          float v;
          if (j == i) {
            v = self_mask;
          } else {
            v = 0.0;
            for (uint e = 0; e < HEAD_DIM; ++e) v += q[e] * ks[t * HEAD_DIM + e];
          }
          s[t] = v;
          block_max = max(block_max, v);
          any = true;
        }
        if (any) {
          float m_new = max(m, block_max);
          float correction = exp(m - m_new);  // 0 on the row's first keys
          l *= correction;
          for (uint e = 0; e < HEAD_DIM; ++e) acc[e] *= correction;
          for (uint t = 0; t < BK; ++t) {
            uint j = kpos[t];
            if (j >= n || j > i) continue;
            float p = exp(s[t] - m_new);
            l += p;
            for (uint e = 0; e < HEAD_DIM; ++e) acc[e] += p * vs[t * HEAD_DIM + e];
          }
          m = m_new;
        }
      }
      barrier();
    }
    if (live) {
      // Every query sees at least its own slot, so l >= 1.
      float lse = log(l) + m;
      float w = exp(m - lse);
      uint at = (h * rounds + r) * n + i;
      for (uint e = 0; e < HEAD_DIM; ++e) outs[pc.off[4] + at * HEAD_DIM + e] = acc[e] * w;
      lses[pc.off[5] + at] = lse;
    }
  }
}
