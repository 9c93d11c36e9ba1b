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

void SentencePieceTokenizer::segment_unigram(std::string_view normalized, std::vector<Segment>* segments) const {
  // best[e]: the best path over normalized[0, e) whose last piece ends at e, as (its score, where that piece
  // starts, its id). starts_at -1: none yet.
  struct BestPath {
    int32_t id = -1;
    float score = 0.0f;
    int64_t starts_at = -1;
  };
  const size_t size = normalized.size();
  std::vector<BestPath> best(size + 1);
  const float unknown_score = min_score_ - kUnknownPenalty;
  for (size_t start = 0; start < size;) {
    const float score_so_far = best[start].score;
    const size_t char_length = std::min(one_char_length(normalized[start]), size - start);
    bool has_single_char_piece = false;
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
      if (target.starts_at == -1 || candidate > double(target.score)) {
        target.score = float(candidate);
        target.starts_at = int64_t(start);
        target.id = id;
      }
      if (length == char_length) has_single_char_piece = true;
    }
    if (!has_single_char_piece) {  // the character as an unknown piece, scored in float
      BestPath& target = best[start + char_length];
      const float candidate = unknown_score + score_so_far;
      if (target.starts_at == -1 || candidate > target.score) {
        target.score = candidate;
        target.starts_at = int64_t(start);
        target.id = spec_.unk_id;
      }
    }
    start += char_length;
  }
  segments->clear();
  // Every character boundary is reached (at worst by an unknown piece), so the walk back ends at 0.
  for (size_t end = size; end > 0;) {
    const BestPath& node = best[end];
    if (node.starts_at < 0) break;
    const size_t start = size_t(node.starts_at);
    segments->push_back({normalized.substr(start, end - start), node.id});
    end = start;
  }
  std::reverse(segments->begin(), segments->end());
}

void SentencePieceTokenizer::segment_bpe(std::string_view normalized, std::vector<Segment>* segments) const {
  struct Symbol {
    int32_t prev;  // -1 at the start
    int32_t next;  // -1 at the end
    bool frozen;   // a user-defined piece: never merged
    std::string_view piece;  // empty once merged into its left neighbour
  };
  struct Pair {
    int32_t left, right;
    float score;
    size_t size;  // bytes of the merged piece; a pair whose symbols changed since no longer adds up to it
  };
  // The best pair on top: highest score, then leftmost.
  struct PairOrder {
    bool operator()(const Pair& a, const Pair& b) const {
      return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
  };

  std::vector<Symbol> symbols;
  symbols.reserve(normalized.size());
  for (std::string_view rest = normalized; !rest.empty();) {
    const size_t user_defined = user_defined_prefix(rest);
    const size_t n = user_defined > 0 ? user_defined : std::min(one_char_length(rest.front()), rest.size());
    const int32_t index = int32_t(symbols.size());
    rest.remove_prefix(n);
    symbols.push_back({index - 1, rest.empty() ? -1 : index + 1, user_defined > 0,
                       std::string_view(rest.data() - n, n)});
  }

  std::priority_queue<Pair, std::vector<Pair>, PairOrder> agenda;
  // Unused pieces met as a pair: the two symbols they were made of (the last pair seen wins, as in the reference).
  std::unordered_map<std::string_view, std::pair<std::string_view, std::string_view>> unused_parts;
  auto consider_pair = [&](int32_t left, int32_t right) {
    if (left == -1 || right == -1 || symbols[size_t(left)].frozen || symbols[size_t(right)].frozen) return;
    const Symbol& l = symbols[size_t(left)];
    const Symbol& r = symbols[size_t(right)];
    const std::string_view merged(l.piece.data(), l.piece.size() + r.piece.size());
    const auto it = ids_.find(merged);
    if (it == ids_.end()) return;
    const PieceType t = type(it->second);
    if (t != PieceType::kNormal && t != PieceType::kUserDefined && t != PieceType::kUnused) return;
    agenda.push({left, right, spec_.scores[size_t(it->second)], merged.size()});
    if (t == PieceType::kUnused) unused_parts[merged] = {l.piece, r.piece};
  };
  for (size_t i = 1; i < symbols.size(); ++i) consider_pair(int32_t(i - 1), int32_t(i));

  while (!agenda.empty()) {
    const Pair top = agenda.top();
    agenda.pop();
    Symbol& l = symbols[size_t(top.left)];
    Symbol& r = symbols[size_t(top.right)];
    if (l.piece.empty() || r.piece.empty() || l.piece.size() + r.piece.size() != top.size) continue;
    l.piece = std::string_view(l.piece.data(), l.piece.size() + r.piece.size());
    l.next = r.next;
    if (r.next >= 0) symbols[size_t(r.next)].prev = top.left;
    r.piece = std::string_view();
    consider_pair(l.prev, top.left);
    consider_pair(top.left, l.next);
  }

  // Unused pieces go back, recursively, to the pair that formed them (a stack instead of recursion).
  segments->clear();
  std::vector<std::string_view> pending;
  for (int32_t index = 0; index != -1; index = symbols[size_t(index)].next) {
    pending.push_back(symbols[size_t(index)].piece);
    while (!pending.empty()) {
      const std::string_view w = pending.back();
      pending.pop_back();
      const int32_t id = piece_id(w);
      const auto parts = type(id) == PieceType::kUnused ? unused_parts.find(w) : unused_parts.end();
      if (parts == unused_parts.end()) {
        segments->push_back({w, id});
      } else {
        pending.push_back(parts->second.second);
        pending.push_back(parts->second.first);
      }
    }
  }
}

}  // namespace tern
