// SPDX-License-Identifier: MIT
// Lowering of ATTENTION for the kinds with a shader (dense, sliding window, chunked local, strided, fixed; merged or
// split heads): shaders/attention.comp for calls of many rows and shaders/attention_rows.comp for calls of a few
// (generation), both recorded and a call's n giving the other no workgroups, then shaders/kv_append.comp to keep
// what later calls can reach in the op's device state (for dense attention, attention_rows.comp does that itself). With attention sinks: ops_sinks.cpp.
#include <algorithm>
#include <iterator>

#include "ops/attention_kinds.h"
#include "ops/kv_state.h"
#include "ops/rotary.h"
#include "vulkan/ops.h"

namespace tern::vk {
namespace {

constexpr uint32_t kQueryRows = 32;  // BQ: query rows (invocations) per workgroup
constexpr uint32_t kKeyTile = 32;    // BK: keys staged in shared memory at a time, fewer for wide heads
// Calls of up to this many rows run attention_rows.comp, a workgroup per (row, head) whose invocations split the
// keys; larger ones attention.comp, whose key tiles serve 32 rows at once.
constexpr int64_t kFewRows = 8;

// attention.comp's KIND spec constant for each PatternKind, in the enum's order.
constexpr uint32_t kShaderPatternKind[] = {
    0,  // kDense
    1,  // kSliding
    2,  // kChunked
    3,  // kStrided
    4,  // kFixed
};
static_assert(std::size(kShaderPatternKind) == size_t(PatternKind::kFixed) + 1, "a shader kind for every PatternKind");

}  // namespace

DispatchSpec attention_dispatch(const Node& node, const Lowering& low, const AttentionPattern& pattern, const char* shader) {
  const int dh = head_layout(node).head_dim;
  uint32_t key_tile = kKeyTile;
  while (key_tile > 1 && 2ull * key_tile * uint64_t(dh) * sizeof(float) > low.ctx.limits().max_compute_shared_memory_size) {
    key_tile /= 2;
  }
  DispatchSpec a;
  a.where = where(node);
  a.node = node.index;
  a.shader = shader;
  a.spec = {kQueryRows, uint32_t(dh), key_tile, kShaderPatternKind[size_t(pattern.kind)]};
  a.local_size = {kQueryRows, 1, 1};
  a.shared_bytes = uint32_t(std::min<uint64_t>(2ull * key_tile * uint64_t(dh) * sizeof(float), UINT32_MAX));
  a.groups = [q_heads = head_layout(node).heads](int64_t n) {
    return Groups{uint32_t((n + kQueryRows - 1) / kQueryRows), uint32_t(q_heads), 1};
  };
  return a;
}

Status add_attention(const Node& node, Lowering& low, DispatchSpec tiled, bool sinks, bool append) {
  const DeviceLimits& l = low.ctx.limits();
  const uint32_t dh = uint32_t(head_layout(node).head_dim), heads = uint32_t(head_layout(node).heads);
  // With subgroup arithmetic one subgroup (at least 8 invocations, as linear_rows); else a 64-wide shared-memory
  // tree over [dh + 1] sums an invocation, narrowed while the device's shared memory is too small for it.
  const bool subgroups = l.subgroup_arithmetic;
  uint32_t wg = subgroups ? fit_workgroup(l, std::max<uint32_t>(8, l.subgroup_size), 1) : fit_workgroup(l, 64, 1);
  auto shared_bytes = [dh](uint32_t w) { return uint64_t(dh + (dh + 1) * w) * sizeof(float); };
  while (!subgroups && wg > 1 && shared_bytes(wg) > l.max_compute_shared_memory_size) wg /= 2;
  static const char* const kRowsShaders[2][2] = {{"attention_rows", "attention_rows_sg"},
                                                 {"attention_rows_sinks", "attention_rows_sinks_sg"}};
  DispatchSpec rows = tiled;
  rows.shader = kRowsShaders[sinks ? 1 : 0][subgroups ? 1 : 0];
  rows.spec = {wg, dh, 0, tiled.spec[3], append ? 1u : 0u};  // spec 2 (attention.comp's key tile) unused
  rows.local_size = {wg, 1, 1};
  rows.shared_bytes = uint32_t(std::min<uint64_t>(shared_bytes(wg), UINT32_MAX));
  rows.groups = [heads](int64_t n) { return n <= kFewRows ? Groups{uint32_t(n), heads, 1} : Groups{0, 0, 0}; };
  TERN_RETURN_IF_ERROR(low.program.add(std::move(rows)));
  if (low.max_batch <= kFewRows) return Status::Ok();  // no call has more rows
  tiled.groups = [many = std::move(tiled.groups)](int64_t n) { return n <= kFewRows ? Groups{0, 0, 0} : many(n); };
  return low.program.add(std::move(tiled));
}

AttentionPush attention_push(const HeadLayout& heads) {
  AttentionPush push;
  push.heads = heads.heads;
  push.row = uint32_t(heads.row);
  push.q_col = uint32_t(heads.q);
  push.k_col = uint32_t(heads.k);
  push.v_col = uint32_t(heads.v);
  push.kv_heads = heads.kv_heads;
  return push;
}

Status lower_windowed_attention(const Node& node, Lowering& low) {
  if (low.sinks.on()) return lower_sink_attention(node, low);  // dense with rotary positions: the session checks
  const auto* p = node.fb_op->params_as_AttentionParams();
  TERN_ASSIGN_OR_RETURN(auto pattern, AttentionPattern::from(*p, node.label()));
  const HeadLayout heads = head_layout(node);
  const int64_t kv_inner = heads.kv_inner();
  // The slots of ops/kv_state.h, as [slot][k | v] rows of every key/value head here; saved as KvStateLayout says.
  const AttentionPattern& pat = pattern;
  const KvStateLayout layout(pattern, heads, low.max_tokens, sizeof(float));
  const int64_t slots = layout.slots();
  const int64_t ring = pat.keeps_all_keys() ? slots : layout.ring();
  const int32_t block = pat.kind == PatternKind::kFixed ? int32_t(std::min<int64_t>(pat.block, INT32_MAX)) : 0;
  const int32_t summary = int32_t(std::min<int64_t>(pat.summary, INT32_MAX));
  TERN_ASSIGN_OR_RETURN(auto state, low.state(layout.bytes(), "attention state"));  // [slots, 2*kv_inner]
  SavedState saved;
  saved.node = node.index;
  saved.where = node.label();
  saved.slice = state;
  saved.bytes = [layout](int64_t position) { return layout.saved_bytes(position); };
  saved.copies = [layout, kv_inner](int64_t position, std::vector<StateCopy>* copies) {
    const int64_t used = layout.used_slots(position);
    const uint64_t row = uint64_t(layout.head_dim) * sizeof(float);
    for (int part = 0; part < 2; ++part)
      for (int h = 0; h < layout.kv_heads; ++h)
        for (int64_t s = 0; s < used; ++s) {
          const int64_t column = part * kv_inner + int64_t(h) * layout.head_dim;
          copies->push_back({layout.saved_offset(part, h, s, position),
                             uint64_t(s * 2 * kv_inner + column) * sizeof(float), row});
        }
  };
  low.saved_states.push_back(std::move(saved));
  // A session that may shift its context (VulkanBackend::shift): the state's move and rotation, for a dense op fed by
  // static rotary positions (the session checks that every stateful op is one before it shifts).
  if (low.shift && pat.kind == PatternKind::kDense && !pat.split) {
    const Node* rotary = rotary_feeding(low.model, node);
    if (rotary && !Rotary::of(*rotary).per_call()) {
      TERN_RETURN_IF_ERROR(lower_kv_shift(node, low, Rotary::of(*rotary), state));
    }
  }

  DispatchSpec a = attention_dispatch(node, low, pattern, "attention");
  AttentionPush attention = attention_push(heads);
  attention.window = int32_t(std::min<int64_t>(pattern.window, INT32_MAX));
  attention.chunk = int32_t(std::max<int64_t>(1, std::min<int64_t>(pattern.chunk, INT32_MAX)));
  attention.chunks_before = int32_t(std::min<int64_t>(pattern.chunks_before, INT32_MAX));
  attention.ring = uint32_t(ring);
  attention.scale = p->scale();
  attention.stride = int32_t(std::max<int64_t>(1, std::min<int64_t>(pat.stride, INT32_MAX)));
  attention.block = std::max<int32_t>(1, block);
  attention.summary = summary;
  attention.split = pat.split ? 1 : 0;
  attention.softcap = p->logit_softcap();  // validated: finite, >= 0 (0: none)
  a.push.set(attention);
  const Binding qkv = low.values[node.inputs[0]];  // [n, heads.row]
  a.bindings = {qkv, {state, 0, 0, "attention state"}, low.values[node.outputs[0]]};
  // Dense attention keeps every key at its own slot: in calls of a few rows the attention dispatch appends them
  // itself (attention_rows.comp, APPEND), one dispatch fewer per generated token; kv_append.comp does it after
  // larger calls and, with a ring, after every call (a later row's key may take an earlier one's slot).
  const bool rows_append = low.fusion.enabled && pat.kind == PatternKind::kDense && !pat.split && pat.keeps_all_keys();
  TERN_RETURN_IF_ERROR(add_attention(node, low, std::move(a), false, rows_append));

  DispatchSpec kv;
  kv.where = where(node);
  kv.node = node.index;
  kv.shader = "kv_append";
  kv.local_size = {256, 1, 1};
  KvAppendPush append;
  append.kv_inner = uint32_t(kv_inner);
  append.ring = uint32_t(ring);
  append.block = block;
  append.summary = summary;
  append.row = uint32_t(heads.row);
  append.k_col = uint32_t(heads.k);
  append.v_col = uint32_t(heads.v);
  kv.push.set(append);
  kv.groups = [kv_inner, rows_append](int64_t n) {
    return rows_append && n <= kFewRows ? Groups{0, 0, 0} : stride_groups(n * 2 * kv_inner, 256);
  };
  kv.bindings = {qkv, {state, 0, 0, "attention state"}};
  return low.program.add(std::move(kv));
}

}  // namespace tern::vk
