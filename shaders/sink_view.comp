// SPDX-License-Identifier: MIT
#version 450
// Attention sinks (ops/sink_cache.h, ops_attention.cpp): what the call sees, for attention.comp's SINKS variant.
//   view [held, 2*kv_inner]: cache entry e (0 <= e < held = min(pos0, S + W), in cache order: SinkCache::position_of
//     and slot) copied from the cache [S + W, 2*kv_inner] of unrotated k | v rows, its keys rotated as index e;
//   rotated [n, row]: the call's qkv rows (ops/head_layout.h), queries and keys rotated as index held + r, the other
//     columns copied.
// cos_sin [S + W + max_batch, 2, pairs]: index t's cos then sin per pair (Rotary::cos_sin_table of indices 0.. of a
// call whose keys end at held + n), so the angles are the CPU path's exactly.
#include "common/interface.glsl"
#include "common/rotate_pair.glsl"
// Push constants: SinkViewPush, mirrored field for field in runtime/src/vulkan/push_constants_attention.h.
layout(push_constant) uniform SinkViewPush {
  uint off[8];
  uint sinks;   // S
  uint window;  // W
  uint heads;
  uint kv_heads;
  uint head_dim;
  uint pairs;  // rotary_dim / 2
  uint interleaved;
  uint row;  // columns of a qkv row
  uint q_col;
  uint k_col;
  uint v_col;
} pc;
layout(local_size_x = 256) in;
layout(std430, binding = 1) readonly buffer Qkv { float qkv[]; };
layout(std430, binding = 2) readonly buffer Cache { float cache[]; };
layout(std430, binding = 3) readonly buffer CosSin { float cos_sin[]; };
layout(std430, binding = 4) writeonly buffer View { float view[]; };
layout(std430, binding = 5) writeonly buffer Rotated { float rotated_rows[]; };

float cos_at(uint t, uint k) { return cos_sin[pc.off[3] + 2 * t * pc.pairs + k]; }
float sin_at(uint t, uint k) { return cos_sin[pc.off[3] + (2 * t + 1) * pc.pairs + k]; }

void main() {
  uint sinks = pc.sinks, window = pc.window, capacity = sinks + window;
  uint head_dim = pc.head_dim, pairs = pc.pairs, row = pc.row;
  bool interleaved = pc.interleaved != 0u;
  uint kv_inner = pc.kv_heads * head_dim, width = 2 * kv_inner;
  uint pos0 = call.pos0, held = min(pos0, capacity);
  GRID_STRIDE(idx, held * width + call.n * row, 256) {
    uint k, partner;
    bool is_first;
    if (idx < held * width) {
      uint e = idx / width, c = idx % width;
      uint p = pos0 <= capacity || e < sinks ? e : pos0 - window + (e - sinks);
      uint slot = p < sinks ? p : sinks + (p - sinks) % window;
      uint at = pc.off[2] + slot * width + c;
      uint hc = c % head_dim;
      float x = cache[at];
      if (c < kv_inner && hc < 2 * pairs) {
        rotary_pair(hc, pairs, interleaved, k, is_first, partner);
        x = rotated(x, cache[at - hc + partner], cos_at(e, k), sin_at(e, k), is_first);
      }
      view[pc.off[4] + idx] = x;
    } else {
      uint i = idx - held * width;
      uint r = i / row, c = i % row;
      uint at = pc.off[1] + i;
      float x = qkv[at];
      bool is_q = c >= pc.q_col && c < pc.q_col + pc.heads * head_dim;
      bool is_k = c >= pc.k_col && c < pc.k_col + kv_inner;
      uint hc = (c - (is_q ? pc.q_col : pc.k_col)) % head_dim;
      if ((is_q || is_k) && hc < 2 * pairs) {
        rotary_pair(hc, pairs, interleaved, k, is_first, partner);
        x = rotated(x, qkv[at - hc + partner], cos_at(held + r, k), sin_at(held + r, k), is_first);
      }
      rotated_rows[pc.off[5] + i] = x;
    }
  }
}
