// SPDX-License-Identifier: MIT
#include "text/hf_pipeline.h"

#include <utility>

#include "text/hf_added_tokens.h"
#include "text/hf_piece.h"
#include "text/hf_steps.h"
#include "text/token_limits.h"

namespace tern {

namespace {

// A split of the text: an added token, or a piece still to be normalized or pre-tokenized.
struct Item {
  int32_t added_id = -1;
  hf::Piece piece;
};

// No added token found: the one span is the whole text, which moves on instead of being copied.
bool covers_whole(const std::vector<hf::AddedTokens::Match>& matches, size_t size) {
  return matches.size() == 1 && matches[0].token < 0 && matches[0].begin == 0 && matches[0].end == size;
}

}  // namespace

HfTextPipeline::HfTextPipeline() = default;
HfTextPipeline::~HfTextPipeline() = default;

Result<std::unique_ptr<HfTextPipeline>> HfTextPipeline::from_table(const fb::HfTokenizer& table, int64_t vocab_size) {
  std::unique_ptr<HfTextPipeline> p(new HfTextPipeline());
  if (const auto* steps = table.normalizers()) {
    for (flatbuffers::uoffset_t i = 0; i < steps->size(); ++i) {
      TERN_ASSIGN_OR_RETURN(hf::NormalizerStep step, hf::NormalizerStep::from_table(*steps->Get(i), i));
      p->normalizers_.push_back(std::move(step));
    }
  }
  if (const auto* steps = table.pre_tokenizers()) {
    for (flatbuffers::uoffset_t i = 0; i < steps->size(); ++i) {
      TERN_ASSIGN_OR_RETURN(hf::PreTokenizerStep step, hf::PreTokenizerStep::from_table(*steps->Get(i), i));
      p->pre_tokenizers_.push_back(std::move(step));
    }
  }
  const HfTextPipeline& pipeline = *p;
  TERN_ASSIGN_OR_RETURN(p->added_, hf::AddedTokens::build(table, vocab_size, [&pipeline](std::string_view s) {
                          return pipeline.normalize(s);
                        }));
  return p;
}

Status HfTextPipeline::normalize_piece(hf::Piece* piece) const {
  // Every step is held to the same bound on the piece's size, so a chain of expanding steps stops at the first one
  // that would pass it.
  const size_t input_bytes = piece->text.size();
  const size_t limit = max_normalized_bytes(input_bytes);
  for (const hf::NormalizerStep& step : normalizers_) {
    if (!step.apply(piece, limit)) return normalized_too_long(input_bytes);
  }
  return Status::Ok();
}

Result<std::string> HfTextPipeline::normalize(std::string_view text) const {
  hf::Piece piece = hf::whole_piece(hf::is_valid_utf8(text) ? std::string(text) : hf::to_valid_utf8(text));
  TERN_RETURN_IF_ERROR(normalize_piece(&piece));
  return std::move(piece.text);
}

Status HfTextPipeline::split(std::string_view text, bool split_specials, std::vector<HfSegment>* out) const {
  hf::Piece whole = hf::whole_piece(hf::is_valid_utf8(text) ? std::string(text) : hf::to_valid_utf8(text));
  const auto& tokens = added_->tokens();

  // 1. Added tokens that are not normalized, matched in the text as it is.
  std::vector<Item> items;
  const auto matches = added_->find(whole.text, false, split_specials);
  if (covers_whole(matches, whole.text.size())) {
    if (!whole.text.empty()) items.push_back({-1, std::move(whole)});  // no added token: no copy of the text
  } else {
    for (const auto& m : matches) {
      if (m.token >= 0) {
        items.push_back({tokens[size_t(m.token)].id, {}});
      } else if (m.begin < m.end) {
        items.push_back({-1, hf::slice(whole, m.begin, m.end)});
      }
    }
  }

  // 2. Each other part normalized, then the normalized added tokens matched in it.
  std::vector<Item> next;
  for (Item& item : items) {
    if (item.added_id >= 0) {
      next.push_back(std::move(item));
      continue;
    }
    TERN_RETURN_IF_ERROR(normalize_piece(&item.piece));
    const auto normalized_matches = added_->find(item.piece.text, true, split_specials);
    if (covers_whole(normalized_matches, item.piece.text.size())) {
      if (item.piece.text.empty()) continue;
      // As hf::slice gives it: the piece starts where its first byte came from (a Strip may have moved it).
      item.piece.shift = item.piece.origin[0];
      next.push_back(std::move(item));
      continue;
    }
    for (const auto& m : normalized_matches) {
      if (m.token >= 0) {
        next.push_back({tokens[size_t(m.token)].id, {}});
      } else if (m.begin < m.end) {
        next.push_back({-1, hf::slice(item.piece, m.begin, m.end)});
      }
    }
  }
  items.swap(next);

  // 3. The pre-tokenizers, in order, on the parts that are not added tokens.
  std::vector<hf::Piece> words;
  for (const hf::PreTokenizerStep& step : pre_tokenizers_) {
    next.clear();
    for (Item& item : items) {
      if (item.added_id >= 0) {
        next.push_back(std::move(item));
        continue;
      }
      words.clear();
      step.apply(std::move(item.piece), &words);
      for (hf::Piece& w : words) next.push_back({-1, std::move(w)});
    }
    items.swap(next);
  }

  out->reserve(out->size() + items.size());
  for (Item& item : items) {
    HfSegment segment;
    segment.added_id = item.added_id;
    if (item.added_id < 0) segment.word = std::move(item.piece.text);
    std::vector<hf::Origin>().swap(item.piece.origin);  // 4 bytes per byte, no longer read
    out->push_back(std::move(segment));
  }
  return Status::Ok();
}

}  // namespace tern
