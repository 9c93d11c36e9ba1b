// SPDX-License-Identifier: MIT
#version 450
// The streaming state of an attention op, after its call: the keys and values of positions pos0..pos0+n-1 go to
// their slot (common/attention_pattern.glsl: j % ring, or fixed's summary slots), except ring positions a later
// position of the same call would overwrite (j < pos0 + n - ring).
// qkv [n, row] (keys at column k_col, values at v_col: ops/head_layout.h); state [slots, 2*kv_inner] (k | v).
// SINKS (attention sinks, ops/sink_cache.h): the state is the sink cache [S + W, 2*kv_inner] of unrotated keys and
// values, ring = W: position j is kept when j < S or j >= pos0 + n - W (SinkCache::kept), at slot j below S and
// S + (j - S) % W past it (SinkCache::slot).
#include "common/interface.glsl"
// Push constants: KvAppendPush, mirrored field for field in runtime/src/vulkan/push_constants.h.
layout(push_constant) uniform KvAppendPush {
  uint off[8];
  uint kv_inner;  // kv_heads * head_dim
  uint ring;
  int block;  // fixed; 0 otherwise
  int summary;
  uint row;  // columns of a qkv row
  uint k_col;
  uint v_col;
  uint sinks;  // S under SINKS; unused otherwise
} pc;
#include "common/attention_pattern.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 1) readonly buffer Qkv { float qkv[]; };
layout(std430, binding = 2) writeonly buffer State { float state[]; };

void main() {
  uint kv_inner = pc.kv_inner, ring = pc.ring;
  int block = pc.block, summary = pc.summary;
  uint width = 2 * kv_inner;
  GRID_STRIDE(idx, call.n * width, 256) {
    uint r = idx / width, c = idx % width;
    uint j = call.pos0 + r;
#ifdef SINKS
    uint sinks = pc.sinks;
    if (j >= sinks && j + ring < call.pos0 + call.n) continue;
    uint slot = j < sinks ? j : sinks + (j - sinks) % ring;
#else
    bool is_summary = block > 0 && int(j) % block >= block - summary;
    if (!is_summary && j + ring < call.pos0 + call.n) continue;
    uint slot = state_slot(int(j), ring, block, summary);
#endif
    uint column = c < kv_inner ? pc.k_col + c : pc.v_col + (c - kv_inner);
    state[pc.off[2] + slot * width + c] = qkv[pc.off[1] + r * pc.row + column];
  }
}
