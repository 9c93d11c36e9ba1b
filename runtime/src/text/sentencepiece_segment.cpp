// SPDX-License-Identifier: MIT
// SentencePieceTokenizer's segmentation of normalized text: the unigram model's Viterbi path (the reference's
// EncodeOptimized) and BPE's merges (bpe::Model::SampleEncode without dropout). Floating-point steps follow the
// reference's types exactly, since ties and near-ties decide between paths.
#include <algorithm>
#include <queue>
#include <unordered_map>
#include <utility>

#include "text/sentencepiece.h"

namespace tern {

namespace {

// Bytes of the UTF-8 character a lead byte starts, by its high nibble (1 for trail and invalid bytes): the
// reference's OneCharLen, which segmentation steps by.
size_t one_char_length(char lead) { return "\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[uint8_t(lead) >> 4]; }

constexpr float kUnknownPenalty = 10.0f;

}  // namespace

void SentencePieceTokenizer::encode_unigram(std::string_view normalized, std::vector<int32_t>* ids) const {
  // best[e]: the best path over normalized[0, e) whose last piece ends at e, as (its score, its last piece's id and
  // bytes). length 0: none yet. 12 bytes per byte of text: with ids, the whole of encoding's memory besides the text.
  struct BestPath {
    float score = 0.0f;
    int32_t id = -1;
    uint32_t length = 0;  // at most kMaxPieceBytes (a piece) or 4 (an unknown character)
  };
  const size_t size = normalized.size();
  std::vector<BestPath> best(size + 1);
  const float unknown_score = min_score_ - kUnknownPenalty;
  for (size_t start = 0; start < size;) {
    const float score_so_far = best[start].score;
    const size_t char_length = std::min(one_char_length(normalized[start]), size - start);
    bool has_single_char_piece = false;
    // Pieces are at most kMaxPieceBytes long, so the trie has no deeper node: each walk takes at most that many
    // steps and the whole search is linear in the text.
    int32_t node = PieceTrie::root();
    for (size_t end = start; end < size;) {
      node = trie_.child(node, uint8_t(normalized[end]));
      if (node == PieceTrie::kNoNode) break;
      ++end;
      const int32_t id = trie_.value(node);
      if (id == PieceTrie::kNoValue || type(id) == PieceType::kUnused) continue;
      const size_t length = end - start;
      // The reference's types: a user-defined piece's bonus is a double (length * max_score in float, minus the
      // double 0.1), so every candidate is summed and compared in double and stored back as float.
      const double score = type(id) == PieceType::kUserDefined ? double(float(length) * max_score_) - 0.1
                                                                : double(spec_.scores[size_t(id)]);
      const double candidate = score + double(score_so_far);
      BestPath& target = best[end];
      if (target.length == 0 || candidate > double(target.score)) target = {float(candidate), id, uint32_t(length)};
      if (length == char_length) has_single_char_piece = true;
    }
    if (!has_single_char_piece) {  // the character as an unknown piece, scored in float
      BestPath& target = best[start + char_length];
      const float candidate = unknown_score + score_so_far;
      if (target.length == 0 || candidate > target.score) {
        target = {candidate, spec_.unk_id, uint32_t(char_length)};
      }
    }
    start += char_length;
  }
  // Walked back from the end (every character boundary is reached, at worst by an unknown piece), the ids go in last
  // first, each piece's own bytes (byte fallback) reversed too, and the whole is reversed once: a run of unknown
  // pieces is one id read in either direction.
  ids->clear();
  bool previous_unknown = false;
  for (size_t end = size; end > 0;) {
    const BestPath& path = best[end];
    if (path.length == 0) break;
    const size_t start = end - path.length;
    const size_t before = ids->size();
    if (!append_ids({normalized.substr(start, path.length), path.id}, &previous_unknown, ids)) {
      ids->clear();
      return;
    }
    std::reverse(ids->begin() + std::ptrdiff_t(before), ids->end());
    end = start;
  }
  std::reverse(ids->begin(), ids->end());
}

void SentencePieceTokenizer::encode_bpe(std::string_view normalized, std::vector<int32_t>* ids) const {
  // 16 bytes per character; offsets are 32-bit (encode refuses normalized text of 4 GiB).
  struct Symbol {
    int32_t prev;          // -1 at the start
    int32_t next;          // -1 at the end
    uint32_t begin;        // in normalized
    uint32_t length : 31;  // 0 once merged into its left neighbour
    uint32_t frozen : 1;   // a user-defined piece: never merged
  };
  // A candidate merge of `left` and its next symbol, 12 bytes. A symbol only grows, by taking in its next one, so a
  // candidate is stale exactly when its two symbols no longer add up to `size`: either side changed, or `left`'s
  // next is another symbol that begins past the merged piece.
  struct Pair {
    int32_t left;
    float score;
    uint32_t size;  // bytes of the merged piece
  };
  // The best pair on top: highest score, then leftmost.
  struct PairOrder {
    bool operator()(const Pair& a, const Pair& b) const {
      return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
  };

  std::vector<Symbol> symbols;
  symbols.reserve(normalized.size());  // one per byte at most, and for most text about that
  for (size_t at = 0; at < normalized.size();) {
    const std::string_view rest = normalized.substr(at);
    const size_t user_defined = user_defined_prefix(rest);
    const size_t n = user_defined > 0 ? user_defined : std::min(one_char_length(rest.front()), rest.size());
    const int32_t index = int32_t(symbols.size());
    at += n;
    symbols.push_back({index - 1, at == normalized.size() ? -1 : index + 1, uint32_t(at - n), uint32_t(n),
                       user_defined > 0 ? 1u : 0u});
  }
  auto piece = [&](const Symbol& s) { return normalized.substr(s.begin, s.length); };

  std::priority_queue<Pair, std::vector<Pair>, PairOrder> agenda;
  // Unused pieces met as a pair: the two symbols they were made of (the last pair seen wins, as in the reference).
  std::unordered_map<std::string_view, std::pair<std::string_view, std::string_view>> unused_parts;
  auto consider_pair = [&](int32_t left, int32_t right) {
    if (left == -1 || right == -1 || symbols[size_t(left)].frozen || symbols[size_t(right)].frozen) return;
    const Symbol& l = symbols[size_t(left)];
    const Symbol& r = symbols[size_t(right)];
    const std::string_view merged = normalized.substr(l.begin, l.length + r.length);
    const auto it = ids_.find(merged);
    if (it == ids_.end()) return;
    const PieceType t = type(it->second);
    if (t != PieceType::kNormal && t != PieceType::kUserDefined && t != PieceType::kUnused) return;
    agenda.push({left, spec_.scores[size_t(it->second)], uint32_t(merged.size())});
    if (t == PieceType::kUnused) unused_parts[merged] = {piece(l), piece(r)};
  };
  for (size_t i = 1; i < symbols.size(); ++i) consider_pair(int32_t(i - 1), int32_t(i));

  while (!agenda.empty()) {
    const Pair top = agenda.top();
    agenda.pop();
    Symbol& l = symbols[size_t(top.left)];
    if (l.length == 0 || l.next == -1) continue;
    Symbol& r = symbols[size_t(l.next)];
    if (l.length + r.length != top.size) continue;
    l.length += r.length;
    l.next = r.next;
    if (r.next >= 0) symbols[size_t(r.next)].prev = top.left;
    r.length = 0;
    consider_pair(l.prev, top.left);
    consider_pair(top.left, l.next);
  }

  // Unused pieces go back, recursively, to the pair that formed them (a stack instead of recursion); each final
  // segment goes straight into the ids.
  ids->clear();
  bool previous_unknown = false;
  std::vector<std::string_view> pending;
  for (int32_t index = 0; index != -1; index = symbols[size_t(index)].next) {
    pending.push_back(piece(symbols[size_t(index)]));
    while (!pending.empty()) {
      const std::string_view w = pending.back();
      pending.pop_back();
      const int32_t id = piece_id(w);
      const auto parts = type(id) == PieceType::kUnused ? unused_parts.find(w) : unused_parts.end();
      if (parts == unused_parts.end()) {
        if (!append_ids({w, id}, &previous_unknown, ids)) {
          ids->clear();
          return;
        }
      } else {
        pending.push_back(parts->second.second);
        pending.push_back(parts->second.first);
      }
    }
  }
}

}  // namespace tern
