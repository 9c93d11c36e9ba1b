// SPDX-License-Identifier: MIT
// The Unigram model of a tokenizer.json (tokenizers 0.23, models/unigram/model.rs: encode_optimized and tokenize),
// one pre-tokenized word at a time:
//   1. Viterbi over the word's bytes: from each character boundary, every token that is a prefix of the rest
//      (scores summed in double; a later candidate replaces an earlier one only when strictly better); a character
//      that no one-character token covers gets the unknown token, scored min_score - 10 (min over the model's
//      tokens); without an unknown token such a character is an error, as in the reference;
//   2. walking the best path back, consecutive unknown pieces (a matched unknown token's own text included) join
//      into one piece;
//   3. each piece becomes its token's id; a piece with none (a fused unknown run) becomes its bytes' <0xNN> tokens
//      with byte_fallback when all exist, else the unknown id.
// Scores are the file's floats (the reference reads doubles from tokenizer.json: the converter rounds them).
// Memory: the trie holds one node per distinct token prefix byte; a word costs O(its bytes) in scratch buffers.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "format/status.h"
#include "tern_generated.h"
#include "text/hf_vocab.h"
#include "text/sentencepiece_tables.h"

namespace tern {

class HfUnigram {
 public:
  struct Scratch {
    struct Node {
      double score;
      int64_t starts_at;  // -1: not reached yet
      int32_t id;
    };
    std::vector<Node> best;                             // [word bytes + 1]
    std::vector<std::pair<uint32_t, uint32_t>> pieces;  // [begin, end) of each piece, last first
  };

  // `vocab` must outlive the model. Checks scores ([vocab_size], finite) and unk_id (-1 or a model token).
  static Result<HfUnigram> create(const fb::HfTokenizer& table, const HfVocab* vocab);

  // Appends the ids of one word. Error: a character no token covers, in a model without an unknown token.
  Status encode_word(std::string_view word, Scratch* scratch, std::vector<int32_t>* ids) const;

 private:
  const HfVocab* vocab_ = nullptr;
  std::vector<double> scores_;  // [vocab_size]
  PieceTrie trie_;             // the model's tokens
  int32_t byte_ids_[256];
  int32_t unk_id_ = -1;
  double min_score_ = 0.0;
  bool byte_fallback_ = false;
};

}  // namespace tern
