// SPDX-License-Identifier: MIT
// The push constants of attention.comp and attention_rows.comp (one op, two shaders: ops_attention.cpp).
// AttentionPush, mirrored field for field in runtime/src/vulkan/push_constants_attention.h.
layout(push_constant) uniform AttentionPush {
  uint off[8];
  int heads;
  int window;
  int chunk;
  int chunks_before;
  uint ring;
  float scale;
  int stride;
  int block;  // at least 1
  int summary;
  uint split;  // split heads: heads/2.. follow the pattern's second part
  uint row;    // columns of a qkv row
  uint q_col;  // where the queries, keys and values start in a row
  uint k_col;
  uint v_col;
  int kv_heads;
  float softcap;  // AttentionParams.logit_softcap; 0: none
} pc;
