// SPDX-License-Identifier: MIT
#include "text/hf_unigram.h"

#include <cmath>
#include <limits>

#include "text/hf_utf8.h"

namespace tern {
namespace {

constexpr double kUnknownPenalty = 10.0;

}  // namespace

Result<HfUnigram> HfUnigram::create(const fb::HfTokenizer& table, const HfVocab* vocab) {
  HfUnigram model;
  model.vocab_ = vocab;
  const size_t size = vocab->pieces.size();
  const auto* scores = table.scores();
  if ((scores ? scores->size() : 0) != size) {
    return InvalidModel("vocabulary: hf_tokenizer.scores has " + std::to_string(scores ? scores->size() : 0) +
                        " entries for a vocabulary of " + std::to_string(size));
  }
  model.scores_.assign(scores->begin(), scores->end());
  std::vector<std::string_view> keys;
  std::vector<int32_t> values;
  model.min_score_ = std::numeric_limits<double>::infinity();
  for (size_t id = 0; id < size; ++id) {
    if (!std::isfinite(model.scores_[id])) {
      return InvalidModel("vocabulary: hf_tokenizer.scores " + std::to_string(id) + " is not finite");
    }
    if (vocab->pieces[id].empty()) continue;
    keys.push_back(vocab->pieces[id]);
    values.push_back(int32_t(id));
    model.min_score_ = std::min(model.min_score_, double(model.scores_[id]));
  }
  model.trie_ = PieceTrie::build(keys, values);
  model.unk_id_ = table.unk_id();
  if (model.unk_id_ != -1 &&
      (model.unk_id_ < 0 || size_t(model.unk_id_) >= size || vocab->pieces[size_t(model.unk_id_)].empty())) {
    return InvalidModel("vocabulary: hf_tokenizer.unk_id " + std::to_string(model.unk_id_) +
                        " is not a model token (nor -1)");
  }
  model.byte_fallback_ = table.byte_fallback();
  hf_byte_piece_ids(*vocab, model.byte_ids_);
  return model;
}

Status HfUnigram::encode_word(std::string_view word, Scratch* scratch, std::vector<int32_t>* ids) const {
  if (word.empty()) return Status::Ok();
  const size_t size = word.size();
  auto& best = scratch->best;
  best.assign(size + 1, Scratch::Node{0.0, -1, 0});
  const double unknown_score = min_score_ - kUnknownPenalty;
  for (size_t start = 0; start < size;) {
    const double so_far = best[start].score;
    const size_t char_length = hf_char_length(word, start);
    bool has_single_char_token = false;
    int32_t node = PieceTrie::root();
    for (size_t end = start; end < size;) {
      node = trie_.child(node, uint8_t(word[end]));
      if (node == PieceTrie::kNoNode) break;
      ++end;
      const int32_t id = trie_.value(node);
      if (id == PieceTrie::kNoValue) continue;
      const double candidate = double(scores_[size_t(id)]) + so_far;
      Scratch::Node& target = best[end];
      if (target.starts_at == -1 || candidate > target.score) target = {candidate, int64_t(start), id};
      if (end - start == char_length) has_single_char_token = true;
    }
    if (!has_single_char_token) {
      if (unk_id_ < 0) {
        return InvalidArgument("the tokenizer's unigram model has no token for the character at byte " +
                               std::to_string(start) + " of a word, and no unknown token");
      }
      Scratch::Node& target = best[start + char_length];
      const double candidate = unknown_score + so_far;
      if (target.starts_at == -1 || candidate > target.score) target = {candidate, int64_t(start), unk_id_};
    }
    start += char_length;
  }
  // The path, last piece first; a run of unknown pieces becomes one piece.
  auto& pieces = scratch->pieces;
  pieces.clear();
  bool in_unknown_run = false;
  for (size_t end = size; end > 0;) {
    const Scratch::Node& node = best[end];
    const size_t start = size_t(node.starts_at);  // every character boundary is reached
    const bool unknown = node.id == unk_id_;
    if (unknown && in_unknown_run) {
      pieces.back().first = uint32_t(start);
    } else {
      pieces.push_back({uint32_t(start), uint32_t(end)});
    }
    in_unknown_run = unknown;
    end = start;
  }
  for (size_t i = pieces.size(); i-- > 0;) {
    const std::string_view piece = word.substr(pieces[i].first, pieces[i].second - pieces[i].first);
    const int32_t id = vocab_->find(piece);
    if (id >= 0) {
      ids->push_back(id);
      continue;
    }
    bool all_bytes = byte_fallback_;
    for (size_t b = 0; all_bytes && b < piece.size(); ++b) all_bytes = byte_ids_[uint8_t(piece[b])] >= 0;
    if (all_bytes) {
      for (char b : piece) ids->push_back(byte_ids_[uint8_t(b)]);
    } else {
      ids->push_back(unk_id_);  // unk_id_ >= 0: a piece with no token came from an unknown node
    }
  }
  return Status::Ok();
}

}  // namespace tern
