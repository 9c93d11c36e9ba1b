// SPDX-License-Identifier: MIT
// The push constants of the attention shader families (attention, kv_append, adaptive span, routing, LSH, the
// memory kinds): the rest of push_constants.h, which includes this after its own structs and with its checking
// macros (TERN_PUSH_FIELD, TERN_PUSH_QKV_COLUMNS, TERN_PUSH_KV_COLUMNS, TERN_PUSH_SIZE) defined. Include
// push_constants.h, not this.
#pragma once

#include <cstddef>
#include <cstdint>

#include "vulkan/pipelines.h"

#ifndef TERN_PUSH_FIELD
#error "include vulkan/push_constants.h"
#endif

namespace tern::vk {

// shaders/attention.comp (the attention kinds with a pattern, and routing's local heads). block is at least 1 (the
// shader divides by it); ring slots of the state; split: the second half of the heads is the pattern's second kind.
struct AttentionPush {
  BindingOffsets off{};
  int32_t heads = 0;
  int32_t window = 0;
  int32_t chunk = 0;
  int32_t chunks_before = 0;
  uint32_t ring = 0;
  float scale = 0.0f;
  int32_t stride = 0;
  int32_t block = 0;
  int32_t summary = 0;
  uint32_t split = 0;
  // The head layout (ops/head_layout.h): columns of a qkv row, where q, k and v start, and key/value heads.
  uint32_t row = 0;
  uint32_t q_col = 0;
  uint32_t k_col = 0;
  uint32_t v_col = 0;
  int32_t kv_heads = 0;
  float softcap = 0.0f;  // AttentionParams.logit_softcap: scores cap * tanh(score / cap); 0: none
};
TERN_PUSH_FIELD(AttentionPush, heads, 32);
TERN_PUSH_FIELD(AttentionPush, window, 36);
TERN_PUSH_FIELD(AttentionPush, chunk, 40);
TERN_PUSH_FIELD(AttentionPush, chunks_before, 44);
TERN_PUSH_FIELD(AttentionPush, ring, 48);
TERN_PUSH_FIELD(AttentionPush, scale, 52);
TERN_PUSH_FIELD(AttentionPush, stride, 56);
TERN_PUSH_FIELD(AttentionPush, block, 60);
TERN_PUSH_FIELD(AttentionPush, summary, 64);
TERN_PUSH_FIELD(AttentionPush, split, 68);
TERN_PUSH_QKV_COLUMNS(AttentionPush, 72);
TERN_PUSH_FIELD(AttentionPush, kv_heads, 88);
TERN_PUSH_FIELD(AttentionPush, softcap, 92);
TERN_PUSH_SIZE(AttentionPush, 16);

// shaders/kv_append.comp: kv_inner = kv_heads * head_dim; block 0 unless the kind is fixed; row, k_col and v_col
// from the head layout (ops/head_layout.h); sinks: S of the SINKS variant (kv_append_sinks, ring = W), 0 otherwise.
struct KvAppendPush {
  BindingOffsets off{};
  uint32_t kv_inner = 0;
  uint32_t ring = 0;
  int32_t block = 0;
  int32_t summary = 0;
  uint32_t row = 0;
  uint32_t k_col = 0;
  uint32_t v_col = 0;
  uint32_t sinks = 0;
};
TERN_PUSH_FIELD(KvAppendPush, kv_inner, 32);
TERN_PUSH_FIELD(KvAppendPush, ring, 36);
TERN_PUSH_FIELD(KvAppendPush, block, 40);
TERN_PUSH_FIELD(KvAppendPush, summary, 44);
TERN_PUSH_KV_COLUMNS(KvAppendPush, 48);
TERN_PUSH_FIELD(KvAppendPush, sinks, 60);
TERN_PUSH_SIZE(KvAppendPush, 8);

// shaders/sink_view.comp (attention sinks, ops/sink_cache.h): S and W, the head layout (ops/head_layout.h) and the
// rotary pairs (ops/rotary.h) of the keys and queries it rotates.
struct SinkViewPush {
  BindingOffsets off{};
  uint32_t sinks = 0;
  uint32_t window = 0;
  uint32_t heads = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
  uint32_t pairs = 0;
  uint32_t interleaved = 0;
  uint32_t row = 0;
  uint32_t q_col = 0;
  uint32_t k_col = 0;
  uint32_t v_col = 0;
};
TERN_PUSH_FIELD(SinkViewPush, sinks, 32);
TERN_PUSH_FIELD(SinkViewPush, window, 36);
TERN_PUSH_FIELD(SinkViewPush, heads, 40);
TERN_PUSH_FIELD(SinkViewPush, kv_heads, 44);
TERN_PUSH_FIELD(SinkViewPush, head_dim, 48);
TERN_PUSH_FIELD(SinkViewPush, pairs, 52);
TERN_PUSH_FIELD(SinkViewPush, interleaved, 56);
TERN_PUSH_QKV_COLUMNS(SinkViewPush, 60);
TERN_PUSH_SIZE(SinkViewPush, 11);

// shaders/kv_shift.comp (a context shift of a dense state): kv_inner = kv_heads * head_dim, the rotary pairs.
struct KvShiftPush {
  BindingOffsets off{};
  uint32_t kv_inner = 0;
  uint32_t head_dim = 0;
  uint32_t pairs = 0;
  uint32_t interleaved = 0;
};
TERN_PUSH_FIELD(KvShiftPush, kv_inner, 32);
TERN_PUSH_FIELD(KvShiftPush, head_dim, 36);
TERN_PUSH_FIELD(KvShiftPush, pairs, 40);
TERN_PUSH_FIELD(KvShiftPush, interleaved, 44);
TERN_PUSH_SIZE(KvShiftPush, 4);

// shaders/adaptive_span.comp: eps 0 when unmasked; mask_at and pe_at index the tables; total_slots = sum(cap).
struct AdaptiveSpanPush {
  BindingOffsets off{};
  uint32_t heads = 0;
  float scale = 0.0f;
  float eps = 0.0f;
  uint32_t mask_at = 0;
  uint32_t pe_at = 0;
  uint32_t total_slots = 0;
  // The head layout (ops/head_layout.h): columns of a qkv row, where q, k and v start, and key/value heads.
  uint32_t row = 0;
  uint32_t q_col = 0;
  uint32_t k_col = 0;
  uint32_t v_col = 0;
  uint32_t kv_heads = 0;
};
TERN_PUSH_FIELD(AdaptiveSpanPush, heads, 32);
TERN_PUSH_FIELD(AdaptiveSpanPush, scale, 36);
TERN_PUSH_FIELD(AdaptiveSpanPush, eps, 40);
TERN_PUSH_FIELD(AdaptiveSpanPush, mask_at, 44);
TERN_PUSH_FIELD(AdaptiveSpanPush, pe_at, 48);
TERN_PUSH_FIELD(AdaptiveSpanPush, total_slots, 52);
TERN_PUSH_QKV_COLUMNS(AdaptiveSpanPush, 56);
TERN_PUSH_FIELD(AdaptiveSpanPush, kv_heads, 72);
TERN_PUSH_SIZE(AdaptiveSpanPush, 11);

// shaders/span_append.comp: one ring per key/value head.
struct SpanAppendPush {
  BindingOffsets off{};
  uint32_t heads = 0;
  uint32_t total_slots = 0;
  uint32_t row = 0;  // the head layout: columns of a qkv row, where k and v start
  uint32_t k_col = 0;
  uint32_t v_col = 0;
  uint32_t kv_heads = 0;
};
TERN_PUSH_FIELD(SpanAppendPush, heads, 32);
TERN_PUSH_FIELD(SpanAppendPush, total_slots, 36);
TERN_PUSH_KV_COLUMNS(SpanAppendPush, 40);
TERN_PUSH_FIELD(SpanAppendPush, kv_heads, 52);
TERN_PUSH_SIZE(SpanAppendPush, 6);

// shaders/common/routing.glsl: every routing_*.comp (each reads the fields it needs). Heads [0, local_heads) are
// local, the routing_heads after them routed; window and max_w = min(window, max_batch) count cluster members.
struct RoutingPush {
  BindingOffsets off{};
  uint32_t heads = 0;
  uint32_t local_heads = 0;
  uint32_t routing_heads = 0;
  uint32_t clusters = 0;
  uint32_t max_batch = 0;
  uint32_t window = 0;
  uint32_t max_w = 0;
  float scale = 0.0f;
  float norm_eps = 0.0f;
  float count_eps = 0.0f;
  // The head layout (ops/head_layout.h): columns of a qkv row, where q, k and v start, and key/value heads.
  uint32_t row = 0;
  uint32_t q_col = 0;
  uint32_t k_col = 0;
  uint32_t v_col = 0;
  uint32_t kv_heads = 0;
};
TERN_PUSH_FIELD(RoutingPush, heads, 32);
TERN_PUSH_FIELD(RoutingPush, local_heads, 36);
TERN_PUSH_FIELD(RoutingPush, routing_heads, 40);
TERN_PUSH_FIELD(RoutingPush, clusters, 44);
TERN_PUSH_FIELD(RoutingPush, max_batch, 48);
TERN_PUSH_FIELD(RoutingPush, window, 52);
TERN_PUSH_FIELD(RoutingPush, max_w, 56);
TERN_PUSH_FIELD(RoutingPush, scale, 60);
TERN_PUSH_FIELD(RoutingPush, norm_eps, 64);
TERN_PUSH_FIELD(RoutingPush, count_eps, 68);
TERN_PUSH_QKV_COLUMNS(RoutingPush, 72);
TERN_PUSH_FIELD(RoutingPush, kv_heads, 88);
TERN_PUSH_SIZE(RoutingPush, 15);

// shaders/common/lsh.glsl: every lsh_*.comp (each reads the fields it needs), as LshAttention (ops/lsh.h) names them.
struct LshPush {
  BindingOffsets off{};
  uint32_t heads = 0;
  uint32_t hashes = 0;
  uint32_t chunk = 0;
  uint32_t chunks_before = 0;
  uint32_t chunks_after = 0;
  uint32_t pad_to = 0;
  uint32_t pad_above = 0;
  uint32_t n_factors = 0;
  uint32_t rot_half = 0;
  uint32_t n_buckets = 0;
  float key_norm_eps = 0.0f;
  float scale = 0.0f;
  float self_mask_value = 0.0f;
  uint32_t capacity = 0;    // lsh_store and the later call's shaders: positions the cache holds (max_tokens)
  uint32_t step_first = 0;  // lsh_step: the call position of its workgroup row 0
  // The head layout (ops/head_layout.h): columns of a qk | v row, where the shared query-key and v start.
  uint32_t row = 0;
  uint32_t k_col = 0;
  uint32_t v_col = 0;
};
TERN_PUSH_FIELD(LshPush, heads, 32);
TERN_PUSH_FIELD(LshPush, hashes, 36);
TERN_PUSH_FIELD(LshPush, chunk, 40);
TERN_PUSH_FIELD(LshPush, chunks_before, 44);
TERN_PUSH_FIELD(LshPush, chunks_after, 48);
TERN_PUSH_FIELD(LshPush, pad_to, 52);
TERN_PUSH_FIELD(LshPush, pad_above, 56);
TERN_PUSH_FIELD(LshPush, n_factors, 60);
TERN_PUSH_FIELD(LshPush, rot_half, 64);
TERN_PUSH_FIELD(LshPush, n_buckets, 68);
TERN_PUSH_FIELD(LshPush, key_norm_eps, 72);
TERN_PUSH_FIELD(LshPush, scale, 76);
TERN_PUSH_FIELD(LshPush, self_mask_value, 80);
TERN_PUSH_FIELD(LshPush, capacity, 84);
TERN_PUSH_FIELD(LshPush, step_first, 88);
TERN_PUSH_KV_COLUMNS(LshPush, 92);
TERN_PUSH_SIZE(LshPush, 18);

// shaders/common/memory_rows.glsl: every memory_*.comp (each reads the fields it needs). family 0 RelativeXL,
// 1 Compressive; mem_len M, cmem_len C and rate give the rows held before a call; d the model width; qkv_width and
// q_col, k_col, v_col the head layout of the projected rows (ops/head_layout.h); clamp_len 0: none.
struct MemoryPush {
  BindingOffsets off{};
  uint32_t family = 0;
  uint32_t mem_len = 0;
  uint32_t cmem_len = 0;
  uint32_t rate = 0;
  uint32_t d = 0;
  uint32_t qkv_width = 0;
  uint32_t heads = 0;
  float norm_eps = 0.0f;
  float scale = 0.0f;
  uint32_t clamp_len = 0;
  uint32_t same_length = 0;
  uint32_t q_col = 0;
  uint32_t k_col = 0;
  uint32_t v_col = 0;
};
TERN_PUSH_FIELD(MemoryPush, family, 32);
TERN_PUSH_FIELD(MemoryPush, mem_len, 36);
TERN_PUSH_FIELD(MemoryPush, cmem_len, 40);
TERN_PUSH_FIELD(MemoryPush, rate, 44);
TERN_PUSH_FIELD(MemoryPush, d, 48);
TERN_PUSH_FIELD(MemoryPush, qkv_width, 52);
TERN_PUSH_FIELD(MemoryPush, heads, 56);
TERN_PUSH_FIELD(MemoryPush, norm_eps, 60);
TERN_PUSH_FIELD(MemoryPush, scale, 64);
TERN_PUSH_FIELD(MemoryPush, clamp_len, 68);
TERN_PUSH_FIELD(MemoryPush, same_length, 72);
TERN_PUSH_FIELD(MemoryPush, q_col, 76);
TERN_PUSH_FIELD(MemoryPush, k_col, 80);
TERN_PUSH_FIELD(MemoryPush, v_col, 84);
TERN_PUSH_SIZE(MemoryPush, 14);

}  // namespace tern::vk
