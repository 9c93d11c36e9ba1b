// SPDX-License-Identifier: MIT
// The text half of a tokenizer.json encoder (tokenizers 0.23): added tokens split out of the text, the rest
// normalized and pre-tokenized into the words the model segments (tokenizer/added_vocabulary.rs'
// extract_and_normalize, then the pre-tokenizer), read from a `.tern` file's fb::HfTokenizer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "format/status.h"
#include "tern_generated.h"

namespace tern {

namespace hf {
struct Piece;
class NormalizerStep;
class PreTokenizerStep;
class AddedTokens;
}  // namespace hf

// One piece of a text after added tokens are split out and the rest is normalized and pre-tokenized.
struct HfSegment {
  int32_t added_id = -1;   // >= 0: this piece is that added token (no model segmentation)
  std::string word;        // otherwise: a pre-tokenized word, normalized, for the model
};

class HfTextPipeline {
 public:
  // Checks the table's normalizers, pre-tokenizers and added tokens (kinds known, strings valid UTF-8, regexes
  // compile within HfRegex's bounds, ids in [0, vocab_size)) and builds the pipeline; a message names what is wrong.
  static Result<std::unique_ptr<HfTextPipeline>> from_table(const fb::HfTokenizer& table, int64_t vocab_size);
  // Appends the segments of text in order. split_specials false: special added tokens are not split out (their
  // text is encoded as ordinary text, tokenizers' encode_special_tokens = true). The one error: normalization growing
  // a part of the text past max_normalized_bytes (text/token_limits.h), which no real tokenizer's rules do.
  Status split(std::string_view text, bool split_specials, std::vector<HfSegment>* out) const;
  // The normalizers applied to one string (the decoders' Replace has its own; exposed for tests); the same error.
  Result<std::string> normalize(std::string_view text) const;

  ~HfTextPipeline();

 private:
  HfTextPipeline();
  Status normalize_piece(hf::Piece* piece) const;

  std::vector<hf::NormalizerStep> normalizers_;
  std::vector<hf::PreTokenizerStep> pre_tokenizers_;
  std::unique_ptr<hf::AddedTokens> added_;
};

}  // namespace tern
