// SPDX-License-Identifier: MIT
// Adaptive span attention (Sukhbaatar et al. 2019; facebookresearch/adaptive-span): the soft span mask and the keys
// each head reads, the one definition the reference kernel, the CPU kernel and the planner share.
//
// Query i sees the keys at distances d = i - j in [1, max_span] (never itself). Keys at j < 0 are zero vectors with
// zero values: the model's initial cache of zero hidden states, whose projections are zero. They still take softmax
// mass through the position term q·key_pe.
//   score(d) = (q·k_j + q·key_pe[:, max_span - d]) * scale
//   m_h(d)   = clamp((1 - d + z_h * max_span) / ramp + 1, 0, 1)       z_h = span[h], the learned span ratio
//   out      = sum_d e(d) m_h(d) v_j / (sum_d e(d) m_h(d) + 1e-8 * sum_d e(d)),   e(d) = exp(score(d) - max)
// which is softmax, then the mask, then the renormalisation a·m / (sum(a·m) + 1e-8) of the reference codebase.
//
// Head h reads only the distances with m_h(d) > 0, d < z_h * max_span + ramp + 1 (at most max_span): its reach.
// Its softmax normaliser therefore runs over its reach, where the reference codebase's runs over the layer's trimmed
// window (max_span minus a multiple of 64 that the mask zeroes for every head of the layer). The keys in between have
// m = 0, so the two differ only inside the epsilon term: 1e-8 * sum(e) over the reach instead of over the window.
// An output changes by a relative 1e-8 * sum_window(e) / sum_reach(e·m) at most: the epsilon divided by the share of
// the window's softmax mass that survives the mask. That share is rarely small; on the random-init goldens
// (tests/goldens/adaptive_span_*) the whole model's log-probabilities move by 3e-6 relative, against 2e-7 for float32
// rounding. Matching the codebase bit for bit would need every head to keep the layer's whole window of keys.
//
// Grouped-query attention (AttentionParams.kv_heads): query head h reads key/value head h / (heads / kv_heads), and
// each key/value head's ring holds the longest reach of the query heads that read it.
//
// Without the span weight the op is plain attention over the previous max_span keys: no mask and no
// renormalisation, exactly the reference codebase with adaptive span disabled.
#pragma once

#include <cstdint>
#include <vector>

#include "format/model.h"
#include "format/status.h"
#include "ops/head_layout.h"

namespace tern {

constexpr double kAdaptiveSpanEps = 1e-8;

struct AdaptiveSpan {
  int heads = 1;
  int kv_heads = 0;  // key/value heads (AttentionParams.kv_heads); 0: one per query head
  int head_dim = 1;
  int64_t max_span = 0;           // L
  int64_t ramp = 0;               // R (unused without span)
  const float* key_pe = nullptr;  // [head_dim, max_span]
  const float* span = nullptr;    // [heads], the learned z; null: no mask, every head sees max_span keys
  std::vector<int64_t> reach;     // [heads], keys each head reads

  // Reads and checks the params and weights of an ATTENTION op of kind AdaptiveSpan.
  static Result<AdaptiveSpan> from(const Node& node);

  bool masked() const { return span != nullptr; }
  // m_h(d) for d in [1, max_span], in float32 as the reference codebase evaluates it; 1 when unmasked.
  float mask(int head, int64_t d) const;
  // Keys each key/value head's ring must hold: the longest reach of the query heads that read it; reach itself
  // when every query head has its own key/value head.
  std::vector<int64_t> kv_reach() const;
  // Keys (all key/value heads together) the streaming state holds after n tokens: sum_g min(n, kv_reach()[g]).
  int64_t state_keys(int64_t n) const;
  // Where qkv rows hold each head's query, key and value (the kind table's projection, ops/head_layout.h).
  HeadLayout layout() const;
};

// The streaming state of an AdaptiveSpan op in a session of max_tokens, which every backend keeps and saves the same
// (so a state saved on one loads on another): key/value head g keeps its last cap[g] = min(kv_reach[g], max_tokens)
// keys and values, position j in slot offset[g] + j % cap[g]; state [2, slots, head_dim] float32, every key/value
// head's keys (slot order), then every one's values; saved whole. Without grouped key/value heads, g is the query
// head and kv_reach its reach.
struct SpanStateLayout {
  std::vector<int64_t> cap, offset;  // [kv_heads]
  int64_t slots = 0;                 // sum(cap)
  int head_dim = 1;
  int group = 1;  // query heads per key/value head

  SpanStateLayout(const AdaptiveSpan& span, int64_t max_tokens) : head_dim(span.head_dim) {
    const std::vector<int64_t> reach = span.kv_reach();
    group = span.heads / int(reach.size());
    for (int64_t r : reach) {
      offset.push_back(slots);
      cap.push_back(r < max_tokens ? r : max_tokens);  // a head never needs more than the session can hold
      slots += cap.back();
    }
  }
  // Key/value head g's slot of position j.
  int64_t slot(int g, int64_t j) const { return offset[size_t(g)] + j % cap[size_t(g)]; }
  // The key/value head query head h reads.
  int kv_head(int h) const { return h / group; }
  uint64_t values_at() const { return uint64_t(slots) * uint64_t(head_dim) * sizeof(float); }  // bytes of the keys
  uint64_t bytes() const { return 2 * values_at(); }
};

}  // namespace tern
