// SPDX-License-Identifier: MIT
// A SentencePiece tokenizer (unigram and BPE) whose ids and text are those of libsentencepiece 0.1.97's
// SentencePieceProcessor::Encode(text, &ids) and DecodeIds for the same model, normalization through the model's
// precompiled_charsmap included. The runtime does not link libsentencepiece: the model file carries the pieces and
// the few settings that change encoding, and this file reproduces the reference's rules.
//
// Encoding, as the reference does it:
//   1. normalize: user-defined symbols pass unchanged; otherwise the longest charsmap rule, else one UTF-8
//      character (a malformed byte becomes U+FFFD and consumes one byte); with remove_extra_whitespaces, leading,
//      trailing and repeated spaces go; a dummy space is added in front (or behind, treat_whitespace_as_suffix);
//      spaces become U+2581 with escape_whitespaces;
//   2. segment: unigram, the best Viterbi path (unknown characters scored min_score - 10, user-defined pieces
//      length * max_score - 0.1, unused pieces never); BPE, the highest-scored adjacent merge first (ties to the
//      leftmost), unused pieces resegmented into the pair that formed them;
//   3. unknown pieces: with byte_fallback, one <0xNN> piece per byte; without, a run of them is one unknown id.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "format/status.h"
#include "text/sentencepiece_tables.h"
#include "text/token_limits.h"

namespace tern {

enum class PieceType : uint8_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };  // ModelProto.SentencePiece.Type

struct SentencePieceSpec {                 // views: the caller keeps the bytes alive as long as the tokenizer
  bool bpe = false;                        // false: unigram (TrainerSpec.model_type UNIGRAM=1; BPE=2)
  std::vector<std::string_view> pieces;    // [V]
  std::vector<float> scores;               // [V]
  std::vector<PieceType> types;            // [V]
  std::string_view precompiled_charsmap;   // NormalizerSpec.precompiled_charsmap; empty: no character mapping
  bool add_dummy_prefix = true, remove_extra_whitespaces = true, escape_whitespaces = true;
  bool treat_whitespace_as_suffix = false, byte_fallback = false;
  int32_t unk_id = 0;
};

class SentencePieceTokenizer {
 public:
  // Validates everything (the data comes from a possibly hostile model file: the charsmap's trie is bounds-checked
  // at every access so no input text or file can read out of bounds or loop forever; sizes agree; exactly one
  // kUnknown piece at unk_id; no empty, NUL-holding, duplicate or over-long pieces (kMaxPieceBytes, which bounds
  // every trie walk of segmentation and normalization); finite scores; byte pieces spelled <0xNN>, only with
  // byte_fallback, and then all 256 present). Errors: InvalidModel naming what is wrong ("sentencepiece piece 17 is
  // empty").
  static Result<SentencePieceTokenizer> create(SentencePieceSpec spec);

  // ids as SentencePieceProcessor::Encode(text, &ids) gives them (any bytes accepted). *ids is replaced, not
  // appended to. The one error: normalization growing the text past max_normalized_bytes (text/token_limits.h), which
  // only a charsmap no real model has can do. Memory besides the ids, per byte of normalized text: unigram 13 (the
  // text and the best path to each byte); BPE about 1 + 16 per character (its symbols) + 12 per merge candidate.
  Status encode(std::string_view text, std::vector<int32_t>* ids) const;
  // As SentencePieceProcessor::DecodeIds (ids assumed in [0, V); the caller checks range).
  std::string decode(const int32_t* ids, size_t n) const;
  // The text one id adds when it follows other ids (no leading-space removal): U+2581 as space, a byte piece as its
  // raw byte, control and unknown as DecodeIds would render them in mid-sequence.
  std::string piece_text(int32_t id) const;

  size_t size() const { return spec_.pieces.size(); }

 private:
  // One segment of the normalized text and the id it got (before unknown / byte-fallback handling).
  struct Segment {
    std::string_view piece;
    int32_t id;
  };
  // What encode does with the segments in turn (unknown runs, byte fallback); false: the encoding fails (a control
  // piece). The unigram walk back feeds it the last segment first, then reverses *ids.
  bool append_ids(const Segment& s, bool* previous_unknown, std::vector<int32_t>* ids) const;

  SentencePieceTokenizer() = default;
  PieceType type(int32_t id) const { return spec_.types[size_t(id)]; }
  // The id of a piece, or unk_id when there is none (the reference's PieceToId).
  int32_t piece_id(std::string_view piece) const;
  // Bytes of the longest user-defined piece that is a prefix of text; 0 when none.
  size_t user_defined_prefix(std::string_view text) const;

  Status normalize(std::string_view input, std::string* normalized) const;
  // The ids of normalized text (below 4 GiB) straight into *ids, with no list of segments in between.
  void encode_unigram(std::string_view normalized, std::vector<int32_t>* ids) const;
  void encode_bpe(std::string_view normalized, std::vector<int32_t>* ids) const;

  SentencePieceSpec spec_;
  PrecompiledCharsMap charsmap_;
  std::unordered_map<std::string_view, int32_t> ids_;  // every piece -> its id
  PieceTrie trie_;  // normal, user-defined and unused pieces: the ones segmentation may produce
  bool has_user_defined_ = false;
  std::array<int32_t, 256> byte_ids_{};  // with byte_fallback: the id of <0xNN> for each byte
  std::vector<int16_t> byte_values_;     // [V] the byte of a byte piece, -1 for others
  float min_score_ = 0.0f, max_score_ = 0.0f;  // over normal pieces, as the reference's unigram model keeps them
};

}  // namespace tern
