// SPDX-License-Identifier: MIT
// The attention kinds' facts (ops/attention_kinds.h). Each kind's parameters are parsed by its own ops/<kind> file
// (attention_pattern, adaptive_span, relative_xl, lsh, compressive, routing); this file says what the op needs of
// each.
#include "ops/attention_kinds.h"

#include <algorithm>
#include <initializer_list>
#include <string>

#include "ops/adaptive_span.h"
#include "ops/attention_pattern.h"
#include "ops/compressive.h"
#include "ops/kv_state.h"
#include "ops/lsh.h"
#include "ops/relative_xl.h"
#include "ops/routing.h"

namespace tern {
namespace {

// qkv [n, 3*inner] (qk | v [n, 2*inner] for LSH) -> [n, inner]: the kinds that read their projected rows.
Status expect_projected_rows(const Node& node, const std::vector<ValueInfo>& values) {
  const HeadLayout heads = head_layout(node);
  TERN_RETURN_IF_ERROR(expect_width(node, values, false, 0, heads.row));
  return expect_width(node, values, true, 0, heads.inner());
}

// Input [n, d] (a layer input or attention input that the kind projects itself) -> [n, inner].
Status expect_rows_of(const Node& node, const std::vector<ValueInfo>& values, int64_t d) {
  TERN_RETURN_IF_ERROR(expect_width(node, values, false, 0, d));
  return expect_width(node, values, true, 0, head_layout(node).inner());
}

// One call's scores: n queries against the call's n keys and `memory` rows kept from before. UINT64_MAX when that
// passes 2^64 - 1 bytes (n = 2^31 with 4 heads is 2^66): the planner's numbers saturate rather than wrap.
uint64_t scores_bytes(const Node& node, int64_t n, uint64_t memory) {
  const auto* p = node.fb_op->params_as_AttentionParams();
  uint64_t bytes = uint64_t(p->heads());
  for (uint64_t factor : {uint64_t(n), uint64_t(n) + memory, uint64_t(sizeof(float))})
    if (__builtin_mul_overflow(bytes, factor, &bytes)) return UINT64_MAX;
  return bytes;
}

uint64_t call_scores_bytes(const Node& node, int64_t n) { return scores_bytes(node, n, 0); }


// Dense, sliding window, chunked local, strided and fixed: a visibility pattern (ops/attention_pattern.h), no weights.
Status validate_windowed(const Node& node, const std::vector<ValueInfo>& values) {
  TERN_RETURN_IF_ERROR(AttentionPattern::from(*node.fb_op->params_as_AttentionParams(), node.label()).status());
  for (const TensorInfo* w : node.weights) {
    if (w) return InvalidModel(node.label() + ": weight '" + w->name + "' given, but only kinds AdaptiveSpan and RelativeXL have weights");
  }
  return expect_projected_rows(node, values);
}

// One key and one value per key/value head for every kept position, float32 or float16 elements (ops/kv_state.h).
uint64_t windowed_state_bytes(const Node& node, int64_t n, tern_kv_storage kv) {
  const AttentionPattern pattern = AttentionPattern::from(*node.fb_op->params_as_AttentionParams(), "").value();
  const KvStateLayout state(pattern, head_layout(node), 0, kv == TERN_KV_STORAGE_F16 ? sizeof(uint16_t) : sizeof(float));
  return state.bytes_of(pattern.state_keys(n));
}

// q · k and p · v for every (query, key) pair the pattern shows: 4 * head_dim per pair.
uint64_t windowed_flops(const Node& node, int64_t pos0, int64_t n) {
  const auto* p = node.fb_op->params_as_AttentionParams();
  const auto made = AttentionPattern::from(*p, std::string());
  if (!made.ok()) return 0;  // validated before; never here
  const AttentionPattern& pattern = made.value();
  // Heads see one pattern, or two under a split layout (the first half of the heads and the second).
  const int groups = pattern.split ? 2 : 1;
  const uint64_t heads_per_group = uint64_t(pattern.heads / groups);
  uint64_t pairs = 0;
  for (int g = 0; g < groups; ++g) {
    const int head = g == 0 ? 0 : pattern.heads - 1;
    uint64_t keys = 0;
    for (int64_t i = pos0; i < pos0 + n; ++i) {
      const int64_t lo = pattern.local_lo(head, i);
      keys += uint64_t(i - lo + 1);
      if (pattern.has_scattered(head)) {
        pattern.scattered(head, i, lo, [&](int64_t begin, int64_t end) { keys += uint64_t(end - begin); });
      }
    }
    pairs += heads_per_group * keys;
  }
  return pairs * 4 * uint64_t(p->head_dim());
}

// Dense and strided keep every key, fixed every block's summaries: max_tokens. Sliding and chunked windows keep a
// ring of the keys later queries reach, complete when it fits in max_tokens.
int64_t windowed_max_sequence(const Node& node, int64_t max_tokens) {
  const AttentionPattern pattern = AttentionPattern::from(*node.fb_op->params_as_AttentionParams(), "").value();
  if (pattern.keeps_all_keys() || pattern.kind == PatternKind::kFixed) return max_tokens;
  return pattern.ring_keys() <= max_tokens ? kNoSequenceLimit : max_tokens;
}

// The memory kinds keep a fixed number of rows whatever the sequence.
int64_t unlimited(const Node&, int64_t) { return kNoSequenceLimit; }
// LSH and routing: their caches hold max_tokens positions (the first call included).
int64_t call_limited(const Node&, int64_t max_tokens) { return max_tokens; }

Status validate_adaptive_span(const Node& node, const std::vector<ValueInfo>& values) {
  if (node.weights.size() > 2) return InvalidModel(node.label() + ": kind AdaptiveSpan takes at most 2 weights");
  TERN_RETURN_IF_ERROR(AdaptiveSpan::from(node).status());
  return expect_projected_rows(node, values);
}

// Each key/value head keeps the longest reach of the query heads that read it (each head its own without grouped
// key/value heads): one key and one value per kept position, summed over the key/value heads.
uint64_t adaptive_span_state_bytes(const Node& node, int64_t n, tern_kv_storage /*float32 under either*/) {
  const auto* p = node.fb_op->params_as_AttentionParams();
  return 2ull * uint64_t(p->head_dim()) * sizeof(float) * uint64_t(AdaptiveSpan::from(node).value().state_keys(n));
}

// Each head keeps the keys its span reaches: complete when every head's reach fits in max_tokens.
int64_t adaptive_span_max_sequence(const Node& node, int64_t max_tokens) {
  const AdaptiveSpan span = AdaptiveSpan::from(node).value();
  for (int64_t reach : span.reach) {
    if (reach > max_tokens) return max_tokens;
  }
  return kNoSequenceLimit;
}

// Transformer-XL (ops/relative_xl.h): reads the layer input h [n, d].
Status validate_relative_xl(const Node& node, const std::vector<ValueInfo>& values) {
  TERN_ASSIGN_OR_RETURN(const RelativeXL xl, RelativeXL::from(node));
  return expect_rows_of(node, values, xl.d);
}

// The memory of mem_len layer inputs, full (of zeros) from the first token on.
uint64_t relative_xl_state_bytes(const Node& node, int64_t, tern_kv_storage /*float32 under either*/) { return RelativeXL::from(node).value().state_bytes(); }

// Transformer-XL's kernels compute, at creation, r(p) [P, inner] and v·r(p) [P, heads] for the P distances a call of
// max_batch tokens reads, from the encodings pe(p) [P, d]: all three at once at their peak.
uint64_t relative_xl_setup_bytes(const Node& node, int64_t max_batch) {
  const auto xl = RelativeXL::from(node);
  if (!xl.ok()) return 0;  // validated before; never here
  const RelativeXL& x = xl.value();
  uint64_t bytes = 0;
  const uint64_t per_row = (uint64_t(x.inner()) + uint64_t(x.heads) + uint64_t(x.d)) * sizeof(float);
  return __builtin_mul_overflow(uint64_t(x.position_rows(max_batch)), per_row, &bytes) ? UINT64_MAX : bytes;
}

uint64_t relative_xl_dense_bytes(const Node& node, int64_t n) {
  return scores_bytes(node, n, uint64_t(node.fb_op->params_as_AttentionParams()->kind_as_RelativeXL()->mem_len()));
}

// Reformer LSH (ops/lsh.h): shared query-key and values, qk | v [n, 2*inner]; weight: rotations.
Status validate_lsh(const Node& node, const std::vector<ValueInfo>& values) {
  TERN_RETURN_IF_ERROR(LshAttention::from(node).status());
  return expect_projected_rows(node, values);
}

// Compressive memory (ops/compressive.h): reads its attention input a [n, d].
Status validate_compressive(const Node& node, const std::vector<ValueInfo>& values) {
  TERN_ASSIGN_OR_RETURN(const Compressive c, Compressive::from(node));
  return expect_rows_of(node, values, c.d);
}

// The memory and the compressed memory: attention inputs, d floats a row.
uint64_t compressive_state_bytes(const Node& node, int64_t n, tern_kv_storage /*float32 under either*/) {
  const Compressive c = Compressive::from(node).value();
  return uint64_t(c.state_rows(n)) * uint64_t(c.d) * sizeof(float);
}

uint64_t compressive_dense_bytes(const Node& node, int64_t n) {
  const auto* c = node.fb_op->params_as_AttentionParams()->kind_as_Compressive();
  return scores_bytes(node, n,
                      uint64_t(std::max(0, c->mem_len())) + uint64_t(std::max(0, c->rate() - 1)) +
                          uint64_t(std::max(0, c->cmem_len())));
}

// LSH (ops/lsh.h): the cache a later call continues from, every position's qk | v and buckets.
uint64_t lsh_state_bytes(const Node& node, int64_t n, tern_kv_storage /*float32 under either*/) {
  return LshAttention::from(node).value().cache_bytes(n);
}

// Routing (ops/routing.h, "Continuing a sequence"): per cluster its best keys and query scores, a ring per local head.
uint64_t routing_state_bytes(const Node& node, int64_t n, tern_kv_storage /*float32 under either*/) {
  return RoutingAttention::from(node).value().cache_bytes(n);
}

// Routing Transformer (ops/routing.h): qkv as the windowed kinds; weight: centroids.
Status validate_routing(const Node& node, const std::vector<ValueInfo>& values) {
  TERN_RETURN_IF_ERROR(RoutingAttention::from(node).status());
  return expect_projected_rows(node, values);
}

using fb::AttentionKind;
constexpr Projection kQkv = Projection::kQkv, kSharedQk = Projection::kSharedQk;
// Dense, windowed, sparse and adaptive-span kernels attend causally over their KV cache or ring, so a call split
// into appends gives the same rows. RelativeXL and Compressive memory moves once per call, so a split call would
// move it differently; so does Lsh's first call, whose sort sees the whole call (later calls step one position at
// a time, as Hugging Face's cached generation), and Routing's, whose clusters see the whole call (later positions
// step one at a time against each cluster's best keys).
// Flops: the windowed kinds count theirs; adaptive span, Transformer-XL, compressive, LSH and routing do not.
// Compressible weights: the projections of the kinds that carry them (RelativeXL's qkv and r_net, Compressive's qkv
// and conv weight); LSH rotations and routing centroids decide buckets and clusters, and stay float32 like every
// other attention weight.
constexpr uint32_t kNoCompressedWeights = 0;
constexpr uint32_t slots(std::initializer_list<int> weights) {
  uint32_t mask = 0;
  for (int w : weights) mask |= 1u << w;
  return mask;
}
constexpr AttentionKindDef kKinds[] = {
    // kind, name, projection, validate, state_bytes, dense_bytes, streaming, max_sequence,
    // setup_bytes, flops, compressible weight slots, state serves later calls only, grouped key/value heads,
    // soft-capped scores
    {AttentionKind::Dense, "Dense", kQkv, validate_windowed, windowed_state_bytes, call_scores_bytes,
     Streaming::kAppends, windowed_max_sequence, nullptr, windowed_flops, kNoCompressedWeights, false, true, true},
    {AttentionKind::SlidingWindow, "SlidingWindow", kQkv, validate_windowed, windowed_state_bytes, call_scores_bytes,
     Streaming::kAppends, windowed_max_sequence, nullptr, windowed_flops, kNoCompressedWeights, false, true, true},
    {AttentionKind::ChunkedLocal, "ChunkedLocal", kQkv, validate_windowed, windowed_state_bytes, call_scores_bytes,
     Streaming::kAppends, windowed_max_sequence, nullptr, windowed_flops, kNoCompressedWeights, false, true, true},
    {AttentionKind::Strided, "Strided", kQkv, validate_windowed, windowed_state_bytes, call_scores_bytes,
     Streaming::kAppends, windowed_max_sequence, nullptr, windowed_flops, kNoCompressedWeights, false, true, true},
    {AttentionKind::Fixed, "Fixed", kQkv, validate_windowed, windowed_state_bytes, call_scores_bytes,
     Streaming::kAppends, windowed_max_sequence, nullptr, windowed_flops, kNoCompressedWeights, false, true, true},
    {AttentionKind::AdaptiveSpan, "AdaptiveSpan", kQkv, validate_adaptive_span, adaptive_span_state_bytes,
     call_scores_bytes, Streaming::kAppends, adaptive_span_max_sequence, nullptr, nullptr, kNoCompressedWeights, false, true, false},
    {AttentionKind::RelativeXL, "RelativeXL", kQkv, validate_relative_xl, relative_xl_state_bytes,
     relative_xl_dense_bytes, Streaming::kWholeCall, unlimited, relative_xl_setup_bytes, nullptr, slots({0, 1}), false, false, false},
    {AttentionKind::Lsh, "Lsh", kSharedQk, validate_lsh, lsh_state_bytes, call_scores_bytes, Streaming::kWholeCall,
     call_limited, nullptr, nullptr, kNoCompressedWeights, true, false, false},
    {AttentionKind::Compressive, "Compressive", kQkv, validate_compressive, compressive_state_bytes,
     compressive_dense_bytes, Streaming::kWholeCall, unlimited, nullptr, nullptr, slots({0, 2}), false, false, false},
    {AttentionKind::Routing, "Routing", kQkv, validate_routing, routing_state_bytes, call_scores_bytes,
     Streaming::kWholeCall, call_limited, nullptr, nullptr, kNoCompressedWeights, true, true, false},
};
static_assert(covers_every_attention_kind(kKinds), "one row per attention kind of the schema, in schema order");

}  // namespace

const AttentionKindDef* find_attention_kind(fb::AttentionKind kind) {
  const size_t k = size_t(kind);
  return k >= 1 && k <= kAttentionKindCount ? &kKinds[k - 1] : nullptr;
}

bool state_serves_later_calls_only(const Node& node) {
  return node.code == fb::OpCode::ATTENTION && attention_kind(node).state_serves_later_calls_only;
}

HeadLayout head_layout(const Node& node) {
  const auto* p = node.fb_op->params_as_AttentionParams();
  return head_layout(p->kind_type(), p->heads(), p->head_dim(), p->kv_heads() > 0 ? p->kv_heads() : p->heads());
}

HeadLayout head_layout(fb::AttentionKind kind, int heads, int head_dim, int kv_heads) {
  return HeadLayout::of(find_attention_kind(kind)->projection, heads, head_dim, kv_heads > 0 ? kv_heads : heads);
}

const AttentionKindDef& attention_kind(const Node& node) {
  return *find_attention_kind(node.fb_op->params_as_AttentionParams()->kind_type());
}

}  // namespace tern
