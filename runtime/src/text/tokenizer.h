// SPDX-License-Identifier: MIT
// Text <-> token ids for a loaded model, from its Metadata.vocab (schema/README.md, "Tokenizers"): bytes, bytes
// shifted by an offset, a SentencePiece model encoded exactly as libsentencepiece does (sentencepiece.h), a
// Hugging Face tokenizer.json encoded exactly as the tokenizers library does (hf_tokenizer.h), or a list of words,
// characters or decimal bytes (symbol_vocab.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "format/status.h"
#include "text/hf_tokenizer.h"
#include "text/sentencepiece.h"
#include "text/symbol_vocab.h"
#include "tern_generated.h"

namespace tern {

class Tokenizer {
 public:
  enum class Kind { kBytes, kSentencePiece, kSymbols, kHf };

  // Checks the vocabulary (a hostile file's tokenizer fails here, naming what is wrong) and builds its tokenizer;
  // nullptr for a vocabulary without one (EXTERNAL, absent, or a kind this library does not know).
  static Result<std::unique_ptr<Tokenizer>> from_vocabulary(const fb::Vocabulary* vocab, int64_t vocab_size);

  // "bytes", "bytes+2", "sentencepiece-unigram", "sentencepiece-bpe", "hf-bpe", "hf-unigram", "words",
  // "characters", "bytes-decimal".
  const std::string& name() const { return name_; }
  // Appends the ids of text. Bytes: a byte whose id is outside the vocabulary is an error naming its offset.
  // tokenizer.json: tokenizers' encode(text, add_special_tokens=false), special added tokens split out.
  Status encode(std::string_view text, std::vector<int32_t>* ids) const { return encode(text, false, false, ids); }
  // add_special: tokenizer.json, the post-processor's ids around the text (add_special_tokens=true); the other
  // kinds, bos_id first when the vocabulary adds one (adds_bos). specials_as_text: tokenizer.json, special added
  // tokens' text is encoded as plain text (for untrusted input); the other kinds never read special tokens out of
  // text, so it changes nothing there.
  Status encode(std::string_view text, bool add_special, bool specials_as_text, std::vector<int32_t>* ids) const;
  // The text of a whole sequence (ids in [0, vocab_size)): SentencePiece drops the dummy prefix's space at the start;
  // tokenizer.json: tokenizers' decode(ids, skip_special_tokens=false).
  std::string decode(const int32_t* ids, size_t n) const;
  // The text id adds after other ids (ids in [0, vocab_size)); "" for special tokens. Byte tokens (bytes,
  // SentencePiece and tokenizer.json byte pieces, ByteLevel tokens) may give part of a UTF-8 character.
  std::string piece_text(int32_t id) const;
  int32_t bos_id() const { return bos_; }
  int32_t eos_id() const { return eos_; }
  // True for eos_id and the vocabulary's extra_eos_ids: the ids that end a generation.
  bool is_end(int32_t id) const;
  bool adds_bos() const { return add_bos_ && bos_ >= 0; }
  int32_t unk_id() const { return unk_; }
  int32_t pad_id() const { return pad_; }

 private:
  Tokenizer() = default;
  Kind kind_ = Kind::kBytes;
  std::string name_;
  int64_t vocab_size_ = 0;
  int32_t byte_offset_ = 0;
  int32_t bos_ = -1, eos_ = -1, unk_ = -1, pad_ = -1;
  std::vector<int32_t> extra_eos_;
  bool add_bos_ = false;
  std::unique_ptr<SentencePieceTokenizer> sentencepiece_;
  std::unique_ptr<SymbolVocab> symbols_;
  std::unique_ptr<HfTokenizer> hf_;
};

}  // namespace tern
