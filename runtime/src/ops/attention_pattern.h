// SPDX-License-Identifier: MIT
// Which keys each query may see, for every attention kind: the one definition the reference kernel, the CPU
// kernel and the planner share. All kinds are causal (key j <= query i).
//
// Each head sees, for query i, a contiguous run of keys [local_lo(h, i), i] plus, below it, "scattered" keys
// (strided's every-l-th key, fixed's summaries). local_lo never decreases as i grows.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "format/status.h"
#include "tern_generated.h"

namespace tern {

enum class PatternKind { kDense, kSliding, kChunked, kStrided, kFixed };

struct AttentionPattern {
  PatternKind kind = PatternKind::kDense;
  int heads = 1;
  int64_t window = 0;         // sliding
  int64_t chunk = 0;          // chunked
  int64_t chunks_before = 0;  // chunked
  int64_t stride = 0;         // strided
  int64_t block = 0;          // fixed
  int64_t summary = 0;        // fixed
  bool split = false;         // strided, fixed: first half of heads sees part one, second half part two

  // Reads and checks the kind of an ATTENTION op; `where` prefixes messages.
  static Result<AttentionPattern> from(const fb::AttentionParams& params, const std::string& where);

  bool visible(int head, int64_t i, int64_t j) const;
  int64_t local_lo(int head, int64_t i) const;
  bool has_scattered(int head) const;
  // Calls emit(begin, end) for the scattered keys of query i below lo, as ascending disjoint runs.
  template <typename F>
  void scattered(int head, int64_t i, int64_t lo, F&& emit) const;

  // Keys (per head) the streaming state holds after n tokens, and the layout of that state.
  int64_t state_keys(int64_t n) const;
  bool keeps_all_keys() const { return kind == PatternKind::kDense || kind == PatternKind::kStrided; }
  int64_t ring_keys() const;  // bounded kinds: the most recent keys any later query can reach
  // Summary positions below max_tokens (the slot of summary j is the count of those below j); never more than
  // max_tokens, however large the block.
  int64_t summary_slots(int64_t max_tokens) const {
    if (kind != PatternKind::kFixed) return 0;
    return summary * (max_tokens / block) + std::max<int64_t>(0, max_tokens % block - (block - summary));
  }
  bool is_summary(int64_t j) const { return kind == PatternKind::kFixed && j % block >= block - summary; }

  // The layout of the state every backend keeps (and saves, on every backend, as the CPU's KV store saves it), per
  // head for a session of max_tokens: ring slots (0 for the kinds that keep every key) and all slots. A ring never
  // outgrows the tokens the session can hold (a window wider than that would otherwise size the state by the
  // window: a hostile file could ask for gigabytes).
  int64_t ring_slots(int64_t max_tokens) const {
    return keeps_all_keys() ? 0 : std::max<int64_t>(1, std::min(ring_keys(), max_tokens));
  }
  int64_t cache_slots(int64_t max_tokens) const {
    return keeps_all_keys() ? max_tokens : ring_slots(max_tokens) + summary_slots(max_tokens);
  }
  // The slots a sequence of `position` tokens uses: every position for dense and strided, the ring plus the
  // summaries so far for the bounded kinds. A saved state holds these, per head keys then values.
  int64_t used_slots(int64_t max_tokens, int64_t position) const {
    const int64_t ring = ring_slots(max_tokens), all = cache_slots(max_tokens);
    return ring == 0 ? std::min(position, all) : std::min(all, ring + summary_slots(position));
  }
  bool second_part(int head) const { return split && head >= heads / 2; }
};

template <typename F>
void AttentionPattern::scattered(int head, int64_t i, int64_t lo, F&& emit) const {
  if (kind == PatternKind::kStrided) {
    // Keys i - k*stride below lo, ascending.
    if (lo <= 0 || (split && !second_part(head))) return;
    int64_t j = i - ((i - (lo - 1) + stride - 1) / stride) * stride;  // largest i - k*stride < lo
    if (j < 0) return;
    for (int64_t first = j - (j / stride) * stride; first <= j; first += stride) emit(first, first + 1);
  } else if (kind == PatternKind::kFixed) {
    if (split && !second_part(head)) return;
    // The last `summary` positions of every block, below lo.
    for (int64_t b = 0; b * block + block - summary < lo; ++b) {
      emit(b * block + block - summary, std::min(b * block + block, lo));
    }
  }
}

}  // namespace tern
