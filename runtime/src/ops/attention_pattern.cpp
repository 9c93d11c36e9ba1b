// SPDX-License-Identifier: MIT
#include "ops/attention_pattern.h"

#include <algorithm>

#include "ops/attention_kinds.h"

namespace tern {
namespace {

constexpr int64_t kMaxSpan = int64_t(1) << 31;

Status in_range(int64_t v, int64_t lo, const char* name, const std::string& where) {
  if (v < lo || v > kMaxSpan) {
    return InvalidModel(where + ": " + name + " " + std::to_string(v) + " must be in [" + std::to_string(lo) + ", 2^31]");
  }
  return Status::Ok();
}

Status split_heads(fb::SparseHeads heads, int n_heads, bool* split, const std::string& where) {
  if (heads != fb::SparseHeads::MERGED && heads != fb::SparseHeads::SPLIT) return InvalidModel(where + ": unknown head layout");
  *split = heads == fb::SparseHeads::SPLIT;
  if (*split && n_heads % 2 != 0) return InvalidModel(where + ": split heads need an even head count");
  return Status::Ok();
}

}  // namespace

namespace {

// Each pattern kind's parameters into p (kind and heads are set before).
Status read_dense(const fb::AttentionParams&, const std::string&, AttentionPattern* p) {
  p->kind = PatternKind::kDense;
  return Status::Ok();
}

Status read_sliding(const fb::AttentionParams& params, const std::string& where, AttentionPattern* p) {
  p->kind = PatternKind::kSliding;
  p->window = params.kind_as_SlidingWindow()->window();
  return in_range(p->window, 1, "window", where);
}

Status read_chunked(const fb::AttentionParams& params, const std::string& where, AttentionPattern* p) {
  const auto* c = params.kind_as_ChunkedLocal();
  p->kind = PatternKind::kChunked;
  p->chunk = c->chunk();
  p->chunks_before = c->chunks_before();
  TERN_RETURN_IF_ERROR(in_range(p->chunk, 1, "chunk", where));
  TERN_RETURN_IF_ERROR(in_range(p->chunks_before, 0, "chunks_before", where));
  TERN_RETURN_IF_ERROR(in_range(c->chunks_after(), 0, "chunks_after", where));
  if (p->chunk * (p->chunks_before + 1) > kMaxSpan) return InvalidModel(where + ": chunk window too large");
  return Status::Ok();
}

Status read_strided(const fb::AttentionParams& params, const std::string& where, AttentionPattern* p) {
  const auto* s = params.kind_as_Strided();
  p->kind = PatternKind::kStrided;
  p->stride = s->stride();
  TERN_RETURN_IF_ERROR(in_range(p->stride, 1, "stride", where));
  return split_heads(s->heads(), p->heads, &p->split, where);
}

Status read_fixed(const fb::AttentionParams& params, const std::string& where, AttentionPattern* p) {
  const auto* f = params.kind_as_Fixed();
  p->kind = PatternKind::kFixed;
  p->block = f->block();
  p->summary = f->summary();
  TERN_RETURN_IF_ERROR(in_range(p->block, 1, "block", where));
  TERN_RETURN_IF_ERROR(in_range(p->summary, 1, "summary", where));
  if (p->summary > p->block) return InvalidModel(where + ": summary " + std::to_string(p->summary) + " exceeds block " + std::to_string(p->block));
  return split_heads(f->heads(), p->heads, &p->split, where);
}

// The kinds that are a visibility pattern, and how each reads its parameters; null for the kinds with their own
// definition (ops/adaptive_span.h, relative_xl.h, lsh.h, compressive.h, routing.h).
struct KindPattern {
  fb::AttentionKind kind;
  Status (*read)(const fb::AttentionParams& params, const std::string& where, AttentionPattern* p);
};
constexpr KindPattern kKindPatterns[] = {
    {fb::AttentionKind::Dense, read_dense},
    {fb::AttentionKind::SlidingWindow, read_sliding},
    {fb::AttentionKind::ChunkedLocal, read_chunked},
    {fb::AttentionKind::Strided, read_strided},
    {fb::AttentionKind::Fixed, read_fixed},
    {fb::AttentionKind::AdaptiveSpan, nullptr},
    {fb::AttentionKind::RelativeXL, nullptr},
    {fb::AttentionKind::Lsh, nullptr},
    {fb::AttentionKind::Compressive, nullptr},
    {fb::AttentionKind::Routing, nullptr},
};
static_assert(covers_every_attention_kind(kKindPatterns), "every attention kind, pattern or not, in schema order");

}  // namespace

Result<AttentionPattern> AttentionPattern::from(const fb::AttentionParams& params, const std::string& where) {
  AttentionPattern p;
  p.heads = params.heads();
  const size_t k = size_t(params.kind_type());
  const bool known = k >= 1 && k <= kAttentionKindCount;
  if (!known || !kKindPatterns[k - 1].read) {
    return Unsupported(where + ": attention kind " + std::to_string(int(params.kind_type())) + " is not supported");
  }
  TERN_RETURN_IF_ERROR(kKindPatterns[k - 1].read(params, where, &p));
  return p;
}

bool AttentionPattern::visible(int head, int64_t i, int64_t j) const {
  if (j > i || j < 0) return false;
  switch (kind) {
    case PatternKind::kDense: return true;
    case PatternKind::kSliding: return i - window < j;
    case PatternKind::kChunked: return j / chunk >= i / chunk - chunks_before;
    case PatternKind::kStrided: {
      bool local = i - stride < j, strided = (i - j) % stride == 0;
      if (!split) return local || strided;
      return second_part(head) ? strided : local;
    }
    case PatternKind::kFixed: {
      bool own_block = j / block == i / block, summary_key = j % block >= block - summary;
      if (!split) return own_block || summary_key;
      return second_part(head) ? (summary_key || j == i) : own_block;
    }
  }
  return false;
}

int64_t AttentionPattern::local_lo(int head, int64_t i) const {
  switch (kind) {
    case PatternKind::kDense: return 0;
    case PatternKind::kSliding: return std::max<int64_t>(0, i - window + 1);
    case PatternKind::kChunked: return std::max<int64_t>(0, (i / chunk - chunks_before) * chunk);
    case PatternKind::kStrided: return second_part(head) ? i : std::max<int64_t>(0, i - stride + 1);
    case PatternKind::kFixed: return second_part(head) ? i : (i / block) * block;
  }
  return 0;
}

bool AttentionPattern::has_scattered(int head) const {
  if (kind == PatternKind::kStrided || kind == PatternKind::kFixed) return !split || second_part(head);
  return false;
}

int64_t AttentionPattern::ring_keys() const {
  switch (kind) {
    case PatternKind::kSliding: return window - 1;
    case PatternKind::kChunked: return chunks_before * chunk + chunk - 1;
    case PatternKind::kFixed: return block - 1;
    case PatternKind::kDense:
    case PatternKind::kStrided: return 0;  // they keep every key (keeps_all_keys)
  }
  return 0;
}

int64_t AttentionPattern::state_keys(int64_t n) const {
  if (keeps_all_keys()) return n;
  int64_t kept = std::min(n, ring_keys());
  if (kind == PatternKind::kFixed) kept += summary * (n / block);  // summaries of completed blocks
  return kept;
}

}  // namespace tern
