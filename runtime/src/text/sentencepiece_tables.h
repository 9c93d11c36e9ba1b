// SPDX-License-Identifier: MIT
// The two lookup tables a SentencePiece tokenizer needs: a byte trie over its pieces (prefix matching for the
// unigram lattice and for user-defined symbols) and a reader of a model's precompiled_charsmap (the normalization
// rules, a Darts-clone double-array trie over the source strings plus a pool of NUL-terminated replacements), and
// the UTF-8 rule that normalization and decoding share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "format/status.h"

namespace tern {

// The reference's DecodeUTF8 validity: the length of the well-formed character `text` starts with, 0 when it is
// malformed (a bad lead or trail byte, a sequence cut short, an overlong form, a surrogate, past U+10FFFF). A
// literal U+FFFD is well-formed. text is not empty.
size_t sentencepiece_utf8_length(std::string_view text);

// A byte trie built once from a set of distinct, non-empty keys. Children of a node are contiguous and sorted by
// label, so a step is one binary search; building takes no recursion (keys from a model file may be long).
class PieceTrie {
 public:
  static constexpr int32_t kNoNode = -1;
  static constexpr int32_t kNoValue = -1;

  // keys[i] (views the caller keeps alive while building only) maps to values[i]; keys are distinct.
  static PieceTrie build(const std::vector<std::string_view>& keys, const std::vector<int32_t>& values);

  static constexpr int32_t root() { return 0; }
  // The node reached from `node` over byte `label`, or kNoNode.
  int32_t child(int32_t node, uint8_t label) const;
  // The value of the key ending at `node`, or kNoValue.
  int32_t value(int32_t node) const { return nodes_[size_t(node)].value; }

 private:
  struct Node {
    int32_t value = kNoValue;
    uint32_t first_child = 0;  // index into nodes_ (and labels_) of the first child
    uint32_t child_count = 0;
  };
  std::vector<Node> nodes_;      // [number of distinct key prefixes + 1], nodes_[0] the root
  std::vector<uint8_t> labels_;  // [nodes_.size()], the byte on the edge into each node
};

// NormalizerSpec.precompiled_charsmap: <uint32 little-endian trie size in bytes><double-array units, uint32 LE each>
// <replacement pool>. Every unit and pool access is bounds-checked, so a hostile blob gives some mapping, never an
// out-of-bounds read; a search walks at most one unit per input byte and at most kMaxPieceBytes units, so it always
// ends, after a bounded number of steps.
class PrecompiledCharsMap {
 public:
  // An empty blob is no mapping at all. A blob too short for its header, whose trie size runs past its end, or whose
  // pool holds a replacement longer than kMaxReplacementBytes (text/token_limits.h) is InvalidModel.
  static Result<PrecompiledCharsMap> parse(std::string_view blob);

  // No unit: no rule can match.
  bool empty() const { return unit_count() == 0; }
  // The longest rule whose source is a prefix of `text` (at most kMaxResults rules are considered along the way, as
  // the reference normalizer keeps): the number of bytes it covers and, in *replacement, the replacement (a view
  // into the pool, up to its NUL or the pool's end). 0 when no rule matches.
  size_t longest_match(std::string_view text, std::string_view* replacement) const;
  // The shortest rule whose source is a prefix of `text` (the first result of the same search, as tokenizers'
  // Precompiled normalizer takes it; the search stops at a NUL byte): the bytes it covers and its replacement. 0 when
  // no rule matches or the first one found has no replacement inside the pool.
  size_t shortest_match(std::string_view text, std::string_view* replacement) const;

 private:
  static constexpr size_t kMaxResults = 32;
  uint32_t unit(size_t index) const;  // index < unit_count()
  size_t unit_count() const { return units_.size() / 4; }

  std::string_view units_;  // the trie's bytes, [unit_count * 4 (+ up to 3 ignored)]
  std::string_view pool_;   // NUL-separated replacements
};

}  // namespace tern
