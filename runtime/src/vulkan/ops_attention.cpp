// Lowering of ATTENTION for the kinds with a shader (dense, sliding window, chunked local, strided, fixed; merged or
// split heads): shaders/attention.comp,
// then shaders/kv_append.comp to keep what later calls can reach in the op's device state.
#include "ops/attention_pattern.h"
#include "vulkan/ops.h"

namespace tern::vk {
namespace {

constexpr uint32_t kQueryRows = 32;  // BQ: query rows (invocations) per workgroup
constexpr uint32_t kKeyTile = 32;    // BK: keys staged in shared memory at a time, fewer for wide heads

uint32_t pattern_kind(PatternKind k) {
  switch (k) {
    case PatternKind::kSliding: return 1;
    case PatternKind::kChunked: return 2;
    case PatternKind::kStrided: return 3;
    case PatternKind::kFixed: return 4;
    default: return 0;
  }
}

}  // namespace

Status lower_windowed_attention(const Node& node, Lowering& low) {
  const auto* p = node.fb_op->params_as_AttentionParams();
  TERN_ASSIGN_OR_RETURN(auto pattern, AttentionPattern::from(*p, node.label()));
  const int heads = p->heads(), dh = p->head_dim();
  const int64_t inner = int64_t(heads) * dh;
  // The same slots as the CPU path's KvStore (AttentionPattern::cache_slots): every position for dense and strided, a ring for the windowed kinds,
  // a ring of the current block plus every block's summaries for fixed.
  const AttentionPattern& pat = pattern;
  const int64_t slots = pat.cache_slots(low.max_tokens);
  const int64_t ring = pat.keeps_all_keys() ? slots : pat.ring_slots(low.max_tokens);
  const int32_t block = pat.kind == PatternKind::kFixed ? int32_t(std::min<int64_t>(pat.block, INT32_MAX)) : 0;
  const int32_t summary = int32_t(std::min<int64_t>(pat.summary, INT32_MAX));
  TERN_ASSIGN_OR_RETURN(auto state, low.state(uint64_t(slots) * uint64_t(2 * inner) * sizeof(float),
                                              "attention state"));  // [slots, 2*inner]
  // Saved as KvStore::save: per head the used slots' keys, then the values ([slot][k | v] rows here).
  SavedState saved;
  saved.node = node.index;
  saved.where = node.label();
  saved.slice = state;
  const int64_t max_tokens = low.max_tokens;
  saved.bytes = [pat, max_tokens, inner](int64_t position) {
    return 2ull * uint64_t(pat.used_slots(max_tokens, position)) * uint64_t(inner) * sizeof(float);
  };
  saved.copies = [pat, max_tokens, heads, dh, inner](int64_t position, std::vector<StateCopy>* copies) {
    const int64_t used = pat.used_slots(max_tokens, position);
    const uint64_t row = uint64_t(dh) * sizeof(float);
    for (int64_t kv = 0; kv < 2; ++kv)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t r = 0; r < used; ++r) {
          copies->push_back({uint64_t((kv * heads + h) * used + r) * row,
                             uint64_t(r * 2 * inner + kv * inner + h * dh) * sizeof(float), row});
        }
  };
  low.saved_states.push_back(std::move(saved));

  uint32_t key_tile = kKeyTile;
  while (key_tile > 1 && 2ull * key_tile * uint64_t(dh) * sizeof(float) > low.ctx.limits().max_compute_shared_memory_size) {
    key_tile /= 2;
  }
  DispatchSpec a;
  a.where = where(node);
  a.node = node.index;
  a.shader = "attention";
  a.spec = {kQueryRows, uint32_t(dh), key_tile, pattern_kind(pat.kind)};
  a.local_size = {kQueryRows, 1, 1};
  a.shared_bytes = uint32_t(std::min<uint64_t>(2ull * key_tile * uint64_t(dh) * sizeof(float), UINT32_MAX));
  AttentionPush attention;
  attention.heads = heads;
  attention.window = int32_t(std::min<int64_t>(pattern.window, INT32_MAX));
  attention.chunk = int32_t(std::max<int64_t>(1, std::min<int64_t>(pattern.chunk, INT32_MAX)));
  attention.chunks_before = int32_t(std::min<int64_t>(pattern.chunks_before, INT32_MAX));
  attention.ring = uint32_t(ring);
  attention.scale = p->scale();
  attention.stride = int32_t(std::max<int64_t>(1, std::min<int64_t>(pat.stride, INT32_MAX)));
  attention.block = std::max<int32_t>(1, block);
  attention.summary = summary;
  attention.split = pat.split ? 1 : 0;
  a.push.set(attention);
  a.groups = [heads](int64_t n) { return Groups{uint32_t((n + kQueryRows - 1) / kQueryRows), uint32_t(heads), 1}; };
  const Binding qkv = low.values[node.inputs[0]];  // [n, 3*inner]
  a.bindings = {qkv, {state, 0, 0, "attention state"}, low.values[node.outputs[0]]};
  TERN_RETURN_IF_ERROR(low.program.add(std::move(a)));

  DispatchSpec kv;
  kv.where = where(node);
  kv.node = node.index;
  kv.shader = "kv_append";
  kv.local_size = {256, 1, 1};
  KvAppendPush append;
  append.inner = uint32_t(inner);
  append.ring = uint32_t(ring);
  append.block = block;
  append.summary = summary;
  kv.push.set(append);
  kv.groups = [inner](int64_t n) { return stride_groups(n * 2 * inner, 256); };
  kv.bindings = {qkv, {state, 0, 0, "attention state"}};
  return low.program.add(std::move(kv));
}

}  // namespace tern::vk
