// SPDX-License-Identifier: MIT
#version 450
// Loops over a head's dimensions are unrolled ([[unroll]]): llvmpipe (lavapipe) ends every loop of an invocation
// once 65535 iterations of all its loops together have run (LP_MAX_TGSI_LOOP_ITERATIONS, shared by every loop), which
// a row of a few hundred keys reached through them; unrolled, they count nothing.
#extension GL_EXT_control_flow_attributes : require
// ATTENTION for calls of a few rows (generation): the keys, values, output, push constants, pattern kinds and SINKS
// variant of attention.comp, whose tiles serve many rows but leave all invocations but one a row idle when n = 1.
// ops_attention.cpp records both and gives this one the calls of up to its row limit, one workgroup of WG
// invocations per (query row, head): gl_WorkGroupID = (row, head). The invocations split the row's keys (the run
// [local_lo(i), i] by consecutive keys, then strided's or fixed's scattered keys below it, the same keys
// attention.comp visits); each keeps its own online softmax (max m, sum l, value sum acc [HEAD_DIM]) in float32,
// and the workgroup combines them: the largest m, then l and acc scaled by exp(m - max) and added up, with subgroup
// arithmetic (SUBGROUP_REDUCE, where the device has it in compute) and one shared-memory step between subgroups, or
// a shared-memory tree (WG a power of two).
#ifdef SUBGROUP_REDUCE
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "common/interface.glsl"
#include "common/math.glsl"
#include "common/attention_push.glsl"
#include "common/attention_pattern.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint HEAD_DIM = 64;
layout(constant_id = 3) const int KIND = 0;
layout(std430, binding = 1) readonly buffer Qkv { float qkv[]; };
layout(std430, binding = 2) readonly buffer State { float state[]; };
layout(std430, binding = 3) writeonly buffer Out { float y[]; };
// APPEND (dense attention keeping every key, ops_attention.cpp): the call's keys and values also go to their state
// slots here, as kv_append.comp would after this dispatch (which then runs no workgroups): the workgroup of each
// key/value head's first query head writes row r's. No workgroup reads a slot of the call's positions (their keys
// come from qkv), so the writes race with no read.
layout(constant_id = 4) const bool APPEND = false;
layout(std430, binding = 2) writeonly buffer StateOut { float state_out[]; };
shared float qs[HEAD_DIM];  // the scaled query
// The combine: SUBGROUP_REDUCE: [subgroup][HEAD_DIM + 1] (acc, then l), and [subgroup] for m; else
// [HEAD_DIM + 1][invocation].
shared float partial[(HEAD_DIM + 1) * WG];

uint kv_inner;
uint kv;  // the key/value head of the workgroup's query head
int pos0;
uint ring;
int block, summary;
float m = -3.402823466e38, l = 0.0;
float acc[HEAD_DIM];

// Folds key j into this invocation's softmax: its key and value rows start at one index of qkv (the call's rows,
// j >= pos0) or of the state, found once per key.
void fold(int j) {
  const bool fresh = j >= pos0;
  uint k0, v0;
  if (fresh) {
    k0 = pc.off[1] + uint(j - pos0) * pc.row + pc.k_col + kv * HEAD_DIM;
    v0 = k0 - pc.k_col + pc.v_col;
  } else {
    k0 = pc.off[2] + state_slot(j, ring, block, summary) * 2 * kv_inner + kv * HEAD_DIM;
    v0 = k0 + kv_inner;
  }
  // One loop per buffer: a select between the two would read both.
  float score = 0.0;
  if (fresh) {
    [[unroll]] for (uint c = 0; c < HEAD_DIM; ++c) score += qs[c] * qkv[k0 + c];
  } else {
    [[unroll]] for (uint c = 0; c < HEAD_DIM; ++c) score += qs[c] * state[k0 + c];
  }
  if (pc.softcap > 0.0) score = pc.softcap * tanh_finite(score / pc.softcap);
  const float m_new = max(m, score);
  const float correction = exp(m - m_new);  // 0 on the invocation's first key
  const float p = exp(score - m_new);
  l = l * correction + p;
  if (fresh) {
    [[unroll]] for (uint c = 0; c < HEAD_DIM; ++c) acc[c] = acc[c] * correction + p * qkv[v0 + c];
  } else {
    [[unroll]] for (uint c = 0; c < HEAD_DIM; ++c) acc[c] = acc[c] * correction + p * state[v0 + c];
  }
  m = m_new;
}

