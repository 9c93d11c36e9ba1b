// SPDX-License-Identifier: MIT
#version 450
// The streaming state of an AdaptiveSpan op after its call: key/value head g keeps its last cap[g] keys and values,
// position j in slot ring_offset[g] + j % cap[g] (adaptive_span.comp describes the layout; the tables give them at
// g's first query head, g * (heads / kv_heads)). Positions a later one of the same call would overwrite are skipped.
// qkv [n, row] (keys at k_col, values at v_col: ops/head_layout.h); state [2, sum(cap), HEAD_DIM]; tables as
// adaptive_span.comp.
#include "common/interface.glsl"
// Push constants: SpanAppendPush, mirrored field for field in runtime/src/vulkan/push_constants.h.
layout(push_constant) uniform SpanAppendPush {
  uint off[8];
  uint heads;
  uint total_slots;  // sum(cap)
  uint row;  // the head layout: columns of a qkv row, where k and v start
  uint k_col;
  uint v_col;
  uint kv_heads;
} pc;
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint HEAD_DIM = 64;
layout(std430, binding = 1) readonly buffer Qkv { float qkv[]; };
layout(std430, binding = 2) writeonly buffer State { float state[]; };
layout(std430, binding = 3) readonly buffer Tables { float tables[]; };

void main() {
  uint heads = pc.heads, total = pc.total_slots, kv_heads = pc.kv_heads;
  uint kv_inner = kv_heads * HEAD_DIM;
  GRID_STRIDE(idx, call.n * kv_inner, 256) {
    uint r = idx / kv_inner, col = idx % kv_inner;
    uint g = col / HEAD_DIM, c = col % HEAD_DIM;
    uint info = pc.off[3] + g * (heads / kv_heads) * 4;
    uint ring_offset = uint(floatBitsToInt(tables[info + 2])), cap = uint(floatBitsToInt(tables[info + 3]));
    uint j = call.pos0 + r;
    if (cap == 0u || j + cap < call.pos0 + call.n) continue;
    uint slot = ring_offset + j % cap;
    uint src = pc.off[1] + r * pc.row + col;
    state[pc.off[2] + slot * HEAD_DIM + c] = qkv[src + pc.k_col];
    state[pc.off[2] + (total + slot) * HEAD_DIM + c] = qkv[src + pc.v_col];
  }
}
