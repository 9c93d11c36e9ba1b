// SPDX-License-Identifier: MIT
// The added tokens of a tokenizer.json (tokenizer/added_vocabulary.rs): found in a text leftmost-longest (the
// Rust's aho-corasick MatchKind::LeftmostLongest), with the single_word, lstrip and rstrip rules of its find_matches.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "format/status.h"
#include "text/sentencepiece_tables.h"
#include "tern_generated.h"

namespace tern::hf {

class AddedTokens {
 public:
  struct Token {
    int32_t id = -1;
    std::string content;
    bool special = false, single_word = false, lstrip = false, rstrip = false, normalized = false;
  };
  // A span of the text searched: an added token (`token` >= 0, an index into tokens()) or the text between them.
  struct Match {
    int32_t token;
    size_t begin, end;
  };

  // `normalize` applies the pipeline's normalizers: a normalized token is matched by its normalized content. Tokens
  // with an empty content are skipped, as the Rust's add_tokens skips them; a content listed twice is one token
  // with the first one's id and the last one's flags (add_tokens overwrites the token of that id). A content, or a
  // normalized content, longer than kMaxPieceBytes is refused: it bounds each search step of find.
  static Result<std::unique_ptr<AddedTokens>> build(
      const fb::HfTokenizer& table, int64_t vocab_size,
      const std::function<Result<std::string>(std::string_view)>& normalize);

  const std::vector<Token>& tokens() const { return tokens_; }
  // find_matches on `text` with the tokens that are not normalized (raw) or those that are: spans in order covering
  // the text (overlapping where an rstrip took text a later token matches, as in the Rust). With split_specials
  // false, special tokens are found and then dropped (encode_special_tokens).
  std::vector<Match> find(std::string_view text, bool normalized_set, bool split_specials) const;

 private:
  std::vector<Token> tokens_;
  PieceTrie raw_, normalized_;
  bool has_raw_ = false, has_normalized_ = false;
};

}  // namespace tern::hf
