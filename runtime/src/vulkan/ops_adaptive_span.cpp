// SPDX-License-Identifier: MIT
// Lowering of ATTENTION of kind AdaptiveSpan (semantics: ops/adaptive_span.h): shaders/adaptive_span.comp, then
// shaders/span_append.comp to keep each key/value head's reach of recent keys and values in the op's device state (one
// ring per key/value head, cap[g] = min(kv_reach[g], max_tokens) slots: the CPU path's layout and bytes). The per-head numbers, the mask
// m_h(d) and key_pe by distance are computed on the host at session creation, as the CPU path does, and uploaded once.
#include <algorithm>
#include <cstring>

#include "ops/adaptive_span.h"
#include "vulkan/ops.h"

namespace tern::vk {
namespace {

float int_bits(int64_t v) {
  const int32_t i = int32_t(v);
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}

}  // namespace

Status lower_adaptive_span(const Node& node, Lowering& low) {
  TERN_ASSIGN_OR_RETURN(auto parsed, AdaptiveSpan::from(node));
  const AdaptiveSpan& a = parsed;
  const int heads = a.heads, dh = a.head_dim;
  const HeadLayout heads_layout = a.layout();
  const int64_t L = a.max_span, kv_inner = heads_layout.kv_inner();
  for (const TensorInfo* w : node.weights) {
    if (w && w->dtype != fb::DType::F32) return Unsupported(node.label() + ": adaptive span weights must be F32 on Vulkan");
  }
  // tables: [heads, 4] (reach, mask offset, and the ring offset and cap of the head's key/value head) as int bits,
  // m_h(1..reach[h]) head after head, then
  // pe [max_span, dh] by distance: row d-1 is key_pe[:, max_span - d].
  // The state as ops/adaptive_span.h lays it out (SpanStateLayout), which the CPU kernel keeps and saves too.
  const SpanStateLayout layout(a, low.max_tokens);
  const int64_t slots = layout.slots;
  int64_t mask_total = 0;
  for (int64_t r : a.reach) mask_total += r;
  std::vector<float> tables;
  tables.reserve(size_t(4 * heads + mask_total + L * dh));
  for (int h = 0; h < heads; ++h) {
    const int g = layout.kv_head(h);
    const int64_t reach = a.reach[size_t(h)], cap = layout.cap[size_t(g)], ring_offset = layout.offset[size_t(g)];
    int64_t mask_offset = 0;
    for (int g = 0; g < h; ++g) mask_offset += a.reach[size_t(g)];
    if (reach > INT32_MAX || mask_offset > INT32_MAX || ring_offset > INT32_MAX) {
      return Unsupported(node.label() + ": adaptive span too large for the Vulkan shader's 32-bit indices");
    }
    tables.insert(tables.end(), {int_bits(reach), int_bits(mask_offset), int_bits(ring_offset), int_bits(cap)});
  }
  for (int h = 0; h < heads; ++h)
    for (int64_t d = 1; d <= a.reach[size_t(h)]; ++d) tables.push_back(a.mask(h, d));
  const int64_t pe_at = int64_t(tables.size());
  for (int64_t d = 1; d <= L; ++d)
    for (int c = 0; c < dh; ++c) tables.push_back(a.key_pe[int64_t(c) * L + (L - d)]);
  if (int64_t(tables.size()) > INT32_MAX || slots * 2 * dh > INT32_MAX) {
    return Unsupported(node.label() + ": adaptive span too large for the Vulkan shader's 32-bit indices");
  }
  TERN_ASSIGN_OR_RETURN(auto table, low.constant(std::move(tables), "adaptive span tables"));
  // [2, sum(cap), dh]: keys, then values. At least one float so that the binding is never empty.
  TERN_ASSIGN_OR_RETURN(auto state, low.state(std::max<uint64_t>(sizeof(float), layout.bytes()), "attention state"));
  if (slots == 0) low.state_bytes -= sizeof(float);  // the placeholder float is not state the CPU path counts
  low.save_whole(node, state, layout.bytes());

  const Binding qkv = low.values[node.inputs[0]];  // [n, heads_layout.row]
  const Binding tab{table, 0, 0, "adaptive span tables"};
  const Binding st{state, 0, 0, "attention state"};
  AdaptiveSpanPush attend;
  attend.heads = uint32_t(heads);
  attend.scale = node.fb_op->params_as_AttentionParams()->scale();
  attend.eps = a.masked() ? float(kAdaptiveSpanEps) : 0.0f;
  attend.mask_at = uint32_t(4 * heads);  // after the per-head numbers
  attend.pe_at = uint32_t(pe_at);
  attend.total_slots = uint32_t(slots);
  attend.row = uint32_t(heads_layout.row);
  attend.q_col = uint32_t(heads_layout.q);
  attend.k_col = uint32_t(heads_layout.k);
  attend.v_col = uint32_t(heads_layout.v);
  attend.kv_heads = uint32_t(heads_layout.kv_heads);
  TERN_RETURN_IF_ERROR(low.program.add(make_dispatch(
      node, "adaptive_span", {uint32_t(dh)}, 64, attend,
      [heads](int64_t n) { return Groups{uint32_t((n + 63) / 64), uint32_t(heads), 1}; },
      {qkv, st, tab, low.values[node.outputs[0]]})));
  SpanAppendPush append;
  append.heads = uint32_t(heads);
  append.total_slots = uint32_t(slots);
  append.row = attend.row;
  append.k_col = attend.k_col;
  append.v_col = attend.v_col;
  append.kv_heads = attend.kv_heads;
  return low.program.add(make_dispatch(node, "span_append", {uint32_t(dh)}, 256, append,
                                       [kv_inner](int64_t n) { return stride_groups(n * kv_inner, 256); },
                                       {qkv, st, tab}));
}

}  // namespace tern::vk
