// SPDX-License-Identifier: MIT
// The push constants of every routing_*.comp (runtime/src/vulkan/ops_routing.cpp): RoutingPush in
// runtime/src/vulkan/push_constants.h (each shader reads the fields it needs). Heads [0, local_heads) are local,
// routing_heads = heads - local_heads follow; a cluster keeps min(window, n) members, max_w = min(window, max_batch)
// rows of its buffers.
layout(push_constant) uniform RoutingPush {
  uint off[8];
  uint heads;
  uint local_heads;
  uint routing_heads;
  uint clusters;  // K
  uint max_batch;
  uint window;
  uint max_w;
  float scale;  // routing_attend
  float norm_eps;  // routing_prep
  float count_eps;  // routing_combine
  uint row;  // the head layout (ops/head_layout.h): columns of a qkv row, where q, k and v start
  uint q_col;
  uint k_col;
  uint v_col;
  uint kv_heads;  // query head h reads the key and value of key/value head h / (heads / kv_heads)
} pc;
