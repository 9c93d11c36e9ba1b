// SPDX-License-Identifier: MIT
#include "text/sentencepiece_tables.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "text/token_limits.h"

namespace tern {

size_t sentencepiece_utf8_length(std::string_view text) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  auto trail = [&](size_t i) { return (s[i] & 0xC0) == 0x80; };
  if (s[0] < 0x80) return 1;
  uint32_t cp = 0;
  if (n >= 2 && (s[0] & 0xE0) == 0xC0) {
    cp = uint32_t(s[0] & 0x1F) << 6 | (s[1] & 0x3F);
    return trail(1) && cp >= 0x80 ? 2 : 0;
  }
  if (n >= 3 && (s[0] & 0xF0) == 0xE0) {
    cp = uint32_t(s[0] & 0x0F) << 12 | uint32_t(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
    return trail(1) && trail(2) && cp >= 0x800 && (cp < 0xD800 || cp >= 0xE000) ? 3 : 0;
  }
  if (n >= 4 && (s[0] & 0xF8) == 0xF0) {
    cp = uint32_t(s[0] & 0x07) << 18 | uint32_t(s[1] & 0x3F) << 12 | uint32_t(s[2] & 0x3F) << 6 | (s[3] & 0x3F);
    return trail(1) && trail(2) && trail(3) && cp >= 0x10000 && cp <= 0x10FFFF ? 4 : 0;
  }
  return 0;
}

PieceTrie PieceTrie::build(const std::vector<std::string_view>& keys, const std::vector<int32_t>& values) {
  std::vector<uint32_t> order(keys.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return keys[a] < keys[b]; });

  PieceTrie trie;
  size_t total_bytes = 0;
  for (std::string_view k : keys) total_bytes += k.size();
  trie.nodes_.reserve(total_bytes + 1);
  trie.labels_.reserve(total_bytes + 1);
  trie.nodes_.emplace_back();
  trie.labels_.push_back(0);

  // Breadth first: each pending node owns the sorted keys [begin, end) that pass through it, `depth` bytes in.
  // Its children are allocated together when it is expanded, so they are contiguous.
  struct Pending {
    uint32_t node, begin, end, depth;
  };
  std::vector<Pending> queue;
  queue.push_back({0, 0, uint32_t(order.size()), 0});
  for (size_t head = 0; head < queue.size(); ++head) {
    Pending p = queue[head];
    // Sorted and distinct: at most one key ends here, and it sorts first.
    if (p.begin < p.end && keys[order[p.begin]].size() == p.depth) {
      trie.nodes_[p.node].value = values[order[p.begin]];
      ++p.begin;
    }
    const uint32_t first_child = uint32_t(trie.nodes_.size());
    uint32_t count = 0;
    for (uint32_t i = p.begin; i < p.end;) {
      const uint8_t label = uint8_t(keys[order[i]][p.depth]);
      uint32_t j = i + 1;
      while (j < p.end && uint8_t(keys[order[j]][p.depth]) == label) ++j;
      trie.nodes_.emplace_back();
      trie.labels_.push_back(label);
      queue.push_back({first_child + count, i, j, p.depth + 1});
      ++count;
      i = j;
    }
    trie.nodes_[p.node].first_child = first_child;
    trie.nodes_[p.node].child_count = count;
  }
  return trie;
}

int32_t PieceTrie::child(int32_t node, uint8_t label) const {
  const Node& n = nodes_[size_t(node)];
  const auto begin = labels_.begin() + n.first_child;
  const auto end = begin + n.child_count;
  const auto it = std::lower_bound(begin, end, label);
  if (it == end || *it != label) return kNoNode;
  return int32_t(it - labels_.begin());
}

