// SPDX-License-Identifier: MIT
// A Hugging Face tokenizer.json (fb::HfTokenizer, converted by tern-convert) encoded and decoded as tokenizers 0.23
// does, id for id: the text pipeline (hf_pipeline.h: added tokens, normalizers, pre-tokenizers) cuts the text into
// added tokens and words, the model (hf_bpe.h or hf_unigram.h) turns each word into ids, and the post-processor's
// single-sequence template adds its prefix and suffix ids when asked. Decoding: hf_decoders.h.
//
// A hostile file is refused at load with a message naming the field. Memory is bounded by the table: the vocabulary
// map, the BPE merge map and the Unigram trie are each proportional to the table's pieces or merges; encoding
// costs O(text bytes) besides the ids returned, decoding O(the ids' token bytes).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "format/status.h"
#include "tern_generated.h"
#include "text/hf_bpe.h"
#include "text/hf_decoders.h"
#include "text/hf_pipeline.h"
#include "text/hf_unigram.h"
#include "text/hf_vocab.h"

namespace tern {

class HfTokenizer {
 public:
  static Result<std::unique_ptr<HfTokenizer>> from_table(const fb::HfTokenizer& table, int64_t vocab_size);

  bool is_bpe() const { return bpe_ != nullptr; }
  // tokenizers' encode(text, add_special_tokens) ids, appended to *ids. split_specials false: special added tokens'
  // text is encoded as plain text (for untrusted input); the non-special added tokens are still split out.
  Status encode(std::string_view text, bool add_special_tokens, bool split_specials, std::vector<int32_t>* ids) const;
  // tokenizers' decode(ids, skip_special_tokens).
  std::string decode(const int32_t* ids, size_t n, bool skip_special) const {
    return decoders_->decode(ids, n, skip_special);
  }
  std::string piece_text(int32_t id) const { return decoders_->piece_text(id); }

 private:
  HfTokenizer() = default;
  HfVocab vocab_;  // the models and decoders point into it: an HfTokenizer never moves (held by unique_ptr)
  std::unique_ptr<HfTextPipeline> pipeline_;
  std::unique_ptr<HfBpe> bpe_;
  std::unique_ptr<HfUnigram> unigram_;
  std::unique_ptr<HfDecoders> decoders_;
  std::vector<int32_t> prefix_ids_, suffix_ids_;
};

}  // namespace tern