void main() {
  const uint n = call.n, r = gl_WorkGroupID.x, h = gl_WorkGroupID.y, lid = gl_LocalInvocationID.x;
  if (r >= n) return;  // the whole workgroup, before any barrier
  const int heads = pc.heads;
  ring = pc.ring;
  block = KIND == 4 ? pc.block : 0;
  summary = pc.summary;
  kv_inner = uint(pc.kv_heads) * HEAD_DIM;
  kv = h / uint(heads / pc.kv_heads);
  const bool split = pc.split != 0u, second = split && int(h) >= heads / 2;
#ifdef SINKS
  pos0 = int(min(call.pos0, ring));
#else
  pos0 = int(call.pos0);
#endif
  const int i = pos0 + int(r);
  if (APPEND && h % uint(heads / pc.kv_heads) == 0u) {
    const uint from = pc.off[1] + r * pc.row + kv * HEAD_DIM;
    const uint to = pc.off[2] + state_slot(i, ring, block, summary) * 2 * kv_inner + kv * HEAD_DIM;
    for (uint c = lid; c < HEAD_DIM; c += WG) {
      state_out[to + c] = qkv[from + pc.k_col + c];
      state_out[to + kv_inner + c] = qkv[from + pc.v_col + c];
    }
  }
  for (uint c = lid; c < HEAD_DIM; c += WG) qs[c] = qkv[pc.off[1] + r * pc.row + pc.q_col + h * HEAD_DIM + c] * pc.scale;
  [[unroll]] for (uint c = 0; c < HEAD_DIM; ++c) acc[c] = 0.0;
  barrier();

  const int my_lo = local_lo(KIND, i, pc.window, pc.chunk, pc.chunks_before, pc.stride, pc.block, second);
  for (int j = my_lo + int(lid); j <= i; j += int(WG)) fold(j);
  // The scattered keys below the run: strided's i - k*stride, fixed's last `summary` keys of each block.
  if ((KIND == 3 || KIND == 4) && (!split || second)) {
    if (KIND == 3 && my_lo > 0) {
      const int stride = pc.stride;
      const int last_below = i - ((i - (my_lo - 1) + stride - 1) / stride) * stride;  // largest i - k*stride < my_lo
      const int count = last_below >= 0 ? last_below / stride + 1 : 0;
      for (int k = int(lid); k < count; k += int(WG)) fold(last_below - k * stride);
    }
    if (KIND == 4 && summary > 0) {
      // Summary e of block b at b*block + block - summary + e, for the blocks that start below the run.
      const int count = ((my_lo + block - 1) / block) * summary;
      for (int e = int(lid); e < count; e += int(WG)) {
        const int j = (e / summary) * block + block - summary + e % summary;
        if (j < my_lo) fold(j);
      }
    }
  }

  // The workgroup's softmax: every invocation's l and acc rescaled to the largest m (an invocation without keys has
  // l = 0 and acc = 0, and exp(m - top) = 0), then added up; the row sees at least itself, so l > 0.
#ifdef SUBGROUP_REDUCE
  float top = subgroupMax(m);
  if (gl_NumSubgroups > 1) {  // uniform: every invocation reaches the barriers or none does
    if (subgroupElect()) partial[gl_SubgroupID] = top;
    barrier();
    for (uint s = 0; s < gl_NumSubgroups; ++s) top = max(top, partial[s]);
    barrier();
  }
  const float weight = exp(m - top);
  const float total = subgroupAdd(l * weight);
  [[unroll]] for (uint c = 0; c < HEAD_DIM; ++c) acc[c] = subgroupAdd(acc[c] * weight);
  if (gl_NumSubgroups > 1) {
    if (subgroupElect()) {
      [[unroll]] for (uint c = 0; c < HEAD_DIM; ++c) partial[gl_SubgroupID * (HEAD_DIM + 1) + c] = acc[c];
      partial[gl_SubgroupID * (HEAD_DIM + 1) + HEAD_DIM] = total;
    }
    barrier();
    if (lid != 0) return;
    [[unroll]] for (uint c = 0; c <= HEAD_DIM; ++c) {
      float sum = 0.0;
      for (uint s = 0; s < gl_NumSubgroups; ++s) sum += partial[s * (HEAD_DIM + 1) + c];
      if (c < HEAD_DIM) acc[c] = sum; else l = sum;
    }
  } else {
    if (lid != 0) return;
    l = total;
  }
  const float inv = 1.0 / l;
  [[unroll]] for (uint c = 0; c < HEAD_DIM; ++c) y[pc.off[3] + r * uint(heads) * HEAD_DIM + h * HEAD_DIM + c] = acc[c] * inv;
#else
  partial[lid] = m;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (lid < s) partial[lid] = max(partial[lid], partial[lid + s]);
    barrier();
  }
  const float weight = exp(m - partial[0]);
  barrier();
  [[unroll]] for (uint c = 0; c < HEAD_DIM; ++c) partial[c * WG + lid] = acc[c] * weight;
  partial[HEAD_DIM * WG + lid] = l * weight;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (lid < s) {
      [[unroll]] for (uint c = 0; c <= HEAD_DIM; ++c) partial[c * WG + lid] += partial[c * WG + lid + s];
    }
    barrier();
  }
  const float inv = 1.0 / partial[HEAD_DIM * WG];
  for (uint c = lid; c < HEAD_DIM; c += WG) {
    y[pc.off[3] + r * uint(heads) * HEAD_DIM + h * HEAD_DIM + c] = partial[c * WG] * inv;
  }
#endif
}
