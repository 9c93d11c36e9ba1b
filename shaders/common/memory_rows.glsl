// SPDX-License-Identifier: MIT
// What the shaders of an attention op with a memory share (runtime/src/vulkan/ops_memory.cpp): the push constants of
// every memory_*.comp, MemoryPush in runtime/src/vulkan/push_constants.h (each shader reads the fields it needs).
layout(push_constant) uniform MemoryPush {
  uint off[8];
  uint family;  // 0 RelativeXL (always mem_len rows: zeros before the first call), 1 Compressive
  uint mem_len;  // M
  uint cmem_len;  // C
  uint rate;
  uint d;  // memory_concat, memory_update: the model width
  uint qkv_width;  // memory_project, memory_attention: the head layout's row (ops/head_layout.h)
  uint heads;  // memory_attention
  float norm_eps;  // memory_project
  float scale;  // memory_attention
  uint clamp_len;  // memory_attention; 0: none
  uint same_length;  // memory_attention
  uint q_col;  // memory_attention: where the queries, keys and values start in a qkv row
  uint k_col;
  uint v_col;
} pc;

// Rows the op holds before a call, a function of the tokens seen (call.pos0) alone, so nothing is counted on the host
// or the device between calls.
// Compressive (ops/compressive.h): after T tokens mem holds T rows while T <= M, then M + (T - M) % rate; every
// other row left in groups of rate, of which cmem keeps the last C.
uint mem_rows(uint t) {
  uint m = pc.mem_len, rate = pc.rate;
  return t <= m ? t : m + (t - m) % rate;
}
uint cmem_rows(uint t) { return min(pc.cmem_len, (t - mem_rows(t)) / pc.rate); }
// Rows of [memory; input] before the call's: M for RelativeXL, |cmem| + |mem| for Compressive.
uint prefix_rows() {
  if (pc.family == 0u) return pc.mem_len;
  return cmem_rows(call.pos0) + mem_rows(call.pos0);
}
