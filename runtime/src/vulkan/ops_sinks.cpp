// SPDX-License-Identifier: MIT
// Lowering of what rotates cached keys again: dense ATTENTION in a session with attention sinks (ops/sink_cache.h;
// the CPU's cpu/attention_sinks.cpp) and the context shift of a dense state (the CPU's AttentionKernel::shift).
//
// Sinks: the ROTARY op before the attention passes its rows unrotated (ops_decoder.cpp); each call
//   1. shaders/sink_view.comp lays out the cache entries in cache order, keys rotated by their index, in the view
//      [S + W, 2*kv_inner], and the call's qkv rows, queries and keys rotated by held + r, in rotated [max_batch, row];
//   2. attention_sinks (attention.comp with SINKS) runs dense causal attention of the call's rows over the view;
//   3. kv_append_sinks (kv_append.comp with SINKS) writes the call's unrotated keys and values that survive the cut
//      into their slots of the cache [S + W, 2*kv_inner].
// The cos | sin of every index the view may hold comes from the host as the CPU computes it (Rotary::cos_sin_table):
// once at creation for static frequencies, each call for frequencies that depend on it.
#include <cstring>
#include <string>
#include <vector>

#include "ops/attention_kinds.h"
#include "vulkan/ops.h"

namespace tern::vk {

Status lower_sink_attention(const Node& node, Lowering& low) {
  const auto* p = node.fb_op->params_as_AttentionParams();
  TERN_ASSIGN_OR_RETURN(auto pattern, AttentionPattern::from(*p, node.label()));
  const Node* rotary_node = rotary_feeding(low.model, node);
  if (!rotary_node || pattern.kind != PatternKind::kDense || pattern.split) {
    return Unsupported(node.label() + ": attention sinks need dense attention fed by a rotary op");
  }
  const Rotary rotary = Rotary::of(*rotary_node);
  const HeadLayout heads = head_layout(node);
  if (rotary.head_dim != heads.head_dim) {
    return Unsupported(node.label() + ": attention sinks need the rotary head size " + std::to_string(rotary.head_dim) +
                       " to be the attention's " + std::to_string(heads.head_dim));
  }
  const SinkCache sinks = low.sinks;
  const int dh = heads.head_dim, pairs = rotary.pairs();
  const int64_t kv_inner = heads.kv_inner(), width = 2 * kv_inner, capacity = sinks.capacity();
  const int64_t indices = capacity + low.max_batch;  // a call's view: up to S + W cache entries, then its rows

  TERN_ASSIGN_OR_RETURN(auto cache, low.state(uint64_t(capacity * width) * sizeof(float), "attention-sink cache"));
  // Saved as the CPU kernel saves it: S and W, then keys and values per head in cache order (SinkCache::saved_bytes).
  SavedState saved;
  saved.node = node.index;
  saved.where = node.label();
  saved.slice = cache;
  saved.bytes = [sinks, heads](int64_t position) {
    return sinks.saved_bytes(position, heads.kv_heads, heads.head_dim, sizeof(float));
  };
  saved.copies = [sinks, heads](int64_t position, std::vector<StateCopy>* copies) {
    const int64_t kv_inner = heads.kv_inner();
    const uint64_t row = uint64_t(heads.head_dim) * sizeof(float);
    for (int part = 0; part < 2; ++part)
      for (int h = 0; h < heads.kv_heads; ++h)
        for (int64_t e = 0; e < sinks.held(position); ++e) {
          const int64_t slot = sinks.slot(sinks.position_of(e, position));
          const int64_t column = part * kv_inner + int64_t(h) * heads.head_dim;
          copies->push_back({sinks.saved_offset(part, h, e, position, heads.kv_heads, heads.head_dim, sizeof(float)),
                             uint64_t(slot * 2 * kv_inner + column) * sizeof(float), row});
        }
  };
  saved.host_bytes = SinkCache::kCountBytes;
  saved.host = [sinks](int64_t, uint8_t* out) {
    const int64_t counts[2] = {sinks.sinks, sinks.window};
    std::memcpy(out, counts, sizeof counts);
  };
  saved.check = [sinks, where = node.label()](int64_t, const uint8_t* in) -> Status {
    int64_t counts[2];
    std::memcpy(counts, in, sizeof counts);
    if (counts[0] == sinks.sinks && counts[1] == sinks.window) return Status::Ok();
    return InvalidArgument(where + ": the state was saved with sink_tokens " + std::to_string(counts[0]) +
                           " and sink_window " + std::to_string(counts[1]) + "; this session has " +
                           std::to_string(sinks.sinks) + " and " + std::to_string(sinks.window));
  };
  low.saved_states.push_back(std::move(saved));

  // cos | sin [indices, 2, pairs] of indices 0..: those of a call whose keys end at held + n.
  const uint64_t table_floats = uint64_t(indices) * 2 * uint64_t(pairs);
  Slice table;
  if (!rotary.per_call()) {
    std::vector<float> data(table_floats, 0.0f), f(size_t(pairs), 0.0f);
    rotary.cos_sin_table(0, indices, indices, f.data(), data.data());
    TERN_ASSIGN_OR_RETURN(table, low.constant(std::move(data), "attention-sink cos | sin"));
  } else {
    auto write = [rotary, sinks, f = std::vector<float>(size_t(pairs))](int64_t n, int64_t pos0, float* t) mutable {
      const int64_t total = sinks.held(pos0) + n;
      rotary.cos_sin_table(0, total, total, f.data(), t);
    };
    TERN_ASSIGN_OR_RETURN(table, low.call_table(table_floats, "attention-sink cos | sin", std::move(write)));
  }
  TERN_ASSIGN_OR_RETURN(auto view, low.scratch(uint64_t(capacity * width) * sizeof(float), "attention-sink view"));
  TERN_ASSIGN_OR_RETURN(auto rotated, low.scratch(uint64_t(low.max_batch) * uint64_t(heads.row) * sizeof(float),
                                                  "attention-sink rotated rows"));
  const Binding qkv = low.values[node.inputs[0]];  // [n, heads.row], unrotated

  SinkViewPush v;
  v.sinks = uint32_t(sinks.sinks);
  v.window = uint32_t(sinks.window);
  v.heads = uint32_t(heads.heads);
  v.kv_heads = uint32_t(heads.kv_heads);
  v.head_dim = uint32_t(dh);
  v.pairs = uint32_t(pairs);
  v.interleaved = rotary.interleaved ? 1 : 0;
  v.row = uint32_t(heads.row);
  v.q_col = uint32_t(heads.q);
  v.k_col = uint32_t(heads.k);
  v.v_col = uint32_t(heads.v);
  const int64_t row = heads.row;
  TERN_RETURN_IF_ERROR(low.program.add(make_dispatch(
      node, "sink_view", {}, kElementwiseGroup, v,
      [capacity, width, row](int64_t n) { return stride_groups(capacity * width + n * row, kElementwiseGroup); },
      {qkv, {cache, 0, 0, "attention-sink cache"}, {table, 0, 0, "attention-sink cos | sin"},
       {view, 0, 0, "attention-sink view"}, {rotated, 0, 0, "attention-sink rotated rows"}})));

  DispatchSpec a = attention_dispatch(node, low, pattern, "attention_sinks");
  AttentionPush attention = attention_push(heads);
  attention.chunk = 1;
  attention.stride = 1;
  attention.block = 1;
  attention.ring = uint32_t(capacity);  // the view's rows; held = min(pos0, ring)
  attention.scale = p->scale();
  attention.softcap = p->logit_softcap();
  a.push.set(attention);
  a.bindings = {{rotated, 0, 0, "attention-sink rotated rows"}, {view, 0, 0, "attention-sink view"},
                low.values[node.outputs[0]]};
  TERN_RETURN_IF_ERROR(add_attention(node, low, std::move(a), true));

  KvAppendPush append;
  append.kv_inner = uint32_t(kv_inner);
  append.ring = uint32_t(sinks.window);
  append.sinks = uint32_t(sinks.sinks);
  append.row = uint32_t(heads.row);
  append.k_col = uint32_t(heads.k);
  append.v_col = uint32_t(heads.v);
  return low.program.add(make_dispatch(node, "kv_append_sinks", {}, 256, append,
                                       [width](int64_t n) { return stride_groups(n * width, 256); },
                                       {qkv, {cache, 0, 0, "attention-sink cache"}}));
}

Status lower_kv_shift(const Node& node, Lowering& low, const Rotary& rotary, const Slice& state) {
  const HeadLayout heads = head_layout(node);
  const int pairs = rotary.pairs();
  // cos | sin [2, pairs] of the angle float32(-d) * inv_freq, written before each shift (n kept of pos0 held).
  const uint64_t bytes = 2 * uint64_t(pairs) * sizeof(float);
  TERN_ASSIGN_OR_RETURN(auto table, low.memory.allocate(bytes, MemoryKind::kHost, "context-shift cos | sin"));
  low.scratch_bytes += bytes;
  float* cos_sin = reinterpret_cast<float*>(table.mapped);
  low.shift->add_call_write([rotary, cos_sin, pairs](int64_t n, int64_t pos0) {
    const int64_t d = pos0 - n;
    for (int k = 0; k < pairs; ++k) rotary_cos_sin(-d, rotary.inv_freq[k], 1.0f, &cos_sin[k], &cos_sin[pairs + k]);
  });
  KvShiftPush push;
  push.kv_inner = uint32_t(heads.kv_inner());
  push.head_dim = uint32_t(heads.head_dim);
  push.pairs = uint32_t(pairs);
  push.interleaved = rotary.interleaved ? 1 : 0;
  const int64_t columns = 2 * heads.kv_inner();
  return low.shift->add(make_dispatch(node, "kv_shift", {}, 64, push,
                                      [columns](int64_t) { return stride_groups(columns, 64); },
                                      {{state, 0, 0, "attention state"}, {table, 0, 0, "context-shift cos | sin"}}));
}

}  // namespace tern::vk
