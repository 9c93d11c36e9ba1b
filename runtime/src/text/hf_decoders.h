// SPDX-License-Identifier: MIT
// Ids -> text for a tokenizer.json (tokenizers 0.23, Tokenizer::decode and decoders/*): each id becomes its token
// (the added vocabulary's first, then the model's; ids with neither are dropped; with skip_special, tokens whose
// text is a special added token's are dropped), the decoder chain rewrites the token list, and the result is
// joined. No decoder: tokens joined with " ". The steps, each as its decode_chain:
//   BYTE_LEVEL     a token whose every character is one of GPT-2's byte characters becomes those bytes, any other
//                  token its own bytes; all are joined into one and read as UTF-8, invalid bytes U+FFFD (Rust's
//                  from_utf8_lossy);
//   METASPACE      content -> ' ' in each token, except that it is dropped in the first token unless
//                  prepend_scheme is NEVER;
//   BYTE_FALLBACK  runs of <0xNN> tokens become their bytes when those are UTF-8, else one U+FFFD per token;
//   FUSE           all tokens into one;
//   STRIP          up to `start` leading and `stop` trailing content characters off each token;
//   REPLACE        every match of pattern (a literal, or a regular expression) -> content, in each token.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "format/status.h"
#include "tern_generated.h"
#include "text/hf_vocab.h"

namespace tern {

class HfDecoders {
 public:
  // `vocab` must outlive the decoders. Checks the decoder steps (known kinds, one-character contents, patterns that
  // compile) and the added tokens' ids. Errors name the field: "hf_tokenizer.decoders[1]: ...".
  static Result<HfDecoders> create(const fb::HfTokenizer& table, const HfVocab* vocab);
  HfDecoders(HfDecoders&&) noexcept;
  HfDecoders& operator=(HfDecoders&&) noexcept;
  ~HfDecoders();

  // tokenizers' decode(ids, skip_special_tokens). Any ids accepted.
  std::string decode(const int32_t* ids, size_t n, bool skip_special) const;
  // The bytes id adds when streamed after other ids (a ByteLevel or <0xNN> token's bytes may be part of a UTF-8
  // character: the caller holds an incomplete tail back); an added token's content, "" for a special one.
  std::string piece_text(int32_t id) const;
  // The token of id as decode sees it (added vocabulary first), nullptr when there is none.
  const std::string_view* token(int32_t id) const;
  bool is_special_text(std::string_view token) const { return special_texts_.count(token) != 0; }

 private:
  struct Step;
  HfDecoders();
  // Runs the chain on tokens. streamed: the tokens follow earlier ones (no first-token rule, no whole-text
  // stripping after a Fuse or ByteLevel, raw bytes instead of lossy UTF-8).
  void run(std::vector<std::string>* tokens, bool streamed) const;

  const HfVocab* vocab_ = nullptr;
  std::vector<Step> steps_;
  std::unordered_map<int32_t, std::string_view> added_;  // added token id -> content
  std::unordered_set<std::string_view> special_texts_;   // contents of special added tokens
  std::unordered_set<int32_t> special_ids_;
};

}  // namespace tern
