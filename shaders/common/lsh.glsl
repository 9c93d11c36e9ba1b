// SPDX-License-Identifier: MIT
// What the LSH attention shaders share (runtime/src/ops/lsh.h, runtime/src/vulkan/ops_lsh.cpp): the push constants
// of every lsh_*.comp, LshPush in runtime/src/vulkan/push_constants.h (each shader reads the fields it needs).
layout(push_constant) uniform LshPush {
  uint off[8];
  uint heads;
  uint hashes;
  uint chunk;
  uint chunks_before;
  uint chunks_after;
  uint pad_to;
  uint pad_above;
  uint n_factors;  // lsh_hash
  uint rot_half;  // lsh_hash
  uint n_buckets;  // lsh_sort
  float key_norm_eps;  // lsh_hash
  float scale;  // lsh_hash
  float self_mask_value;  // lsh_attend, lsh_step
  uint capacity;  // lsh_store and the later call's shaders: positions the cache holds
  uint step_first;  // lsh_step: the call position of its workgroup row 0
  uint row;  // the head layout (ops/head_layout.h): columns of a qk | v row, where the shared query-key and v start
  uint k_col;
  uint v_col;
} pc;

// The length the sequence is treated as (HF's right-padding): LshAttention::padded_length.
uint lsh_padded(uint n) {
  uint pad_to = pc.pad_to, pad_above = pc.pad_above;
  return (n > pad_above && n % pad_to != 0u) ? (n / pad_to + 1u) * pad_to : n;
}
bool lsh_chunked(uint n) { return lsh_padded(n) > pc.chunk; }
