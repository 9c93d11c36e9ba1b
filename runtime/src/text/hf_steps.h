// SPDX-License-Identifier: MIT
// The normalizers (normalizers/*.rs) and pre-tokenizers (pre_tokenizers/*.rs) of a tokenizer.json pipeline, each
// checked and built from one fb::HfStep.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "format/status.h"
#include "text/hf_piece.h"
#include "text/hf_regex.h"
#include "text/sentencepiece_tables.h"
#include "tern_generated.h"

namespace tern::hf {

// Valid UTF-8 (what a Rust String holds).
bool is_valid_utf8(std::string_view s);
// s with each malformed sequence replaced by U+FFFD (the Rust's from_utf8_lossy).
std::string to_valid_utf8(std::string_view s);

// A Replace or Split pattern: a literal (the Rust escapes it into a regex) or an Oniguruma regex.
class Pattern {
 public:
  // `what` names the step in messages ("normalizer 2 (Replace)").
  static Result<Pattern> from_step(const fb::HfStep& step, const std::string& what);
  Spans find_matches(std::string_view text) const;

 private:
  std::string literal_;
  std::shared_ptr<const HfRegex> regex_;  // null: the literal
};

class NormalizerStep {
 public:
  // Checks the step (a Replace or Prepend content, a charsmap's replacements: at most kMaxReplacementBytes).
  static Result<NormalizerStep> from_table(const fb::HfStep& step, size_t index);
  // false: the result would pass max_bytes (a Replace or a charsmap is stopped before it builds more; *piece is then
  // left in some state the caller drops).
  bool apply(Piece* piece, size_t max_bytes) const;

 private:
  bool apply_precompiled(Piece* piece, size_t max_bytes) const;

  fb::HfNormalizer kind_ = fb::HfNormalizer::NFC;
  std::string content_;
  std::shared_ptr<const Pattern> pattern_;  // REPLACE
  bool left_ = false, right_ = false;       // STRIP
  // PRECOMPILED: the map views the bytes, kept on the heap so that moving the step keeps them in place.
  std::shared_ptr<const std::string> charsmap_bytes_;
  PrecompiledCharsMap charsmap_;
};

class PreTokenizerStep {
 public:
  static Result<PreTokenizerStep> from_table(const fb::HfStep& step, size_t index);
  // Appends the non-empty words `piece` splits into (the Rust's PreTokenizedString::split on one split without
  // tokens).
  void apply(Piece piece, std::vector<Piece>* out) const;

 private:
  void split_one(Piece piece, std::vector<Piece>* out) const;

  fb::HfPreTokenizer kind_ = fb::HfPreTokenizer::BYTE_LEVEL;
  std::shared_ptr<const Pattern> pattern_;       // SPLIT
  std::shared_ptr<const HfRegex> byte_level_re_;  // BYTE_LEVEL with use_regex: GPT-2's pattern
  fb::HfSplitBehavior behavior_ = fb::HfSplitBehavior::REMOVED;
  bool invert_ = false;
  bool add_prefix_space_ = false;
  std::string replacement_;  // METASPACE: one character
  char32_t replacement_char_ = 0;
  fb::HfPrependScheme prepend_scheme_ = fb::HfPrependScheme::ALWAYS;
  bool split_ = false;
  bool individual_digits_ = false;
};

}  // namespace tern::hf