Result<PrecompiledCharsMap> PrecompiledCharsMap::parse(std::string_view blob) {
  PrecompiledCharsMap map;
  if (blob.empty()) return map;
  if (blob.size() <= 4) {
    return InvalidModel("sentencepiece precompiled_charsmap holds " + std::to_string(blob.size()) +
                        " bytes, too short for its 4-byte trie size");
  }
  const auto* b = reinterpret_cast<const uint8_t*>(blob.data());
  const uint32_t trie_bytes = uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24;
  if (uint64_t(trie_bytes) > blob.size() - 4) {
    return InvalidModel("sentencepiece precompiled_charsmap's trie size " + std::to_string(trie_bytes) +
                        " runs past its " + std::to_string(blob.size() - 4) + " bytes");
  }
  map.units_ = blob.substr(4, trie_bytes);
  map.pool_ = blob.substr(4 + size_t(trie_bytes));
  // A replacement is read from its offset to the next NUL (or the pool's end), so bounding every NUL-separated run
  // of the pool bounds them all, whatever offsets the trie holds.
  for (size_t start = 0; start < map.pool_.size();) {
    const size_t nul = std::min(map.pool_.find('\0', start), map.pool_.size());
    if (nul - start > kMaxReplacementBytes) {
      return InvalidModel("sentencepiece precompiled_charsmap's replacement at pool offset " + std::to_string(start) +
                          " is " + std::to_string(nul - start) +
                          " bytes long; a normalization rule may write at most " +
                          std::to_string(kMaxReplacementBytes));
    }
    start = nul + 1;
  }
  return map;
}

uint32_t PrecompiledCharsMap::unit(size_t index) const {
  const auto* b = reinterpret_cast<const uint8_t*>(units_.data()) + index * 4;
  return uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24;
}

// Darts-clone's unit layout: bit 31 marks a value unit (its low 31 bits the value); a node unit has its label in
// bits 0-7, bit 8 set when a key ends at it (its value unit is the child at offset 0), and the offset to its
// children in bits 10-31, shifted left by 8 more when bit 9 is set.
namespace {
bool unit_has_leaf(uint32_t u) { return ((u >> 8) & 1) == 1; }
uint32_t unit_value(uint32_t u) { return u & ((1u << 31) - 1); }
uint32_t unit_label(uint32_t u) { return u & ((1u << 31) | 0xFF); }
uint32_t unit_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }
}  // namespace

size_t PrecompiledCharsMap::longest_match(std::string_view text, std::string_view* replacement) const {
  const size_t count = unit_count();
  if (count == 0) return 0;
  size_t longest = 0;
  size_t results = 0;
  // The same walk as Darts' commonPrefixSearch: out-of-range positions end it as a label mismatch would.
  size_t pos = unit_offset(unit(0));
  // A double array may hold a cycle: the walk stops after kMaxPieceBytes as it does at a mismatch (real rules'
  // sources are a few characters), so normalizing stays linear in the text.
  const size_t walk = std::min(text.size(), kMaxPieceBytes);
  for (size_t i = 0; i < walk && results < kMaxResults; ++i) {
    const uint8_t c = uint8_t(text[i]);
    pos ^= c;
    if (pos >= count) break;
    const uint32_t u = unit(pos);
    if (unit_label(u) != c) break;
    pos ^= unit_offset(u);
    if (!unit_has_leaf(u)) continue;
    ++results;
    if (pos >= count) continue;  // a leaf whose value unit lies outside the trie: no rule
    const uint32_t at = unit_value(unit(pos));
    // The reference reads the replacement as a C string; the pool's end (the model string's terminator) ends the
    // last one. A value past the pool is no rule.
    if (at > pool_.size()) continue;
    std::string_view rest = pool_.substr(at);
    *replacement = rest.substr(0, std::min(rest.size(), rest.find('\0')));
    longest = i + 1;
  }
  return longest;
}

size_t PrecompiledCharsMap::shortest_match(std::string_view text, std::string_view* replacement) const {
  const size_t count = unit_count();
  if (count == 0) return 0;
  size_t pos = unit_offset(unit(0));
  for (size_t i = 0; i < std::min(text.size(), kMaxPieceBytes); ++i) {  // as longest_match's walk
    const uint8_t c = uint8_t(text[i]);
    if (c == 0) break;
    pos ^= c;
    if (pos >= count) break;
    const uint32_t u = unit(pos);
    if (unit_label(u) != c) break;
    pos ^= unit_offset(u);
    if (!unit_has_leaf(u)) continue;
    if (pos >= count) return 0;
    const uint32_t at = unit_value(unit(pos));
    if (at > pool_.size()) return 0;
    std::string_view rest = pool_.substr(at);
    *replacement = rest.substr(0, std::min(rest.size(), rest.find('\0')));
    return i + 1;
  }
  return 0;
}

}  // namespace tern
